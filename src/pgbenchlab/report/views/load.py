"""Read a campaign from the results database (and the kept raw files) into view-model records.

This is the only part of the report that does I/O on the results; everything downstream is a
pure function of the records read here, so a report can be regenerated at any time.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import zstandard

from pgbenchlab import findings
from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.redaction import redact_settings
from pgbenchlab.report.views.display_bins import display_histogram
from pgbenchlab.report.views.model import (
    CampaignView,
    EventView,
    HistogramView,
    Pairs,
    RunView,
    SecondView,
    ServerView,
    TelemetrySeries,
)
from pgbenchlab.report.views.telemetry_series import charted, drawn_series, wanted_sql
from pgbenchlab.store import Store

# Spec keys shown as axes of their own or implied by others; the rest tell cells apart as
# "options" when they differ (threads, vacuum, warmup, ...).
AXIS_SPEC_KEYS = frozenset(
    {
        "server",
        "server_settings",
        "scale",
        "workload",
        "clients",
        "protocol",
        "rate",
        "latency_limit_ms",
        "connect",
        "duration_s",
        "transactions",
    }
)
RAW_STDOUT = "stdout.txt.zst"
MAX_RAW_OUTPUT = 64_000  # characters of pgbench's report kept per run: it is short unless -r

Diagnosed = tuple[str, tuple[str, ...], float | None]  # verdict, evidence, other load


def server_label(name: str, variant: Mapping[str, Any]) -> str:
    """A server's name with its setting variant, the value of the report's "server" axis."""
    return name + "".join(f" {k}={v}" for k, v in sorted(variant.items()))


def load_campaign(store: Store, campaign_id: int) -> CampaignView:
    row = store.db.execute("SELECT * FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
    machine = json.loads(row["machine_json"] or "{}")
    return CampaignView(
        id=int(row["id"]),
        name=str(row["name"]),
        status=str(row["status"]),
        plan_path=str(row["plan_path"]),
        plan_text=str(row["plan_text"]),
        started_at=float(row["started_at"]),
        finished_at=_float(row["finished_at"]),
        pgbenchlab_version=str(row["pgbenchlab_version"]),
        pgbench_version=row["pgbench_version"],
        machine=flatten(machine),
        description=str(row["description"]),
    )


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> Pairs:
    """Nested facts as ("vm.swappiness", "60") pairs, absent values left out."""
    pairs: list[tuple[str, str]] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            pairs.extend(flatten(value, f"{prefix}{key}."))
        elif value is not None:
            pairs.append((f"{prefix}{key}", str(value)))
    return tuple(pairs)


def load_servers(store: Store, campaign_id: int) -> tuple[ServerView, ...]:
    servers = []
    for row in store.servers(campaign_id):
        # Masked again on the way out: databases written before settings were masked on the way in.
        variant = redact_settings(json.loads(row["variant_json"]))
        settings = redact_settings(json.loads(row["settings_json"]))
        servers.append(
            ServerView(
                label=server_label(str(row["name"]), variant),
                name=str(row["name"]),
                variant=tuple((str(k), str(v)) for k, v in sorted(variant.items())),
                kind=str(row["kind"]),
                version=str(row["version"]),
                version_num=int(row["version_num"]),
                install=row["install"],
                data_dir=row["data_dir"],
                settings=tuple((str(k), str(v)) for k, v in sorted(settings.items())),
            )
        )
    return tuple(servers)


def load_runs(store: Store, campaign_id: int, *, detail: bool = True) -> tuple[RunView, ...]:
    """The campaign's runs; with ``detail`` also their seconds, histograms, events and output."""
    rows = store.runs(campaign_id)
    ids = [int(row["id"]) for row in rows]
    diagnoses = _diagnoses_by_run(store.db, ids)
    if not detail:
        return tuple(run_from_row(row, **_diagnosis(diagnoses, row)) for row in rows)
    seconds = _seconds_by_run(store.db, ids)
    histograms = _histograms_by_run(store.db, ids)
    events = _events_by_run(store.db, ids)
    telemetry, left_out = _telemetry_by_run(store.db, rows)
    raw_dir = _artifacts_dir(store, campaign_id)
    runs = []
    for row in rows:
        run_id = int(row["id"])
        runs.append(
            run_from_row(
                row,
                seconds=tuple(seconds.get(run_id, ())),
                histogram=parse_histogram(histograms.get((run_id, "latency"))),
                service_histogram=parse_histogram(histograms.get((run_id, "service"))),
                events=tuple(events.get(run_id, ())),
                telemetry=telemetry.get(run_id, ()),
                telemetry_left_out=run_id in left_out,
                pgbench_output=_raw_output(raw_dir, row),
                **_diagnosis(diagnoses, row),
            )
        )
    return tuple(runs)


