"""A campaign's runs as flat rows for people and scripts: tables, CSV, JSON and Parquet
exports. One run in detail is `report.views.run`'s."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import polars as pl

from pgbenchlab import files, jsontext
from pgbenchlab.errors import UserError
from pgbenchlab.store import Store, run_as_dict

FORMATS = ("csv", "json", "parquet")


def run_rows(store: Store, campaign_id: int) -> list[dict[str, Any]]:
    """The campaign's runs (the latest attempt of each), one flat dict per run."""
    return [run_as_dict(run) for run in store.run_records(campaign_id)]


def write(rows: list[dict[str, Any]], fmt: str, output: Path | None) -> None:
    """The rows as CSV or JSON on standard output, or in any format to ``output`` (written
    whole or not at all; its directory must exist)."""
    if output is None and fmt == "parquet":
        raise UserError("parquet is binary: give -o FILE")
    data = encode(rows, fmt)
    if output is None:
        sys.stdout.write(data.decode())
        return
    files.write_output(output, data, f"the {fmt} export", "give -o a file in a writable directory")


def encode(rows: list[dict[str, Any]], fmt: str) -> bytes:
    if fmt == "json":
        return (jsontext.dumps(rows, indent=2) + "\n").encode()
    flat = [
        {k: jsontext.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()}
        for r in rows
    ]
    frame = pl.DataFrame(flat, infer_schema_length=None)
    if fmt == "csv":
        return frame.write_csv().encode()
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()
