"""One stored run, gathered for reading: everything stored about it (`run_detail`, which
`show --json` prints) and what pgbench printed for it (its stdout kept zstd-compressed under the
results directory's artifacts/, or rebuilt from the stored report when that file is gone).
`runtext` lays it out for a person. Reads the store and the artifacts; writes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from pgbenchlab.errors import UserError
from pgbenchlab.exporting import JSON_COLUMNS
from pgbenchlab.store import Store

STDOUT_ARTIFACT = "stdout.txt.zst"
TOP_WAIT_EVENTS = 10


@dataclass(frozen=True)
class RunView:
    campaign: str
    detail: dict[str, Any]  # run_detail: the stored run, its seconds and its telemetry
    pgbench_output: str  # pgbench's report as it printed it, or rebuilt from the stored fields
    output_kept: bool  # True: pgbench_output is the stored stdout itself


def load(store: Store, run_id: int) -> RunView:
    detail = run_detail(store, run_id)
    campaign = campaign_name(store, int(detail["campaign_id"]))
    stdout = stored_stdout(store.path.parent, campaign, detail)
    if stdout is not None:
        return RunView(campaign, detail, stdout, output_kept=True)
    return RunView(campaign, detail, rebuilt_report(detail["report"]), output_kept=False)


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
        "ORDER BY samples DESC LIMIT ?",
        (run_id, TOP_WAIT_EVENTS),
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


def campaign_name(store: Store, campaign_id: int) -> str:
    return next(str(c["name"]) for c in store.campaigns() if c["id"] == campaign_id)


def artifact_dir(results_dir: Path, campaign: str, detail: dict[str, Any]) -> Path:
    """Where the runner kept the run's raw outputs (the layout of `Campaign.artifact_dir`)."""
    run_dir = f"{detail['sequence']:04d}-{detail['run_key']}"
    return results_dir / "artifacts" / f"{campaign}-{detail['campaign_id']}" / run_dir


def stored_stdout(results_dir: Path, campaign: str, detail: dict[str, Any]) -> str | None:
    """pgbench's stdout as archived, or None when it was not kept or is gone."""
    path = artifact_dir(results_dir, campaign, detail) / STDOUT_ARTIFACT
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        text = zstandard.ZstdDecompressor().decompressobj().decompress(data).decode()
    except (zstandard.ZstdError, UnicodeDecodeError):
        return None
    return text if text.strip() else None


def rebuilt_report(report: dict[str, Any]) -> str:
    """The main lines of pgbench's report, in its wording, from the parsed fields."""
    if not report:
        return ""
    lines = [
        f"pgbench ({report['client_version']})" if report.get("client_version") else None,
        f"transaction type: {report.get('transaction_type')}",
        f"scaling factor: {report.get('scale')}",
        f"query mode: {report.get('query_mode')}",
        f"number of clients: {report.get('clients')}",
        f"number of threads: {report.get('threads')}",
        optional(report, "max_tries", "maximum number of tries: {}"),
        optional(report, "duration_s", "duration: {} s"),
        optional(report, "transactions_per_client", "number of transactions per client: {}"),
        processed_line(report),
        counted_line(report, "failed", "number of failed transactions"),
        counted_line(report, "skipped", "number of transactions skipped"),
        late_line(report),
        optional(report, "latency_avg_ms", "latency average = {:.3f} ms"),
        optional(report, "latency_stddev_ms", "latency stddev = {:.3f} ms"),
        lag_line(report),
        optional(report, "initial_connection_time_ms", "initial connection time = {:.3f} ms"),
        optional(report, "average_connection_time_ms", "average connection time = {:.3f} ms"),
        optional(report, "tps", "tps = {:f} (without initial connection time)"),
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


def optional(report: dict[str, Any], key: str, template: str) -> str | None:
    value = report.get(key)
    return None if value is None else template.format(value)


def processed_line(report: dict[str, Any]) -> str:
    planned = report.get("transactions_planned")
    of = f"/{planned}" if planned is not None else ""
    return f"number of transactions actually processed: {report.get('transactions')}{of}"


def counted_line(report: dict[str, Any], key: str, label: str) -> str | None:
    count, share = report.get(key), report.get(f"{key}_pct")
    if count is None:
        return None
    return f"{label}: {count}" + (f" ({share:.3f}%)" if share is not None else "")


def late_line(report: dict[str, Any]) -> str | None:
    late, limit = report.get("late"), report.get("latency_limit_ms")
    if late is None or limit is None:
        return None
    of = f"/{report['late_of']}" if report.get("late_of") is not None else ""
    share = f" ({report['late_pct']:.3f}%)" if report.get("late_pct") is not None else ""
    return f"number of transactions above the {limit:g} ms latency limit: {late}{of}{share}"


def lag_line(report: dict[str, Any]) -> str | None:
    avg, peak = report.get("lag_avg_ms"), report.get("lag_max_ms")
    if avg is None:
        return None
    return f"rate limit schedule lag: avg {avg:.3f} (max {peak or 0:.3f}) ms"