def _diagnosis(found: dict[int, Diagnosed], row: sqlite3.Row) -> dict[str, Any]:
    verdict, evidence, other_load = found.get(int(row["id"]), (None, (), None))
    return {"diagnosis": verdict, "diagnosis_evidence": evidence, "other_load_share": other_load}


def run_from_row(row: sqlite3.Row, **extra: Any) -> RunView:
    spec = json.loads(row["spec_json"])
    report = json.loads(row["report_json"] or "{}")
    settings = redact_settings(json.loads(row["server_settings_json"]))
    options = tuple(
        (str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True))
        for k, v in sorted(spec.items())
        if k not in AXIS_SPEC_KEYS
    )
    values: dict[str, Any] = {name: row[name] for name in _PLAIN_COLUMNS}
    return RunView(
        **values,
        server=server_label(str(row["server"]), settings),
        server_name=str(row["server"]),
        connect=bool(row["connect"]),
        options=options,
        late_share=_share(report.get("late_pct")),
        skipped_share=_share(report.get("skipped_pct")),
        retried=report.get("retried"),
        retries=report.get("retries"),
        argv=tuple(json.loads(row["argv_json"])),
        stored_warnings=findings.from_json(row["warnings_json"]),
        pgbench_output=extra.pop("pgbench_output", None),
        **extra,
    )


_PLAIN_COLUMNS = (
    *("id", "run_key", "cell_id", "sequence", "repeat", "status", "error", "scale", "workload"),
    *("clients", "threads", "protocol", "duration_s", "transactions_per_client", "warmup_s"),
    *("rate", "latency_limit_ms", "vacuum", "started_at", "finished_at", "tps", "transactions"),
    *("failed", "skipped", "late", "latency_avg_ms", "latency_stddev_ms", "lag_avg_ms"),
    *("lag_max_ms", "connection_time_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms"),
    *("min_ms", "max_ms", "latency_source", "latency_samples", "service_p50_ms"),
    *("service_p99_ms", "service_p999_ms", "warmup_tps", "client_cpu_s"),
    *("client_cpu_us_per_tx", "pgbench_version"),
)


def _share(percent: Any) -> float | None:
    """pgbench's printed percentage as a fraction; its "nan" (nothing to divide) as None."""
    if not isinstance(percent, int | float) or not math.isfinite(percent):
        return None
    return float(percent) / 100


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _chunks(ids: list[int], size: int = 500) -> Iterable[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _tuples(db: sqlite3.Connection, sql: str, parameters: list[Any]) -> sqlite3.Cursor:
    """A query's rows as plain tuples: faster than the store's named rows for long series."""
    cursor = db.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, parameters)


def _seconds_by_run(db: sqlite3.Connection, ids: list[int]) -> dict[int, list[SecondView]]:
    found: dict[int, list[SecondView]] = defaultdict(list)
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for run_id, *values in _tuples(
            db,
            "SELECT run_id, t, tps, latency_mean_ms, latency_min_ms, latency_max_ms, lag_ms "
            f"FROM run_seconds WHERE run_id IN ({marks}) ORDER BY run_id, t",
            chunk,
        ):
            found[run_id].append(SecondView(*values))
    return dict(found)


