"""Immutable telemetry records: what the server and the OS did during one measured run.

Time axis: ``t`` is seconds since the measured pgbench was started. A per-second point at
``t = 3`` covers the interval (2, 3], like pgbench's ``-P 1`` lines. Counters are stored as
rates (per second) in the series and as deltas over the whole run in the totals; gauges
(memory) appear in the series only. A metric the server version or the platform lacks is
absent — no point, no total — and its source's `SourceStatus` says why; it is never zero.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, astuple, dataclass, field, fields
from typing import Any

from pgbenchlab.records.costs import RunCosts

# The server_log note of an external server's run without a host; any other note of an absent
# server log says what went wrong.
NO_LOG_ACCESS = "no access to the server's log"


@dataclass(frozen=True)
class SourceStatus:
    """Whether a telemetry source was captured for a run, and if not (or partly), why."""

    source: str  # pg_stat_wal, pg_stat_io, cpu, disk, server_log, ...
    available: bool
    note: str = ""  # why absent, or what part is absent (e.g. times without track_io_timing)


@dataclass(frozen=True)
class Point:
    """One value of a per-second series."""

    source: str
    metric: str
    t: int
    value: float


@dataclass(frozen=True)
class Total:
    """A counter's delta over the whole measured run, or a figure derived over it."""

    source: str
    metric: str
    value: float


@dataclass(frozen=True)
class WaitCount:
    """How many pg_stat_activity samples saw a benchmark backend in this state.

    ``CPU/CPU`` is an active backend with no wait event (running or runnable); ``Client/
    ClientRead`` is a backend waiting for pgbench.
    """

    wait_event_type: str
    wait_event: str
    samples: int


@dataclass(frozen=True)
class LogEvent:
    """An event from the server log, on the run's time axis."""

    t: float
    kind: str  # checkpoint_start, checkpoint_end, autovacuum, autoanalyze, error, ...
    summary: str  # one readable line
    detail: dict[str, object]


@dataclass(frozen=True)
class Statement:
    """One statement's pg_stat_statements activity during the run (deltas)."""

    rank: int
    queryid: int
    query: str
    calls: int
    total_time_ms: float
    rows: int
    shared_blks_hit: int
    shared_blks_read: int
    shared_blks_written: int
    wal_bytes: float | None


@dataclass(frozen=True)
class Affinity:
    """The CPUs the kernel allowed a role's processes during the run (Cpus_allowed_list), the
    memory nodes (Mems_allowed_list) and, where the plan placed them, their NUMA policy as the
    kernel states it (numa_maps: "bind:0", "interleave:0-1")."""

    role: str  # server (the postmaster and its children) | pgbench
    requested: str | None  # the plan's CPU list (canonical), None when not pinned
    observed: tuple[str, ...]  # the distinct lists the processes had
    processes: int  # how many processes were checked
    numa_requested: str | None = None  # the plan's NUMA policy ("membind=0"), None: none
    memory_nodes: tuple[str, ...] = ()  # the distinct Mems_allowed_list the processes had
    numa_policies: tuple[str, ...] = ()  # the policy numa_maps shows (read where placed)

    @property
    def verified(self) -> bool | None:
        """Every process checked ran on exactly the requested CPUs (None: nothing asked)."""
        if self.requested is None:
            return None
        return self.observed == (self.requested,)

    @property
    def cpus(self) -> str | None:
        """The one CPU list all its processes had, if they agreed."""
        return self.observed[0] if len(self.observed) == 1 else None


@dataclass(frozen=True)
class RunTelemetry:
    """Everything sampled beside one measured pgbench run."""

    started_at: float  # epoch seconds of t = 0 (pgbench started)
    duration_s: float  # from t = 0 to the final sample (right after pgbench exited)
    server_version_num: int | None
    activity_rounds: int  # pg_stat_activity samples taken
    counter_rounds: int  # cumulative-view and OS samples taken (baseline and final included)
    sources: tuple[SourceStatus, ...]
    series: tuple[Point, ...]
    totals: tuple[Total, ...]
    waits: tuple[WaitCount, ...]
    events: tuple[LogEvent, ...]
    statements: tuple[Statement, ...]
    pgbench_threads: int | None = None
    host_cpus: int | None = None
    server_settings: dict[str, str] = field(default_factory=dict)  # the few that matter here
    errors: tuple[str, ...] = ()  # what went wrong while sampling (the run itself stands)
    # how pgbench's backends were connected (pg_stat_ssl): TLS protocol and cipher, None
    # without TLS or when no backend was seen
    tls_protocol: str | None = None
    tls_cipher: str | None = None
    # statements the sampler sent between its first and final counter samples: each commits in
    # the benchmark's database (the commit cross-check subtracts them; not stored)
    sampler_statements: int = 0
    affinity: tuple[Affinity, ...] = ()  # the CPUs the server's processes and pgbench had
    costs: RunCosts | None = None  # what the server spent over the run (`telemetry.costs`)

    def affinity_of(self, role: str) -> Affinity | None:
        return next((a for a in self.affinity if a.role == role), None)

    def total(self, source: str, metric: str) -> float | None:
        for item in self.totals:
            if item.source == source and item.metric == metric:
                return item.value
        return None

    def points(self, source: str, metric: str) -> list[tuple[int, float]]:
        return [(p.t, p.value) for p in self.series if p.source == source and p.metric == metric]

    def available(self, source: str) -> bool:
        return any(s.source == source and s.available for s in self.sources)

    def unavailable_because(self, source: str) -> str | None:
        """Why a source was not captured (its note), None when it was or was not tried."""
        found = next((s for s in self.sources if s.source == source), None)
        return None if found is None or found.available else found.note

    def events_of(self, *kinds: str) -> Iterator[LogEvent]:
        return (e for e in self.events if e.kind in kinds)

    def stored(self) -> dict[str, Any]:
        """The record as JSON: each collection's records as rows of their fields' values."""
        found = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ROWS:
            found[name] = [list(astuple(item)) for item in found[name]]
        found["errors"] = list(self.errors)
        found["affinity"] = [asdict(a) for a in self.affinity]
        found["costs"] = None if self.costs is None else self.costs.stored()
        return found

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> RunTelemetry:
        values = {f.name: stored[f.name] for f in fields(cls) if f.name in stored}
        for name, record in ROWS.items():
            values[name] = tuple(record(*row) for row in stored[name])
        values["errors"] = tuple(stored["errors"])
        values["affinity"] = tuple(_affinity(a) for a in stored["affinity"])
        costs = stored["costs"]
        values["costs"] = None if costs is None else RunCosts.from_stored(costs)
        return cls(**values)


# The collections `RunTelemetry.stored` keeps as rows, and the record of each row.
ROWS: dict[str, Any] = {
    "sources": SourceStatus,
    "series": Point,
    "totals": Total,
    "waits": WaitCount,
    "events": LogEvent,
    "statements": Statement,
}


def _affinity(stored: Mapping[str, Any]) -> Affinity:
    listed = ("observed", "memory_nodes", "numa_policies")
    values: dict[str, Any] = {k: tuple(v) if k in listed else v for k, v in stored.items()}
    return Affinity(**values)
