"""The telemetry a run's detail draws beside its TPS: which stored metrics, in which units.

Only the metrics named here are read from `run_telemetry_seconds` and embedded in the page:
wait events, host and process CPU, the data disk, WAL and commits. Each becomes a
`TelemetrySeries` of one chart dataset. A series that is 0 every second is left out, and a
source the run lacks (pg_stat_wal before 14, /proc of an external server) has no series at
all: its chart is not drawn, never drawn as zeros.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pgbenchlab.report.views.model import TelemetrySeries
from pgbenchlab.telemetry.osstats import MB

# Chart datasets, one per kind of figure (a chart layer draws one).
WAITS = "tel_waits"  # benchmark backends per wait event
HOST_CPU = "tel_host"  # the host's CPU time by state, in cores
PROCESS_CPU = "tel_procs"  # the server's processes and pgbench, in cores
IO = "tel_io"  # data disk and WAL, MiB/s
DISK_BUSY = "tel_busy"  # data disk utilisation, %
COMMITS = "tel_commits"  # commits and WAL flushes per second
LIMITS = "run_limits"  # {s, v}: pgbench's threads, a level its CPU cannot pass

ACTIVITY = "pg_stat_activity"
HOST_SHARE = -1.0  # factor marker: a share of all CPUs (%), drawn in cores
# Wait-event types in stacking order (bottom first): running, then the waits that queue work,
# then waiting for pgbench. A type not listed stacks after these.
WAIT_TYPES = (
    "CPU",
    "LWLock",
    "Lock",
    "BufferPin",
    "IO",
    "IPC",
    "Timeout",
    "Extension",
    "Activity",
    "InjectionPoint",
    "Client",
)
MAX_EVENTS = 8  # wait events drawn on their own; rarer ones are summed as "<type>:other"
# Measured run time whose telemetry a report draws at most (3 h 20 min: 200 runs of 60 s, about
# 0.7 MB of page), so that a report of a thousand runs stays within 5 MB.
TELEMETRY_SECONDS = 12_000


@dataclass(frozen=True)
class Drawn:
    dataset: str
    label: str
    factor: float  # stored value × factor = drawn value (HOST_SHARE: × host CPUs / 100)


# (source, metric) → how it is drawn, in legend order. Two metrics may draw the same label on
# different server versions (WAL flushes: pg_stat_wal to 17, pg_stat_io from 18).
DRAWN: dict[tuple[str, str], Drawn] = {
    ("cpu", "user_pct"): Drawn(HOST_CPU, "host: user", HOST_SHARE),
    ("cpu", "system_pct"): Drawn(HOST_CPU, "host: system", HOST_SHARE),
    ("cpu", "iowait_pct"): Drawn(HOST_CPU, "host: iowait", HOST_SHARE),
    ("cpu", "steal_pct"): Drawn(HOST_CPU, "host: steal", HOST_SHARE),
    ("processes", "server_cpu_s"): Drawn(PROCESS_CPU, "server: on a CPU", 1.0),
    ("processes", "server_wait_s"): Drawn(PROCESS_CPU, "server: waiting for a CPU", 1.0),
    ("processes", "pgbench_cpu_s"): Drawn(PROCESS_CPU, "pgbench: on a CPU", 1.0),
    ("processes", "pgbench_wait_s"): Drawn(PROCESS_CPU, "pgbench: waiting for a CPU", 1.0),
    ("disk", "read_mb_per_s"): Drawn(IO, "data disk: read", 1.0),
    ("disk", "write_mb_per_s"): Drawn(IO, "data disk: written", 1.0),
    ("pg_stat_wal", "wal_bytes"): Drawn(IO, "WAL: generated", 1.0 / MB),
    ("disk", "util_pct"): Drawn(DISK_BUSY, "data disk: busy", 1.0),
    ("pg_stat_database", "xact_commit"): Drawn(COMMITS, "commits", 1.0),
    ("pg_stat_wal", "wal_sync"): Drawn(COMMITS, "WAL flushes", 1.0),
    ("pg_stat_io", "wal.fsyncs"): Drawn(COMMITS, "WAL flushes", 1.0),
}

Row = tuple[str, str, int, float]  # source, metric, t, value: a run_telemetry_seconds row


def wanted() -> dict[str, tuple[str, ...] | None]:
    """The run_telemetry_seconds rows the detail draws: per source, its drawn metrics (every
    metric of the wait-event source, None)."""
    metrics: dict[str, list[str]] = defaultdict(list)
    for source, metric in DRAWN:
        metrics[source].append(metric)
    return {ACTIVITY: None, **{source: tuple(names) for source, names in metrics.items()}}


def charted(runs: Iterable[tuple[int, int, int, float]]) -> list[int]:
    """Of the runs with telemetry, given as (id, repeat, sequence, measured seconds), those
    whose telemetry the report draws: the first repeat of every cell, then the second, and so
    on (in run order within a repeat), while their measured time stays within
    `TELEMETRY_SECONDS`. The drawn series cost about 60 bytes of page per second of run."""
    budget = float(TELEMETRY_SECONDS)
    chosen = []
    for run_id, _repeat, _sequence, measured in sorted(runs, key=lambda r: (r[1], r[2])):
        seconds = round(measured)  # -T 60 lasts 60.0x s
        if seconds > budget:
            break
        budget -= seconds
        chosen.append(run_id)
    return chosen


def drawn_series(rows: Iterable[Row], host_cpus: int | None) -> tuple[TelemetrySeries, ...]:
    """One run's rows (any order) as the series its detail draws."""
    points: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for source, metric, t, value in rows:
        points[(source, metric)][t] = value
    waits = {metric: p for (source, metric), p in points.items() if source == ACTIVITY}
    found = _wait_series(waits)
    labels = set()
    for key, how in DRAWN.items():
        factor = how.factor if how.factor != HOST_SHARE else (host_cpus or 0) / 100
        series = points.get(key)
        if not series or not factor or how.label in labels or not any(series.values()):
            continue
        labels.add(how.label)
        ts = tuple(sorted(series))
        found.append(TelemetrySeries(how.dataset, how.label, ts, _scaled(series, ts, factor)))
    return tuple(found)


def _scaled(series: dict[int, float], ts: tuple[int, ...], factor: float) -> tuple[float, ...]:
    return tuple(series[t] * factor for t in ts)


def _wait_series(waits: dict[str, dict[int, float]]) -> list[TelemetrySeries]:
    """Average backends per wait event and second, 0 in the sampled seconds an event was not
    seen; beyond the `MAX_EVENTS` busiest events, the rest summed per type."""
    seconds = tuple(sorted({t for by_t in waits.values() for t in by_t}))
    busiest = sorted(waits, key=lambda m: -sum(waits[m].values()))
    merged: dict[str, dict[int, float]] = {m: waits[m] for m in busiest[:MAX_EVENTS]}
    for metric in busiest[MAX_EVENTS:]:
        other = merged.setdefault(f"{_wait_type(metric)}:other", {})
        for t, value in waits[metric].items():
            other[t] = other.get(t, 0.0) + value
    return [
        TelemetrySeries(WAITS, label, seconds, tuple(by_t.get(t, 0.0) for t in seconds))
        for label, by_t in sorted(merged.items(), key=lambda item: _wait_order(item[0]))
        if any(by_t.values())
    ]


def _wait_type(label: str) -> str:
    return label.split(":", 1)[0]


def _wait_order(label: str) -> tuple[int, str]:
    kind = _wait_type(label)
    return (WAIT_TYPES.index(kind) if kind in WAIT_TYPES else len(WAIT_TYPES), label)
