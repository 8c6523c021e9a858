"""The Vega, Vega-Lite and vega-embed JavaScript, inlined in every HTML report.

vl-convert builds the bundle on demand, which takes seconds; it is cached per vl-convert version
in the user's cache directory so that a report is written in well under a second afterwards.
"""

from __future__ import annotations

import functools
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import vl_convert

# The globals the page script uses.
EXPORTS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgbenchlab"


@functools.cache
def javascript() -> str:
    """The bundle, defining window.vegaEmbed, window.vega and window.vegaLite."""
    version = f"{vl_convert.get_vega_version()}-{vl_convert.get_vega_embed_version()}"
    path = cache_dir() / f"vega-bundle-{version}-{_vl_convert_version()}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text: str = vl_convert.javascript_bundle(EXPORTS)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)  # atomic: a concurrent writer never leaves half a file
    except OSError:
        pass  # a read-only home only costs the rebuild next time
    return text


def _vl_convert_version() -> str:
    try:
        return version("vl-convert-python")
    except PackageNotFoundError:
        return "unknown"
