"""The pooler's telemetry beside a run through it (connection = "pgbouncer").

`PooledCapture` wraps the server's capture: each second, on the run's time axis, the pooler
process's CPU and run-queue wait (/proc/PID/schedstat: PgBouncer is one thread, so one CPU is
its ceiling), its `SHOW STATS` counters and `SHOW POOLS` gauges for the run's database (through
its admin console). Before the capture's baseline and before its final sample the pooler
closes its server connections, so the server's backends exit and report their statistics
as they do when pgbench connects directly (the commit cross-check reads them). Its figures join
the run's telemetry: sources `pooler` (cpu_s, wait_s; and the seconds its totals cover),
`pgbouncer_stats`, `pgbouncer_pools`,
and the CPU list it had (affinity role `pooler`). The kernel adds a wait for a CPU to a process's
figures when the wait ends: its per-second wait comes in lumps, and only the run's totals
(taken once it sleeps again) judge it. Sampling trouble is recorded in the
telemetry's errors; it never fails the run.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any, Protocol

import psycopg

from pgbenchlab.records.telemetry import Affinity, Point, RunTelemetry, SourceStatus, Total
from pgbenchlab.server.endpoint import Endpoint
from pgbenchlab.server.pooler import PgBouncer
from pgbenchlab.telemetry.affinity import allowed_lists
from pgbenchlab.telemetry.osstats import figures, process_times

POOLER, STATS, POOLS = "pooler", "pgbouncer_stats", "pgbouncer_pools"
STATS_COUNTERS = (
    "total_xact_count",
    "total_query_count",
    "total_received",
    "total_sent",
    "total_xact_time",
    "total_query_time",
    "total_wait_time",
)
POOLS_GAUGES = ("cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_used", "maxwait")
PROC = PurePath("/proc")
# The server's backends of the pooler's connections to the run's database: every client backend
# there but the samplers' (pgbench reaches the server only through the pooler). Asked from
# another database, so that the asking commits nothing in the run's.
POOLED_BACKENDS_SQL = """
SELECT pid FROM pg_stat_activity
WHERE datname = %s AND backend_type = 'client backend'
  AND application_name IS DISTINCT FROM 'pgbenchlab-telemetry'
"""
RELEASE_TIMEOUT_S = 5.0

Values = dict[str, dict[str, float]]


class RunCapture(Protocol):
    """The server's capture of the run (`telemetry.capture.Capture`)."""

    def start(self) -> object: ...

    def pgbench_started(self, pid: int) -> None: ...

    def stop(self, pgbench_cpu_s: float | None = None) -> RunTelemetry | None: ...


@dataclass
class _Sample:
    t: int | None
    mono: float
    values: Values