def _histograms_by_run(db: sqlite3.Connection, ids: list[int]) -> dict[tuple[int, str], str]:
    found: dict[tuple[int, str], str] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for r in db.execute(
            f"SELECT run_id, kind, histogram_json FROM run_histograms WHERE run_id IN ({marks})",
            chunk,
        ):
            found[(int(r[0]), str(r[1]))] = str(r[2])
    return found


def _events_by_run(db: sqlite3.Connection, ids: list[int]) -> dict[int, list[EventView]]:
    """Server events during runs (checkpoints, autovacuum) that telemetry recorded."""
    found: dict[int, list[EventView]] = defaultdict(list)
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for r in db.execute(
            f"SELECT run_id, t, kind, detail FROM run_events WHERE run_id IN ({marks}) "
            "ORDER BY run_id, t",
            chunk,
        ):
            found[int(r[0])].append(EventView(float(r[1]), str(r[2]), str(r[3])))
    return found


def _telemetry_by_run(
    db: sqlite3.Connection, rows: list[sqlite3.Row]
) -> tuple[dict[int, tuple[TelemetrySeries, ...]], set[int]]:
    """The telemetry series the detail of each run `charted` picks draws (only those rows are
    read: a thousand runs' would take seconds), and the runs whose telemetry is left out."""
    ids = [int(row["id"]) for row in rows]
    recorded: dict[int, tuple[float, int | None]] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for r in db.execute(
            f"SELECT run_id, duration_s, host_cpus FROM run_telemetry WHERE run_id IN ({marks})",
            chunk,
        ):
            recorded[int(r[0])] = (float(r[1]), r[2])
    chosen = charted(
        (int(row["id"]), int(row["repeat"]), int(row["sequence"]), recorded[int(row["id"])][0])
        for row in rows
        if int(row["id"]) in recorded
    )
    found: dict[int, list[tuple[str, str, int, float]]] = defaultdict(list)
    for chunk in _chunks(chosen):
        marks = ",".join("?" * len(chunk))
        for condition, parameters in wanted_sql():
            for run_id, source, metric, t, value in _tuples(
                db,
                "SELECT run_id, source, metric, t, value FROM run_telemetry_seconds "
                f"WHERE run_id IN ({marks}) AND {condition}",
                [*chunk, *parameters],
            ):
                found[run_id].append((source, metric, t, value))
    series = {run: drawn_series(found[run], recorded[run][1]) for run in chosen}
    return series, set(recorded) - set(chosen)


def _diagnoses_by_run(db: sqlite3.Connection, ids: list[int]) -> dict[int, Diagnosed]:
    """What limited each run, with its evidence, where telemetry could tell."""
    found: dict[int, Diagnosed] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for r in db.execute(
            "SELECT run_id, verdict, evidence_json, details_json FROM run_diagnosis "
            f"WHERE run_id IN ({marks})",
            chunk,
        ):
            evidence = tuple(str(e) for e in json.loads(r[2]))
            found[int(r[0])] = (
                str(r[1]),
                evidence,
                _float(json.loads(r[3]).get("other_load_share")),
            )
    return found


def parse_histogram(text: str | None) -> HistogramView | None:
    """A stored histogram on display bins; None if absent or not a format this reads."""
    if not text:
        return None
    try:
        return display_histogram(LatencyHistogram.from_json(text))
    except ValueError:
        return None


def _artifacts_dir(store: Store, campaign_id: int) -> Path:
    row = store.db.execute("SELECT name FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
    return store.path.parent / "artifacts" / f"{row[0]}-{campaign_id}"


def _raw_output(base: Path, row: sqlite3.Row) -> str | None:
    """pgbench's own report as it printed it, if the raw files were kept."""
    path = base / f"{int(row['sequence']):04d}-{row['run_key']}" / RAW_STDOUT
    try:
        data = zstandard.ZstdDecompressor().decompress(path.read_bytes(), max_output_size=1 << 24)
    except (OSError, zstandard.ZstdError):
        return None
    return data.decode(errors="replace")[:MAX_RAW_OUTPUT]
