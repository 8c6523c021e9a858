"""Runs as rows for people and scripts: tables, CSV, JSON and Parquet exports."""

from __future__ import annotations

import io
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from pgbenchlab import files, jsontext
from pgbenchlab.errors import UserError
from pgbenchlab.store import RUN_COLUMNS, RunRecord, Store

FORMATS = ("csv", "json", "parquet")
TOP_WAIT_EVENTS = 10


def exported(run: RunRecord, *, every_column: bool = False) -> dict[str, Any]:
    """A run as one flat dict: its id, campaign and registry columns (JSON ones decoded, under
    their names without ``_json``); the cell's spec and pgbench's parsed report only with
    ``every_column``."""
    record: dict[str, Any] = {"id": run.id, "campaign_id": run.campaign_id}
    wanted = [c for c in RUN_COLUMNS if c.exported or every_column]
    for column in sorted(wanted, key=lambda c: c.json):  # the JSON ones last
        record[column.key] = run[column.key]
    return record


def run_rows(store: Store, campaign_id: int) -> list[dict[str, Any]]:
    """The campaign's runs (the latest attempt of each), one flat dict per run."""
    return [exported(run) for run in store.run_records(campaign_id)]


def run_detail(store: Store, run_id: int) -> dict[str, Any]:
    run = store.run_record(run_id)
    if run is None:
        raise UserError(f"no run with id {run_id}; see `pgbenchlab runs`")
    detail = exported(run, every_column=True)
    detail["seconds"] = [asdict(s) for s in store.seconds_by_run([run_id]).get(run_id, ())]
    detail |= telemetry_detail(store, run_id)
    return detail


def telemetry_detail(store: Store, run_id: int) -> dict[str, Any]:
    """What limited the run and the evidence: diagnosis, top wait events, server-log events."""
    diagnosis = store.diagnoses_by_run([run_id]).get(run_id)
    facts = store.telemetry_facts_by_run([run_id]).get(run_id)
    per_round = facts.activity_rounds if facts and facts.activity_rounds else None
    return {
        "diagnosis": (
            {"verdict": diagnosis.verdict, "evidence": list(diagnosis.evidence)}
            if diagnosis
            else None
        ),
        "wait_events": [
            {
                "type": w.wait_event_type,
                "event": w.wait_event,
                "samples": w.samples,
                "average_backends": w.samples / per_round if per_round else None,
            }
            for w in store.wait_events(run_id, TOP_WAIT_EVENTS)
        ],
        "server_events": [asdict(e) for e in store.events_by_run([run_id]).get(run_id, ())],
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