class PooledCapture:
    """A run's capture with its pooler's figures added (the `Capturing` protocol)."""

    def __init__(self, inner: RunCapture, pooler: PgBouncer, server: Endpoint, dbname: str) -> None:
        self.inner = inner
        self.pooler = pooler
        self.server = server.with_dbname("postgres")  # the server itself, not the pooler
        self.dbname = dbname
        self.pid = pooler.pid
        self.conn: psycopg.Connection[Any] | None = None
        self.samples: list[_Sample] = []
        self.errors: list[str] = []
        self.cpus: str | None = None  # the CPU list the kernel allowed it
        self.t0 = 0.0
        self._go, self._halt = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pooler-telemetry", daemon=True)

    def start(self) -> PooledCapture:
        self._release()  # the warmup's server connections
        self.inner.start()
        try:
            self.conn = self.pooler.admin_endpoint.connect(timeout=5)
        except psycopg.Error as exc:
            self._error(f"pooler admin console: {exc}")
        self.t0 = time.monotonic()
        self.samples.append(_Sample(None, self.t0, self._read()))
        self._thread.start()
        return self

    def pgbench_started(self, pid: int) -> None:
        self.inner.pgbench_started(pid)
        self.t0 = time.monotonic()
        if self.pid is not None:
            listed = allowed_lists(PROC, self.pid, self.pooler.host)
            self.cpus = None if listed is None else listed[0]
        self._go.set()

    def stop(self, pgbench_cpu_s: float | None = None) -> RunTelemetry | None:
        self._halt.set()
        self._go.set()
        self._thread.join()
        self._await_idle()
        now = time.monotonic()
        final = _Sample(math.ceil(now - self.t0), now, self._read())
        if self.conn is not None:
            self.conn.close()
        self._release()
        telemetry = self.inner.stop(pgbench_cpu_s)
        return None if telemetry is None else self._joined(telemetry, final)

    # -- sampling --------------------------------------------------------------------------------

    def _loop(self) -> None:
        self._go.wait()
        second = 0
        while True:
            second += 1
            if self._halt.wait(max(self.t0 + second - time.monotonic(), 0.0)):
                return
            self.samples.append(_Sample(second, time.monotonic(), self._read()))

    def _await_idle(self, limit_s: float = 3.0) -> None:
        """Wait (bounded) until the pooler sleeps: the kernel adds a wait for a CPU to its
        figures only once the wait ends, so a pooler still waiting when pgbench exits would
        leave its last wait out of the run's totals."""
        if self.pid is None:
            return
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                stat = self.pooler.host.read_text(PROC / str(self.pid) / "stat")
            except OSError:
                return
            if stat[stat.rfind(")") + 2 :].startswith(("S", "I")):
                return
            time.sleep(0.005)

    def _read(self) -> Values:
        values: Values = {}
        times = None if self.pid is None else process_times(PROC, self.pid, self.pooler.host)
        if times is not None:
            values[POOLER] = {"cpu_s": times[0], "wait_s": times[1]}
        if self.conn is not None:
            try:
                values[STATS] = self._show("STATS", STATS_COUNTERS)
                values[POOLS] = self._show("POOLS", POOLS_GAUGES)
            except psycopg.Error as exc:
                self._error(f"pooler admin console: {exc}")
                self.conn = None
        return values

    def _show(self, what: str, columns: tuple[str, ...]) -> dict[str, float]:
        """A SHOW command's figures for the run's database (summed over its users' rows).
        The admin console speaks only the simple query protocol: libpq's PQexec."""
        assert self.conn is not None
        result = self.conn.pgconn.exec_(f"SHOW {what}".encode())
        if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
            raise psycopg.OperationalError(result.error_message.decode(errors="replace"))
        names = [(result.fname(i) or b"").decode() for i in range(result.nfields)]
        found = dict.fromkeys(columns, 0.0)
        for row in range(result.ntuples):
            cells = {n: result.get_value(row, i) for i, n in enumerate(names)}
            if (cells.get("database") or b"").decode() != self.dbname:
                continue
            for name in columns:
                found[name] += float((cells.get(name) or b"0").decode())
        return found

    def _release(self) -> None:
        """The pooler's server connections closed, and their backends gone (a backend
        reports its last statistics as it exits: the run's commits are read after)."""
        try:
            with self.server.connect(timeout=5) as conn:
                pids = self._pooled(conn)
                self.pooler.release_servers(self.dbname)
                deadline = time.monotonic() + RELEASE_TIMEOUT_S
                while pids and time.monotonic() < deadline:
                    time.sleep(0.01)
                    pids &= self._pooled(conn)
            if pids:
                self._error(f"pooler: {len(pids)} server connection(s) still open after KILL")
        except psycopg.Error as exc:
            self._error(f"pooler: its server connections were not closed: {exc}")

    def _pooled(self, conn: psycopg.Connection[Any]) -> set[int]:
        return {int(r[0]) for r in conn.execute(POOLED_BACKENDS_SQL, (self.dbname,)).fetchall()}

    def _error(self, text: str) -> None:
        first = str(text).strip().split("\n", 1)[0]
        if first not in self.errors:
            self.errors.append(first)

    # -- the result ------------------------------------------------------------------------------

    def _joined(self, telemetry: RunTelemetry, final: _Sample) -> RunTelemetry:
        samples = [*self.samples, final]
        series = [
            Point(source, metric, cur.t, value)
            for prev, cur in itertools.pairwise(samples)
            if cur.t is not None and cur.mono > prev.mono
            for source, values in cur.values.items()
            for metric, value in figures(
                source, prev.values.get(source, {}), values, cur.mono - prev.mono, whole=False
            ).items()
        ]
        first = samples[0]
        totals = [
            Total(source, metric, value)
            for source, values in final.values.items()
            for metric, value in figures(
                source, first.values.get(source, {}), values, final.mono - first.mono, whole=True
            ).items()
        ]
        if POOLER in final.values:  # what its CPU figures cover: from its baseline to its final
            totals.append(Total(POOLER, "seconds", final.mono - first.mono))
        seen = {source for s in samples for source in s.values}
        sources = [
            SourceStatus(source, source in seen, "" if source in seen else self._why(source))
            for source in (POOLER, STATS, POOLS)
        ]
        affinity = () if self.cpus is None else (self._affinity(self.cpus),)
        return replace(
            telemetry,
            series=telemetry.series + tuple(series),
            totals=telemetry.totals + tuple(totals),
            sources=telemetry.sources + tuple(sources),
            affinity=telemetry.affinity + affinity,
            errors=telemetry.errors + tuple(self.errors),
        )

    def _why(self, source: str) -> str:
        if source == POOLER:
            return "the pooler's process was not found"
        return self.errors[0] if self.errors else "the pooler's admin console did not answer"

    def _affinity(self, cpus: str) -> Affinity:
        return Affinity(POOLER, self.pooler.config.cpus, (cpus,), 1)
