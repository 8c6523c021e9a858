"""The sampler beside one measured pgbench run.

`Capture.start()` takes a baseline just before pgbench starts; `pgbench_started(pid)` sets
t = 0 and wakes the sampler thread; `stop(pgbench_cpu_s)`, right after pgbench exits, takes the
final sample and returns a `RunTelemetry`. The thread uses one connection for all SQL:
pg_stat_activity five times a second, the cumulative views and /proc once a second, on a
schedule anchored at t = 0 (a late sample never makes the next ones pile up), each second's
figures handed to `on_sample` as they are taken (`samples`: what is derived). pgbench's CPU
after its last reading comes from the total the caller got from wait4. Sampling trouble is
recorded in the result's errors; it never fails the run.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg

from pgbenchlab.errors import first_line
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.records.costs import DATABASE, STATEMENTS
from pgbenchlab.records.telemetry import (
    NO_LOG_ACCESS,
    LogEvent,
    Point,
    RunTelemetry,
    SourceStatus,
    Statement,
    WaitCount,
)
from pgbenchlab.server import Endpoint
from pgbenchlab.telemetry import osstats, pgstats
from pgbenchlab.telemetry.affinity import PGBENCH, SERVER, AffinityWatch
from pgbenchlab.telemetry.costs import CostProbe
from pgbenchlab.telemetry.samples import Sample, changing, points_between, totals_between
from pgbenchlab.telemetry.serverlog import LogFollower, ServerLog
from pgbenchlab.telemetry.statements import StatementsProbe

ACTIVITY_HZ = 5
MIN_LAST_INTERVAL_S = 0.5  # a shorter final interval counts in the totals, not as a second
OS_SOURCES = ("cpu", "memory", "disk", "processes")
MAX_ERRORS = 5
AFFINITY_SECONDS = 2  # CPU lists are read back in the run's first seconds: clients connected


# A sample looks for one of pgbench's backends this many times (under -C: between connections)
CONNECTION_TRIES, CONNECTION_RETRY_S = 10, 0.005


@dataclass
class CaptureConfig:
    """What to watch, on which host. Only what is given is sampled."""

    endpoint: Endpoint
    log: ServerLog | None = None
    postmaster_pid: int | None = None
    disk_device: str | None = None
    pgbench_threads: int | None = None
    host_cpus: int | None = None
    proc: Path = Path("/proc")
    activity_hz: int = ACTIVITY_HZ
    host: Host = LOCAL_HOST  # the server's: its log, its /proc
    server_cpus: str | None = None  # the CPU lists the plan pinned them to
    pgbench_cpus: str | None = None
    server_numa: str | None = None  # the NUMA policies the plan placed them by
    pgbench_numa: str | None = None
    pgbench_host: Host | None = None  # where pgbench runs, its pid watched there (None: host)
    watch_pgbench: bool = True  # False: pgbench's pid names none of several (load generators)
    log_problem: str | None = None  # why the server's log is not read (an external server's)
    processes_problem: str | None = None  # why its processes are not watched
    on_sample: Callable[[Sequence[Point]], None] | None = None  # each second's figures, live
    own_cgroup: bool = False  # its processes may be moved into a cgroup of the run's (managed)


@dataclass
class _State:
    samples: list[Sample] = field(default_factory=list)
    waits: Counter[tuple[str, str]] = field(default_factory=Counter)
    second_waits: Counter[tuple[int, str, str]] = field(default_factory=Counter)
    second_rounds: Counter[int] = field(default_factory=Counter)
    rounds: int = 0
    statements: int = 0  # sent on the benchmark's database since the first counter sample
    connection_seen: bool = False  # a pgbench backend's connection was read (pg_stat_ssl)
    tls: tuple[str, str] | None = None  # its TLS protocol and cipher
    errors: list[str] = field(default_factory=list)


class Capture:
    def __init__(self, config: CaptureConfig) -> None:
        self.config = config
        self.os = osstats.OsSampler(
            config.proc,
            config.postmaster_pid,
            config.disk_device,
            host=config.host,
            pgbench_host=config.pgbench_host,
        )
        self.state = _State()
        self.affinity = AffinityWatch(
            config.proc,
            config.host,
            {SERVER: config.server_cpus, PGBENCH: config.pgbench_cpus},
            pgbench_host=config.pgbench_host,
            numa={SERVER: config.server_numa, PGBENCH: config.pgbench_numa},
        )
        self.costs = CostProbe(
            config.host,
            config.proc,
            config.postmaster_pid,
            config.processes_problem or "the server's processes are unknown (remote server)",
            pgbench_here=config.watch_pgbench and config.pgbench_host in (None, config.host),
            own_cgroup=config.own_cgroup,
        )
        self.conn: psycopg.Connection[Any] | None = None
        self.settings: pgstats.ServerSettings | None = None
        self.query: pgstats.CounterQuery | None = None
        self.activity_sql = pgstats.ActivityQueries.build(pgstats.BACKEND_TYPE_SINCE)  # at connect
        self.statements: StatementsProbe | None = None
        self.log: LogFollower | None = None
        self.t0_mono = 0.0
        self.t0_epoch = 0.0
        self._go = threading.Event()
        self._halt = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._connect_error = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Capture:
        self._connect()
        if self.config.log is not None:
            self.log = LogFollower(self.config.host, self.config.log)
        for problem in (self.config.log_problem, self.config.processes_problem):
            if problem is not None:
                self._error(problem)
        if self.conn is not None and self.settings is not None:
            self.statements = StatementsProbe.open(self.conn, self.settings, self._error)
        self._await_backend_exit()  # the warmup's commits must not count in this run
        self.t0_mono, self.t0_epoch = time.monotonic(), time.time()
        self.state.samples.append(Sample(None, self.t0_mono, self._counters()))
        self.state.statements = 1  # the baseline read commits after it has read the counter
        self.state.statements += self.costs.start(self.conn, self._version(), time.monotonic())
        self._thread.start()
        return self

    def pgbench_started(self, pid: int) -> None:
        if self.config.watch_pgbench:  # else only its wait4 CPU, at the end
            self.os.pgbench_pid = pid
        self.t0_mono, self.t0_epoch = time.monotonic(), time.time()
        self._go.set()

    def pause(self) -> None:
        """Take no samples until `resume()`; the next counter sample covers the gap as one
        interval. bench/telemetry_overhead.py switches sampling second by second with it."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def stop(self, pgbench_cpu_s: float | None = None) -> RunTelemetry:
        """Finish; ``pgbench_cpu_s`` is pgbench's whole CPU time (wait4) once it has exited."""
        self._halt.set()
        self._go.set()
        self._thread.join()
        self._await_backend_exit()
        now = time.monotonic()
        elapsed = now - self.t0_mono
        last = self.state.samples[-1]
        t = math.ceil(elapsed) if now - last.mono >= MIN_LAST_INTERVAL_S else None
        final = Sample(t, now, self._counters())
        if pgbench_cpu_s is not None and "processes" in final.values:
            final.values["processes"]["pgbench_cpu_s"] = pgbench_cpu_s
        statements = self.statements.finish(self.conn) if self.statements and self.conn else ()
        costs = self.costs.finish(
            self.conn, self._version(), time.monotonic(), self._buffers(final), pgbench_cpu_s
        )
        for problem in self.costs.errors:
            self._error(problem)
        events = self._events()
        if self.conn is not None:
            self.conn.close()
        return replace(self._result(final, elapsed, statements, events), costs=costs)

    def _version(self) -> int | None:
        return self.settings.version_num if self.settings else None

    def _buffers(self, final: Sample) -> tuple[str, dict[str, float]] | None:
        """The run's shared-buffer counts: every statement's from pg_stat_statements where it
        was read, else the database's hits and reads (`telemetry.costs`)."""
        if self.statements is not None and self.statements.buffers is not None:
            return STATEMENTS, self.statements.buffers
        first = self.state.samples[0].values.get("pg_stat_database", {})
        last = final.values.get("pg_stat_database", {})
        if not all(k in first and k in last for k in ("blks_hit", "blks_read")):
            return None
        hit, read = (last[k] - first[k] for k in ("blks_hit", "blks_read"))
        return DATABASE, {"hit": hit, "read": read}

    def _await_backend_exit(self, limit_s: float = 3.0) -> None:
        """Wait (bounded) until pgbench's backends have exited and so flushed their statistics;
        the run's commit count is checked against them."""
        deadline = time.monotonic() + limit_s
        while self.conn is not None and time.monotonic() < deadline:
            try:
                self.state.statements += 1
                row = self.conn.execute(
                    self.activity_sql.bench_backends, (self.conn.info.backend_pid,)
                ).fetchone()
            except psycopg.Error as exc:
                self._sql_failed(exc)
                return
            if row is None or row[0] == 0:
                self._await_collector()
                return
            time.sleep(0.01)
        if self.conn is not None:
            self._error(f"pgbench's backends were still there {limit_s:.0f} s after it exited")

    def _await_collector(self, limit_s: float = 3.0) -> None:
        """Before 15: the counters read next include the backends that have exited."""
        if self.conn is None or self.settings is None:
            return
        try:
            sent, fresh = pgstats.await_collector(self.conn, self.settings.version_num, limit_s)
        except psycopg.Error as exc:
            self._sql_failed(exc)
            return
        self.state.statements += sent
        if not fresh:
            self._error(f"the statistics collector wrote no figures within {limit_s:.0f} s")

    # -- sampling ----------------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            conn = self.config.endpoint.connect(timeout=5)
            conn.execute("SET application_name = 'pgbenchlab-telemetry'")
            conn.execute("SET statement_timeout = '2s'")
            self.settings = pgstats.read_settings(conn)
            self.query = pgstats.CounterQuery.build(self.settings.version_num)
            self.activity_sql = pgstats.ActivityQueries.build(self.settings.version_num)
            self.conn = conn
        except psycopg.Error as exc:
            self._connect_error = first_line(exc)
            self._error(f"telemetry connection: {self._connect_error}")

    def _loop(self) -> None:
        self._go.wait()
        period = 1.0 / self.config.activity_hz
        tick, last_second = 0, 0
        while True:
            tick += 1
            wait = self.t0_mono + tick * period - time.monotonic()
            if wait < -period:  # fell behind (a stalled query): skip, never pile up
                tick = int((time.monotonic() - self.t0_mono) / period) + 1
                wait = self.t0_mono + tick * period - time.monotonic()
            if self._halt.wait(max(wait, 0.0)):
                return
            second = int(tick * period + 1e-9)
            if self._paused.is_set():
                last_second = second  # on resuming, counters wait for the next whole second
                continue
            self._activity(math.ceil(tick * period - 1e-9))
            if second > last_second:
                last_second = second
                self.state.samples.append(Sample(second, time.monotonic(), self._counters()))
                if self.config.on_sample is not None:
                    self.config.on_sample(points_between(*self.state.samples[-2:]))
                pids = (self.config.postmaster_pid, self.os.pgbench_pid)
                if second <= AFFINITY_SECONDS or self.affinity.missing(*pids):
                    self.affinity.check(*pids)

    def _activity(self, second: int) -> None:
        if self.conn is None:
            return
        try:
            self.state.statements += 1
            rows = self.conn.execute(
                self.activity_sql.activity, (self.conn.info.backend_pid,)
            ).fetchall()
        except psycopg.Error as exc:
            self._sql_failed(exc)
            return
        state = self.state
        if not state.connection_seen:
            self._connection()
        state.rounds += 1
        state.second_rounds[second] += 1
        for kind, event, count in rows:
            state.waits[(str(kind), str(event))] += int(count)
            state.second_waits[(second, str(kind), str(event))] += int(count)

    def _connection(self) -> None:
        """How pgbench's backends are connected, read once one is there. Under -C they come
        and go between transactions, so a sample asks a few times, a few milliseconds apart,
        until it finds one; the first that does decides."""
        assert self.conn is not None
        for _attempt in range(CONNECTION_TRIES):
            try:
                self.state.statements += 1
                row = self.conn.execute(
                    self.activity_sql.connection, (self.conn.info.backend_pid,)
                ).fetchone()
            except psycopg.Error as exc:
                self._sql_failed(exc)
                self.state.connection_seen = True  # not asked again
                return
            if row is not None:
                self.state.connection_seen = True
                if row[0]:
                    self.state.tls = (str(row[1]), str(row[2]))
                return
            time.sleep(CONNECTION_RETRY_S)

    def _counters(self) -> osstats.Snapshot:
        values = self.os.sample()
        if self.conn is not None and self.query is not None and self.settings is not None:
            try:
                self.state.statements += 1
                values |= self.query.read(self.conn, self.settings)
            except psycopg.Error as exc:
                self._sql_failed(exc)
        return values

    def _sql_failed(self, exc: psycopg.Error) -> None:
        self._error(f"telemetry query: {first_line(exc)}")
        if self.conn is not None and self.conn.closed:
            self.conn = None  # the connection is gone: keep sampling the OS

    def _error(self, text: str) -> None:
        if len(self.state.errors) < MAX_ERRORS and text not in self.state.errors:
            self.state.errors.append(text)

    def _events(self) -> tuple[LogEvent, ...]:
        if self.log is None:
            return ()
        events, problems = self.log.events(self.t0_epoch)
        for problem in problems:
            self._error(problem)
        return events

    # -- the result --------------------------------------------------------------------------

    def _result(
        self,
        final: Sample,
        elapsed: float,
        statements: tuple[Statement, ...],
        events: tuple[LogEvent, ...],
    ) -> RunTelemetry:
        samples = [*self.state.samples, final]
        series = [
            point
            for prev, cur in itertools.pairwise(samples)
            if cur.t is not None
            for point in points_between(prev, cur)
        ]
        run_totals = totals_between(samples[0], final)
        series = changing(series, run_totals) + self._wait_series()
        return RunTelemetry(
            started_at=self.t0_epoch,
            duration_s=round(elapsed, 3),
            server_version_num=self.settings.version_num if self.settings else None,
            activity_rounds=self.state.rounds,
            sampler_statements=self.state.statements - 1,  # the final read counts itself not
            counter_rounds=len(samples),
            sources=self._sources(samples, statements),
            series=tuple(series),
            totals=tuple(run_totals),
            waits=tuple(
                WaitCount(k, e, n) for (k, e), n in sorted(self.state.waits.items(), key=_by_count)
            ),
            events=events,
            statements=statements,
            pgbench_threads=self.config.pgbench_threads,
            host_cpus=self.config.host_cpus,
            server_settings=dict(self.settings.values) if self.settings else {},
            errors=tuple(self.state.errors),
            affinity=self.affinity.result(),
            tls_protocol=self.state.tls[0] if self.state.tls else None,
            tls_cipher=self.state.tls[1] if self.state.tls else None,
        )

    def _wait_series(self) -> list[Point]:
        """Average benchmark backends per wait event in each second."""
        rounds = self.state.second_rounds
        return [
            Point("pg_stat_activity", f"{kind}:{event}", second, count / rounds[second])
            for (second, kind, event), count in sorted(self.state.second_waits.items())
        ]

    def _sources(
        self, samples: list[Sample], statements: tuple[Statement, ...]
    ) -> tuple[SourceStatus, ...]:
        seen = {source for s in samples for source in s.values}
        found: list[SourceStatus] = []
        if self.query is None or self.settings is None:
            reason = f"no connection to the server: {self._connect_error}"
            found += [SourceStatus(v, False, reason) for v in pgstats.VIEWS]
        else:
            notes = self.query.notes(self.settings)
            found += [SourceStatus(v, v in seen, notes.get(v, "")) for v in self.query.columns]
            found += [SourceStatus(v, False, why) for v, why in self.query.absent.items()]
        found.append(
            SourceStatus("pg_stat_activity", self.state.rounds > 0, self.activity_sql.note)
        )
        probe = self.statements
        found.append(
            SourceStatus(
                "pg_stat_statements",
                probe is not None and probe.ok,
                probe.note if probe else "no connection",
            )
        )
        found.append(
            SourceStatus(
                "server_log",
                self.log is not None,
                "" if self.log else self.config.log_problem or NO_LOG_ACCESS,
            )
        )
        for source in OS_SOURCES:
            found.append(SourceStatus(source, source in seen, self._os_note(source, seen)))
        return tuple(found)

    def _os_note(self, source: str, seen: set[str]) -> str:
        if source == "disk" and self.config.disk_device is None:
            return "the data directory's block device is unknown (remote server or no device)"
        if source == "processes" and self.config.postmaster_pid is None:
            unknown = self.config.processes_problem or "server processes unknown (remote server)"
            return f"{unknown}: pgbench only"
        return "" if source in seen else f"could not read {source} from {self.config.proc}"


def _by_count(item: tuple[tuple[str, str], int]) -> tuple[int, str, str]:
    (kind, event), count = item
    return -count, kind, event
