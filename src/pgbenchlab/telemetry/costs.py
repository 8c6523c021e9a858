"""What a server spent over one measured run, read twice: when the run starts and when it has
ended (never per second, so the observer costs nothing meanwhile).

- CPU, user and system, of the postmaster's whole process tree, backends that exited during
  the run included: a cgroup v2 of the run's own where the host allows it (a managed server
  on this machine, as root), process accounting by /proc otherwise, a remote server's
  included (`proctree`).
- WAL bytes: the difference of the server's insert position (pg_current_wal_lsn, from 10;
  pg_current_xlog_location in 9.6). The whole cluster's WAL: the run's, and whatever the
  server's own processes wrote meanwhile (checkpoints, autovacuum), which the run caused.
- Shared buffers hit, read, dirtied and written: pg_stat_statements where it is loaded (the
  only view with all four, and scoped to the statements that ran), else hit and read from
  pg_stat_database (the database's backends, autovacuum's included; dirtied and written absent).
- Context switches (voluntary and involuntary) of the server's processes: /proc keeps no
  children's totals of them, so the live processes are read twice and those that exit in
  between (every one of pgbench's backends) are heard as they exit, from the kernel's per-task
  accounting (`taskstats`: this machine, as root). A remote server's are absent, with why.
- Instructions and cycles: `perf stat` on the server's tree where the host has hardware
  counters; absent, with perf's own word, where it has none (virtual machines that hide them).

Each run's figures are checked (`findings.cpu_unaccounted`): the CPU accounted must be at least
what the processes were seen to use by their own figures (exits included where heard), and at
most what the host's CPUs did over the same window.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

import psycopg

from pgbenchlab.errors import HostError, first_line
from pgbenchlab.hosts import LOCAL_HOST, Host, Process
from pgbenchlab.records.costs import CGROUP, DATABASE, PROCESS_TREE, RunCosts
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.proctree import RunCgroup, TreeTimes, seen_cpu_s, tree_times
from pgbenchlab.telemetry.taskstats import ExitListener, TaskExit

PROC = PurePath("/proc")
BUSY = ("user", "nice", "system", "irq", "softirq")  # /proc/stat: a CPU doing work
LSN_SINCE_10 = "SELECT pg_current_wal_lsn()::text"
LSN_BEFORE_10 = "SELECT pg_current_xlog_location()::text"
COUNTERS = ("instructions", "cycles")
_COUNTERS_BY_HOST: dict[str, str | None] = {}  # host → why it has no counters (None: it has)


def lsn_bytes(text: str) -> int:
    """A WAL position ("16/B374D848") as a byte offset."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def host_busy_s(stat: str | None, ticks: int) -> float | None:
    cpu = osstats.parse_cpu(stat)
    return None if cpu is None else sum(cpu.get(k, 0.0) for k in BUSY) / ticks


