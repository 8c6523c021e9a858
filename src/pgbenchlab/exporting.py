"""A campaign's runs as flat rows for people and scripts: tables, CSV, JSON and Parquet
exports; a followed branch's history as rows of (commit, time, cell, metric, value). One run in
detail is `report.views.run`'s."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import polars as pl

from pgbenchlab import files, jsontext
from pgbenchlab.errors import UserError
from pgbenchlab.report.views.follow import follow_view
from pgbenchlab.store import Store, run_as_dict

FORMATS = ("csv", "json", "parquet", "history")
HISTORY_COLUMNS = ("commit", "time", "cell", "metric", "value")


def history_rows(store: Store, follow: str | None) -> list[dict[str, Any]]:
    """A followed branch's figures (each commit's geometric mean over its runs), one row per
    commit, cell and metric, in branch order: one (cell, metric) of them is a series Apache
    Otava's CSV input reads (time_column: time, attributes: [commit], metrics: [value])."""
    names = store.follow_names()
    if not names:
        raise UserError(f"no followed branch in {store.path}: run `pgbenchlab follow` first")
    if follow is not None and follow not in names:
        raise UserError(f'no followed branch "{follow}" here; there are: {", ".join(names)}')
    view = follow_view(store, follow or names[-1])
    return [
        {
            "commit": f.commit.commit_hash,
            "time": f.commit.author_date,
            "cell": t.series.cell,
            "metric": t.series.metric,
            "value": f.figure,
        }
        for t in view.timelines
        for f in t.figures
    ]


def run_rows(store: Store, campaign_id: int) -> list[dict[str, Any]]:
    """The campaign's runs (the latest attempt of each), one flat dict per run."""
    return [run_as_dict(run) for run in store.run_records(campaign_id)]


def write(rows: list[dict[str, Any]], fmt: str, output: Path | None) -> None:
    """The rows as CSV or JSON on standard output, or in any format to ``output`` (written
    whole or not at all; its directory must exist)."""
    fmt = "csv" if fmt == "history" else fmt
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
