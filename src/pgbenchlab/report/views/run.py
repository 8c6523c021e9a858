"""One stored run, gathered for reading: everything stored about it (`run_detail`, which
`show --json` prints) and what pgbench printed for it (its stdout kept zstd-compressed under the
results directory's artifacts/, or rebuilt from the stored report when that file is gone).
`render.run_text` lays it out for a person. Reads the store and the artifacts; writes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import zstandard

from pgbenchlab.errors import UserError
from pgbenchlab.pgbench.report import PgbenchReport
from pgbenchlab.profiles import PGBENCH
from pgbenchlab.report.views.setup import setup_facts
from pgbenchlab.report.views.text import affinity_text
from pgbenchlab.results import ServerPart
from pgbenchlab.store import Store, run_artifacts, run_as_dict

STDOUT_ARTIFACT = "stdout.txt.zst"
TOP_WAIT_EVENTS = 10


@dataclass(frozen=True)
class RunDetail:
    """One stored run for a person to read (`show`)."""

    campaign: str
    detail: dict[str, Any]  # run_detail: the stored run, its seconds and its telemetry
    pgbench_output: str  # pgbench's report as it printed it, or rebuilt from the stored fields
    output_kept: bool  # True: pgbench_output is the stored stdout itself


def load(store: Store, run_id: int) -> RunDetail:
    detail = run_detail(store, run_id)
    campaign = campaign_name(store, int(detail["campaign_id"]))
    stdout = stored_stdout(store.path.parent, campaign, detail)
    if stdout is not None:
        return RunDetail(campaign, detail, stdout, output_kept=True)
    return RunDetail(campaign, detail, rebuilt_report(stored_report(detail)), output_kept=False)


def stored_report(detail: Mapping[str, Any]) -> PgbenchReport | None:
    """pgbench's report as the run's detail holds it (JSON, as `show --json` prints it)."""
    return PgbenchReport.from_stored(detail["report"])


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
    detail["server_parts"] = [part_detail(p) for p in store.run_server_parts(run_id)]  # a group's
    detail["server_build"] = server_build(store, int(detail["campaign_id"]), str(detail["server"]))
    setup = setup_facts(store, int(detail["campaign_id"])).get(str(detail["server"]))
    if setup:  # its tablespaces and one-off preparations, when the plan asked for them
        detail["server_setup"] = [list(fact) for fact in setup]
    profile = store.profiles_by_run([run_id]).get(run_id)
    detail["profile"] = None
    if profile is not None:  # the stacks themselves: `pgbenchlab profile RUN_ID`
        pgbench = store.profiles_by_run([run_id], PGBENCH).get(run_id)
        detail["profile"] = {
            "frequency_hz": profile.frequency_hz,
            "samples": profile.samples,
            "lost": profile.lost,
            "counter": profile.counter,
            "profiled": detail["spec"].get("profile"),
            "pgbench_samples": pgbench.samples if pgbench else None,
        }
    return detail


def part_detail(part: ServerPart) -> dict[str, Any]:
    """A member's part as shown: what its verdict was judged on is the store's to keep."""
    shown = asdict(replace(part, details={}, observed=None))
    return {k: v for k, v in shown.items() if k not in ("details", "observed")}


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


def rebuilt_report(report: PgbenchReport | None) -> str:
    """The main lines of pgbench's report, in its wording, from the parsed fields (the
    per-script and per-statement tables are left out)."""
    if report is None:
        return ""
    r = report
    lines = [
        header_line(r),
        f"transaction type: {r.transaction_type}",
        f"scaling factor: {r.scale}",
        f"query mode: {r.query_mode}",
        f"number of clients: {r.clients}",
        f"number of threads: {r.threads}",
        optional(r.max_tries, "maximum number of tries: {}"),
        optional(r.duration_s, "duration: {} s"),
        optional(r.transactions_per_client, "number of transactions per client: {}"),
        processed_line(r),
        counted_line(r, r.failed, r.failed_pct, "number of failed transactions"),
        counted_line(r, r.skipped, r.skipped_pct, "number of transactions skipped"),
        late_line(r),
        latency_line(r),
        optional(r.latency_stddev_ms, "latency stddev = {:.3f} ms"),
        lag_line(r),
        optional(r.initial_connection_time_ms, "initial connection time = {:.3f} ms"),
        optional(r.average_connection_time_ms, "average connection time = {:.3f} ms"),
        *tps_lines(r),
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


def major_version(report: PgbenchReport) -> int | None:
    """pgbench's major version from its header (printed from 14 on; None before)."""
    digits = (report.client_version or "").split(".", 1)[0]
    return int(digits) if digits.isdigit() else None


def before_14(report: PgbenchReport) -> bool:
    """pgbench 13 and older: no header and two tps lines."""
    return major_version(report) is None


def share(report: PgbenchReport, value: float | None) -> str:
    text = "NaN" if value is None else f"{value:.3f}"  # NaN: stored as null
    major = major_version(report)
    spaced = major is None or major <= 14  # "(2.116 %)" up to 14, "(2.116%)" from 15
    return f" ({text} %)" if spaced else f" ({text}%)"


def header_line(report: PgbenchReport) -> str | None:
    client, server = report.client_version, report.server_version
    if client is None:  # pgbench before 14 prints no header
        return None
    return f"pgbench ({client}, server {server})" if server else f"pgbench ({client})"


def optional(value: object, template: str) -> str | None:
    return None if value is None else template.format(value)


def processed_line(report: PgbenchReport) -> str:
    planned = report.transactions_planned
    of = f"/{planned}" if planned is not None else ""
    return f"number of transactions actually processed: {report.transactions}{of}"


def counted_line(
    report: PgbenchReport, count: int | None, percent: float | None, label: str
) -> str | None:
    return None if count is None else f"{label}: {count}{share(report, percent)}"


def late_line(report: PgbenchReport) -> str | None:
    late, limit = report.late, report.latency_limit_ms
    if late is None or limit is None:
        return None
    of = f"/{report.late_of}" if report.late_of is not None else ""
    above = f"number of transactions above the {limit:.1f} ms latency limit"
    return f"{above}: {late}{of}{share(report, report.late_pct)}"


def latency_line(report: PgbenchReport) -> str | None:
    value = report.latency_avg_ms
    if value is None:
        return None
    failures = " (including failures)" if report.includes_failures else ""
    return f"latency average = {value:.3f} ms{failures}"


def lag_line(report: PgbenchReport) -> str | None:
    avg, peak = report.lag_avg_ms, report.lag_max_ms
    if avg is None:
        return None
    return f"rate limit schedule lag: avg {avg:.3f} (max {peak or 0:.3f}) ms"


def tps_lines(report: PgbenchReport) -> list[str | None]:
    tps = report.tps
    if tps is None:
        return []
    if before_14(report):
        including = optional(
            report.tps_including_connections, "tps = {:f} (including connections establishing)"
        )
        return [including, f"tps = {tps:f} (excluding connections establishing)"]
    if report.reconnect_each_transaction:
        return [f"tps = {tps:f} (including reconnection times)"]
    return [f"tps = {tps:f} (without initial connection time)"]
