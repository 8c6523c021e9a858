"""One stored run, gathered for reading: everything stored about it (`run_detail`, which
`show --json` prints) and what pgbench printed for it (its stdout kept zstd-compressed under the
results directory's artifacts/, or rebuilt from the stored report when that file is gone).
`render.run_text` lays it out for a person. Reads the store and the artifacts; writes nothing."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import zstandard

from pgbenchlab.errors import UserError
from pgbenchlab.profiles import PGBENCH
from pgbenchlab.report.views.text import affinity_text
from pgbenchlab.store import Store, run_artifacts, run_as_dict

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
    run = store.run_record(run_id)
    if run is None:
        raise UserError(f"no run with id {run_id}; see `pgbenchlab runs`")
    detail = run_as_dict(run, every_column=True)
    detail["seconds"] = [asdict(s) for s in store.seconds_by_run([run_id]).get(run_id, ())]
    detail |= telemetry_detail(store, run_id)
    detail["sysctl"] = store.run_sysctl(run_id)
    origin = store.origins_by_run([run_id]).get(run_id)  # its machine and shard (`run --shard`)
    detail["origin"] = asdict(origin) if origin else None
    detail["generators"] = [asdict(g) for g in store.run_generators(run_id)]
    detail["server_parts"] = [asdict(p) for p in store.run_server_parts(run_id)]  # a group's
    detail["server_build"] = server_build(store, int(detail["campaign_id"]), str(detail["server"]))
    profile = store.profiles_by_run([run_id]).get(run_id)
    detail["profile"] = None
    if profile is not None:  # the stacks themselves: `pgbenchlab profile RUN_ID`
        pgbench = store.profiles_by_run([run_id], PGBENCH).get(run_id)
        detail["profile"] = {
            "frequency_hz": profile.frequency_hz,
            "samples": profile.samples,
            "lost": profile.lost,
            "profiled": detail["spec"].get("profile"),
            "pgbench_samples": pgbench.samples if pgbench else None,
        }
    return detail


def server_build(store: Store, campaign_id: int, server: str) -> dict[str, Any] | None:
    """The provenance of the run's server when it was built from source."""
    for record in store.server_records(campaign_id):
        if record.name == server and record.build:
            return dict(record.build)
    return None


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
        "telemetry_gaps": [  # what the server's major (or the setup) could not report, and why
            {"source": source, "captured": captured, "note": note}
            for source, captured, note in store.telemetry_gaps(run_id)
        ],
        "cpu_affinity": [
            {**asdict(a), "verified": a.verified, "text": affinity_text(a)}
            for a in store.affinity_by_run([run_id]).get(run_id, ())
        ],
    }


def campaign_name(store: Store, campaign_id: int) -> str:
    campaign = store.campaign_record(campaign_id)
    assert campaign is not None  # the run refers to it
    return campaign.name


def stored_stdout(results_dir: Path, campaign: str, detail: dict[str, Any]) -> str | None:
    """pgbench's stdout as archived, or None when it was not kept, is gone, or its stored names
    lead out of the results directory."""
    kept = run_artifacts(
        results_dir, campaign, detail["campaign_id"], detail["sequence"], detail["run_key"]
    )
    if kept is None:
        return None
    path = kept / STDOUT_ARTIFACT
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
    """The main lines of pgbench's report, in its wording, from the parsed fields (the
    per-script and per-statement tables are left out)."""
    if not report:
        return ""
    lines = [
        header_line(report),
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
        latency_line(report),
        optional(report, "latency_stddev_ms", "latency stddev = {:.3f} ms"),
        lag_line(report),
        optional(report, "initial_connection_time_ms", "initial connection time = {:.3f} ms"),
        optional(report, "average_connection_time_ms", "average connection time = {:.3f} ms"),
        *tps_lines(report),
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


def major_version(report: dict[str, Any]) -> int | None:
    """pgbench's major version from its header (printed from 14 on; None before)."""
    client = str(report.get("client_version") or "")
    digits = client.split(".", 1)[0]
    return int(digits) if digits.isdigit() else None


def before_14(report: dict[str, Any]) -> bool:
    """pgbench 13 and older: no header and two tps lines."""
    return major_version(report) is None


def share(report: dict[str, Any], key: str) -> str:
    value = report.get(key)
    text = "NaN" if value is None else f"{value:.3f}"  # NaN: stored as null
    major = major_version(report)
    spaced = major is None or major <= 14  # "(2.116 %)" up to 14, "(2.116%)" from 15
    return f" ({text} %)" if spaced else f" ({text}%)"


def header_line(report: dict[str, Any]) -> str | None:
    client, server = report.get("client_version"), report.get("server_version")
    if client is None:  # pgbench before 14 prints no header
        return None
    return f"pgbench ({client}, server {server})" if server else f"pgbench ({client})"


def optional(report: dict[str, Any], key: str, template: str) -> str | None:
    value = report.get(key)
    return None if value is None else template.format(value)


def processed_line(report: dict[str, Any]) -> str:
    planned = report.get("transactions_planned")
    of = f"/{planned}" if planned is not None else ""
    return f"number of transactions actually processed: {report.get('transactions')}{of}"


def counted_line(report: dict[str, Any], key: str, label: str) -> str | None:
    count = report.get(key)
    return None if count is None else f"{label}: {count}{share(report, f'{key}_pct')}"


def late_line(report: dict[str, Any]) -> str | None:
    late, limit = report.get("late"), report.get("latency_limit_ms")
    if late is None or limit is None:
        return None
    of = f"/{report['late_of']}" if report.get("late_of") is not None else ""
    above = f"number of transactions above the {limit:.1f} ms latency limit"
    return f"{above}: {late}{of}{share(report, 'late_pct')}"


def latency_line(report: dict[str, Any]) -> str | None:
    value = report.get("latency_avg_ms")
    if value is None:
        return None
    failures = " (including failures)" if report.get("includes_failures") else ""
    return f"latency average = {value:.3f} ms{failures}"


def lag_line(report: dict[str, Any]) -> str | None:
    avg, peak = report.get("lag_avg_ms"), report.get("lag_max_ms")
    if avg is None:
        return None
    return f"rate limit schedule lag: avg {avg:.3f} (max {peak or 0:.3f}) ms"


def tps_lines(report: dict[str, Any]) -> list[str | None]:
    tps = report.get("tps")
    if tps is None:
        return []
    if before_14(report):
        including = optional(
            report, "tps_including_connections", "tps = {:f} (including connections establishing)"
        )
        return [including, f"tps = {tps:f} (excluding connections establishing)"]
    if report.get("reconnect_each_transaction"):
        return [f"tps = {tps:f} (including reconnection times)"]
    return [f"tps = {tps:f} (without initial connection time)"]
