"""JSON that every reader accepts: NaN and infinity, which Python's json writes as bare tokens
no standard parser reads, become null. Every JSON pgbenchlab prints or writes goes through
`dumps`."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """The value with every non-finite float (at any depth) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    return json.dumps(finite(value), allow_nan=False, **options)
