"""Runs as rows for people and scripts: tables, CSV, JSON and Parquet exports."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl

from pgbenchlab import files, jsontext
from pgbenchlab.errors import UserError
from pgbenchlab.store import Store

FORMATS = ("csv", "json", "parquet")
JSON_COLUMNS = (
    "server_settings_json",
    "spec_json",
    "argv_json",
    "report_json",
    "warnings_json",
    "artifacts_json",
)
EXPORT_SKIP = ("spec_json", "report_json")


def run_rows(store: Store, campaign_id: int) -> list[dict[str, Any]]:
    """The campaign's runs (the latest attempt of each), one flat dict per run."""
    rows = []
    for row in store.runs(campaign_id):
        record = {k: v for k, v in dict(row).items() if k not in EXPORT_SKIP}
        for key in JSON_COLUMNS:
            if key in record:
                record[key.removesuffix("_json")] = json.loads(record.pop(key))
        rows.append(record)
    return rows


def run_detail(store: Store, run_id: int) -> dict[str, Any]:
    row = store.run(run_id)
    if row is None:
        raise UserError(f"no run with id {run_id}; see `pgbenchlab runs`")
    detail = dict(row)
    for key in JSON_COLUMNS:
        detail[key.removesuffix("_json")] = json.loads(detail.pop(key))
    detail["seconds"] = [dict(s) for s in store.seconds(run_id)]
    for s in detail["seconds"]:
        s.pop("run_id", None)
    detail |= telemetry_detail(store, run_id)
    return detail


def telemetry_detail(store: Store, run_id: int) -> dict[str, Any]:
    """What limited the run and the evidence: diagnosis, top wait events, server-log events."""
    diagnosis = store.db.execute(
        "SELECT verdict, evidence_json FROM run_diagnosis WHERE run_id = ?", (run_id,)
    ).fetchone()
    rounds = store.db.execute(
        "SELECT activity_rounds FROM run_telemetry WHERE run_id = ?", (run_id,)
    ).fetchone()
    waits = store.db.execute(
        "SELECT wait_event_type, wait_event, samples FROM run_wait_events WHERE run_id = ? "
        "ORDER BY samples DESC LIMIT 10",
        (run_id,),
    ).fetchall()
    events = store.db.execute(
        "SELECT t, kind, detail FROM run_events WHERE run_id = ? ORDER BY t", (run_id,)
    ).fetchall()
    per_round = rounds[0] if rounds and rounds[0] else None
    return {
        "diagnosis": (
            {"verdict": diagnosis[0], "evidence": json.loads(diagnosis[1])} if diagnosis else None
        ),
        "wait_events": [
            {
                "type": w[0],
                "event": w[1],
                "samples": w[2],
                "average_backends": w[2] / per_round if per_round else None,
            }
            for w in waits
        ],
        "server_events": [dict(e) for e in events],
    }


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