def parse_perf_stat(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """perf stat -x, output: the counters read, and perf's word for each other one
    ("<not supported>", "<not counted>")."""
    found: dict[str, float] = {}
    absent: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        value, event = fields[0], fields[2].split(":")[0]
        if event not in COUNTERS:
            continue
        if value.startswith("<"):
            absent[event] = value
        else:
            found[event] = float(value)
    return found, absent


def counters_problem(host: Host) -> str | None:
    """Why the host cannot count instructions and cycles (None: it can), asked once."""
    if host.name not in _COUNTERS_BY_HOST:
        _COUNTERS_BY_HOST[host.name] = _ask_counters(host)
    return _COUNTERS_BY_HOST[host.name]


def _ask_counters(host: Host) -> str | None:
    argv = ["perf", "stat", "-x,", "-e", ",".join(COUNTERS), "true"]
    try:
        done = host.run(argv, timeout=30)
    except OSError as exc:
        return f"perf is not available on {host.name} ({exc.strerror or exc})"
    found, absent = parse_perf_stat(done.stderr)
    if len(found) == len(COUNTERS):
        return None
    if not absent:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        return f"perf stat does not count on {host.name} ({said})"
    marks = " ".join(sorted(set(absent.values())))
    return f"no hardware counters on {host.name} (perf stat: {', '.join(absent)} {marks})"


@dataclass
class _Reading:
    """The server's processes at one moment."""

    tree: TreeTimes | None = None
    cgroup: tuple[float, float] | None = None
    switches: dict[int, int] = field(default_factory=dict)  # live pid → its switches


@dataclass
class CostProbe:
    """Reads a server's costs when a run starts (`start`) and ends (`finish`)."""

    host: Host = LOCAL_HOST
    proc: PurePath = PROC
    postmaster: int | None = None
    processes_problem: str = "server processes unknown"
    pgbench_here: bool = True  # pgbench runs on the server's host (its CPU is not the server's)
    own_cgroup: bool = False  # a managed server's: its processes may be moved into a cgroup
    notes: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _cgroup: RunCgroup | None = None
    _exits: ExitListener | None = None
    _perf: Process | None = None
    _perf_out: PurePath | None = None
    _perf_said: list[str] = field(default_factory=list)  # its standard error
    _mono: float = 0.0
    _first: _Reading = field(default_factory=_Reading)
    _host_busy: float | None = None
    _lsn: int | None = None

    def start(self, conn: psycopg.Connection[Any] | None, version: int | None, mono: float) -> int:
        """The first reading; returns the statements it sent on conn (each commits)."""
        self._mono = mono
        if self.postmaster is not None:
            self._open_cgroup(self.postmaster)
            self._listen(self.postmaster)
            self._first = self._read()
            if self._exits is not None:
                self._exits.watch(list(self._first.switches))
            self._start_perf(self.postmaster)
        self._host_busy = self._busy()
        sent, self._lsn = self._read_lsn(conn, version)
        return sent

    def finish(
        self,
        conn: psycopg.Connection[Any] | None,
        version: int | None,
        mono: float,
        buffers: tuple[str, dict[str, float]] | None,
        pgbench_cpu_s: float | None,
    ) -> RunCosts:
        """The second reading and the totals in between; everything it opened is closed. A
        host lost meanwhile gives no costs, saying why (the run's own outcome says the rest)."""
        try:
            costs = self._totals(conn, version, mono, buffers, pgbench_cpu_s)
        except (OSError, HostError) as exc:  # its host lost meanwhile (a connection error)
            costs = RunCosts(notes={"costs": f"not read: {first_line(exc)}"})
        finally:
            self.close()
        return replace(costs, notes=_absent(costs) | self.notes | costs.notes)

    def _totals(
        self,
        conn: psycopg.Connection[Any] | None,
        version: int | None,
        mono: float,
        buffers: tuple[str, dict[str, float]] | None,
        pgbench_cpu_s: float | None,
    ) -> RunCosts:
        last = self._read() if self.postmaster is not None else _Reading()
        exits = self._exits.close() if self._exits is not None else None
        lost = self._exits is not None and self._exits.lost
        self._exits = None
        costs = RunCosts(window_s=round(mono - self._mono, 3))
        costs = self._cpu(costs, last, exits)
        costs = self._switched(costs, last, exits, lost)
        costs = self._counters(costs)
        _, lsn = self._read_lsn(conn, version)
        busy = self._busy()
        costs = replace(
            costs,
            wal_bytes=None if lsn is None or self._lsn is None else float(lsn - self._lsn),
            host_busy_s=_difference(self._host_busy, busy),
            host_others_s=pgbench_cpu_s if self.pgbench_here else None,
        )
        return _with_buffers(costs, buffers)

    def close(self) -> None:
        """Stop what `start` opened (a run that failed, or after `finish`)."""
        if self._exits is not None:
            self._exits.close()
            self._exits = None
        if self._perf is not None:
            self._perf.interrupt()
            self._perf.wait()
            self._perf = None
        if self._cgroup is not None:
            try:
                self._cgroup.remove()
            except OSError as exc:
                self.errors.append(f"the run's cgroup {self._cgroup.path} stays: {exc}")
            self._cgroup = None

    def _read(self) -> _Reading:
        assert self.postmaster is not None
        return _Reading(
            tree_times(self.proc, self.postmaster, self.host),
            self._cgroup_times(),
            self._switches(self.postmaster),
        )

    def _busy(self) -> float | None:
        try:
            stat = self.host.read_text(self.proc / "stat")
        except OSError:
            return None
        return host_busy_s(stat, self.host.clock_ticks_per_s())

    # -- CPU ----------------------------------------------------------------------------------

    def _open_cgroup(self, postmaster: int) -> None:
        if not self.own_cgroup:  # an external server's processes are not ours to move
            self.notes["cgroup"] = "not a managed server: process accounting"
            return
        if self.host is not LOCAL_HOST:
            self.notes["cgroup"] = f"the server runs on {self.host.name}: process accounting"
            return
        try:
            self._cgroup = RunCgroup.around(postmaster, Path(self.proc))
        except OSError as exc:
            why = exc.strerror or str(exc)
            self.notes["cgroup"] = f"no cgroup of the run's own ({why}): process accounting"

    def _cgroup_times(self) -> tuple[float, float] | None:
        if self._cgroup is None:
            return None
        try:
            return self._cgroup.times()
        except (OSError, KeyError, ValueError) as exc:
            self.notes["cgroup"] = f"its cpu.stat could not be read ({exc}): process accounting"
            return None

    def _cpu(self, costs: RunCosts, last: _Reading, exits: dict[int, TaskExit] | None) -> RunCosts:
        first = self._first
        if self.postmaster is None:
            return replace(costs, notes={"server_cpu": self.processes_problem})
        if first.tree is None or last.tree is None:
            return replace(costs, notes={"server_cpu": "the postmaster could not be read"})
        user = last.tree.user_s - first.tree.user_s
        system = last.tree.system_s - first.tree.system_s
        seen = seen_cpu_s(first.tree, last.tree, exits)
        if first.cgroup is not None and last.cgroup is not None:
            # the process tree's own account is then one more reading to check it against
            return replace(
                costs, cpu_method=CGROUP, server_user_s=last.cgroup[0] - first.cgroup[0],
                server_system_s=last.cgroup[1] - first.cgroup[1],
                seen_cpu_s=max(seen, user + system),
            )  # fmt: skip
        return replace(
            costs, cpu_method=PROCESS_TREE, server_user_s=user, server_system_s=system,
            seen_cpu_s=seen,
        )  # fmt: skip

    # -- context switches and hardware counters -----------------------------------------------

    def _listen(self, postmaster: int) -> None:
        if self.host is not LOCAL_HOST:
            self.notes["context_switches"] = (
                f"the server runs on {self.host.name}: the exits of its processes are heard on "
                "this machine only (taskstats)"
            )
            return
        try:
            self._exits = ExitListener(postmaster)
        except OSError as exc:
            why = exc.strerror or str(exc)
            self.notes["context_switches"] = (
                f"the kernel's taskstats refused ({why}): the server's processes that exit during "
                "the run take their counts along"
            )

    def _switches(self, postmaster: int) -> dict[int, int]:
        """Each live server process's voluntary + involuntary switches (its main thread's:
        server processes are single-threaded)."""
        pids = [postmaster, *osstats.child_pids(self.proc, postmaster, self.host)]
        texts = self.host.read_texts([self.proc / str(pid) / "status" for pid in pids])
        return {
            pid: switches_of(text)
            for pid, text in zip(pids, texts, strict=True)
            if text is not None
        }

    def _switched(
        self, costs: RunCosts, last: _Reading, exits: dict[int, TaskExit] | None, lost: bool
    ) -> RunCosts:
        if exits is None or self.postmaster is None:
            return costs
        if lost:
            why = "some exits of the server's processes were lost (taskstats overflowed)"
            return replace(costs, notes={**costs.notes, "context_switches": why})
        counts = {pid: float(n) for pid, n in last.switches.items()}
        counts |= {pid: float(e.switches) for pid, e in exits.items()}
        before = self._first.switches
        return replace(
            costs, context_switches=sum(n - before.get(pid, 0) for pid, n in counts.items())
        )

    def _start_perf(self, postmaster: int) -> None:
        problem = counters_problem(self.host)
        if problem is not None:
            self.notes |= {c: problem for c in COUNTERS}
            return
        out = self.host.make_temp_dir("pgbenchlab-costs-", PurePath("/tmp")) / "perf-stat.csv"
        pids = [postmaster, *osstats.child_pids(self.proc, postmaster, self.host)]
        argv = ["perf", "stat", "-x,", "-e", ",".join(COUNTERS), "-o", str(out)]
        argv += ["-p", ",".join(map(str, pids))]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        said = self._perf_said
        self._perf = self.host.start(argv, env=env, cwd="/", on_stderr_line=said.append)
        self._perf_out = out

    def _counters(self, costs: RunCosts) -> RunCosts:
        if self._perf is None or self._perf_out is None:
            return costs
        self._perf.interrupt()
        self._perf.wait()
        self._perf = None
        try:
            found, absent = parse_perf_stat(self.host.read_text(self._perf_out))
        except OSError:
            found, absent = {}, {}
        finally:
            self.host.remove_tree(self._perf_out.parent)
        notes = {c: f"perf stat: {c} {w}" for c, w in absent.items()}
        if not found and not absent:  # refused to attach, say
            said = (self._perf_said or ["it wrote nothing"])[0]
            notes = {c: f"perf stat counted nothing ({said})" for c in COUNTERS}
        return replace(
            costs,
            instructions=found.get("instructions"),
            cycles=found.get("cycles"),
            notes={**costs.notes, **notes},
        )

    # -- SQL ----------------------------------------------------------------------------------

    def _read_lsn(
        self, conn: psycopg.Connection[Any] | None, version: int | None
    ) -> tuple[int, int | None]:
        if conn is None or version is None:
            self.notes.setdefault("wal_bytes", "no connection to the server")
            return 0, None
        try:
            row = conn.execute(LSN_SINCE_10 if version >= 100000 else LSN_BEFORE_10).fetchone()
        except psycopg.Error as exc:
            self.notes["wal_bytes"] = str(exc).strip().split("\n", 1)[0]
            return 1, None
        return 1, None if row is None else lsn_bytes(str(row[0]))


def switches_of(status: str) -> int:
    """Voluntary + involuntary context switches from /proc/PID/status."""
    return sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches:" in line)


def _difference(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _with_buffers(costs: RunCosts, buffers: tuple[str, dict[str, float]] | None) -> RunCosts:
    if buffers is None:
        return replace(costs, notes={**costs.notes, "buffers": "no statistics were read"})
    source, values = buffers
    costs = replace(
        costs,
        buffers_source=source,
        buffers_hit=values.get("hit"),
        buffers_read=values.get("read"),
        buffers_dirtied=values.get("dirtied"),
        buffers_written=values.get("written"),
    )
    if source == DATABASE:
        why = "pg_stat_database has no such count: load pg_stat_statements for it"
        costs = replace(
            costs, notes={**costs.notes, "buffers_dirtied": why, "buffers_written": why}
        )
    return costs


def _absent(costs: RunCosts) -> dict[str, str]:
    """A plain reason for each absent figure that has none yet."""
    found = {}
    if costs.server_cpu_s is None:
        found["server_cpu"] = "not accounted"
    for name in ("wal_bytes", "context_switches", *COUNTERS):
        if getattr(costs, name) is None:
            found[name] = "not read"
    return found
