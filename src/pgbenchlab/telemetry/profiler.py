"""A CPU profile of a server beside one measured run: `perf record` on the software CPU clock
(it works in virtual machines, which have no hardware counters) of the postmaster and every
process it has, folded into stacks by backend type when the run ends.

perf starts before the run's hygiene and warmup, and only the samples of the measured interval
are kept (perf's timestamps on CLOCK_MONOTONIC, `perf script --time`).

Why the whole machine (`-a`) with a filter rather than `-p` with inheritance: events attached
to processes are switched in and out by the kernel at every context switch of every such
process, which at tens of thousands of transactions a second halved select-only throughput
(the first design, measured by bench/profile_overhead.py); per-CPU events cost only their
samples. The server's processes are then picked from the recording by perf's fork records (the
postmaster and every process forked under it, sessions that came and went included); other
processes' samples are read and dropped, never stored. A process's backend type comes from
its title in /proc/PID/cmdline, read four times a second while the run lasts.

pgbench is profiled from the same recording when it runs on the server's host (its pid and
threads), and by a recording of its own on a load generator host (`RunProfiler`); its stacks
are rooted at "pgbench" and stored as a profile of their own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import PurePath

from pgbenchlab.errors import ProfilerError
from pgbenchlab.hosts import LOCAL_HOST, Host, Process
from pgbenchlab.profiles import (
    PGBENCH,
    SERVER,
    PerfScript,
    Profile,
    RunProfiles,
    fold_perf_script,
    merged,
)
from pgbenchlab.profiles.backends import POSTMASTER, UNSEEN, backend_type
from pgbenchlab.telemetry.osstats import child_pids

DEFAULT_FREQUENCY_HZ = 499  # prime, so sampling does not beat with periodic work
PERF_DATA = "perf.data"
SCRIPT_FIELDS = "comm,pid,tid,ip,sym,dso"
LOOK_PERIOD_S = 0.25
PERF_FIX = "install Debian's linux-perf (apt-get install linux-perf)"
PARANOID = PurePath("/proc/sys/kernel/perf_event_paranoid")
PROC = PurePath("/proc")


def check_perf(host: Host = LOCAL_HOST, *, others: bool = True) -> None:
    """Raise a one-line ProfilerError with the fix when perf cannot profile here (other users'
    processes, such as a server's, unless others is false)."""
    try:
        done = host.run(["perf", "--version"], timeout=30)
    except FileNotFoundError:
        raise ProfilerError(f"profile: perf is not installed: {PERF_FIX}") from None
    if done.returncode != 0 or not done.stdout.startswith("perf version"):
        detail = (done.stderr or done.stdout).strip().splitlines()
        why = detail[0] if detail else f"exit {done.returncode}"
        raise ProfilerError(f"profile: perf does not run ({why}): {PERF_FIX}")
    try:
        paranoid = int(host.read_text(PARANOID).strip())
    except (OSError, ValueError):
        paranoid = None
    if others and os.geteuid() != 0 and paranoid is not None and paranoid > 0:
        raise ProfilerError(
            f"profile: the kernel refuses perf for other users' processes "
            f"(kernel.perf_event_paranoid = {paranoid}): run as root, or "
            f"`sudo sysctl kernel.perf_event_paranoid=0`"
        )
    _trial(host, paranoid)


def check_perf_for_pgbench(host: Host) -> None:
    """check_perf for pgbench's profile on a load generator host (pgbench is the campaign's own
    process there), naming the host and how to do without."""
    try:
        check_perf(host, others=False)
    except ProfilerError as exc:
        why = str(exc).removeprefix("profile: ")
        raise ProfilerError(
            f"profile of pgbench on load generator host {host.name}: {why} "
            "(or `profile = false` in [pgbench] to profile the server alone)"
        ) from None


def _trial(host: Host, paranoid: int | None) -> None:
    """A recording of `true`: a kernel or container that refuses perf_event_open says so."""
    work = host.make_temp_dir("pgbenchlab-perf-", PurePath("/tmp"))
    try:
        argv = ["perf", "record", "-q", "-e", "cpu-clock", "-o", str(work / PERF_DATA)]
        done = host.run([*argv, "--", "true"], cwd=work, timeout=60)
    finally:
        host.remove_tree(work)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        why = lines[0] if lines else f"exit {done.returncode}"
        raise ProfilerError(
            f"profile: perf record is refused here ({why}; perf_event_paranoid = {paranoid}): "
            "allow perf_event_open (as root, or `sysctl kernel.perf_event_paranoid=0`; in a "
            "container, a seccomp profile that permits it)"
        )


class Profiler:
    """perf record of one server's processes (or of one pgbench process: process PGBENCH),
    from `start()` to `stop()`."""

    def __init__(
        self,
        postmaster_pid: int,
        work_dir: PurePath,
        *,
        frequency_hz: int = DEFAULT_FREQUENCY_HZ,
        label: str = "",
        symbols: str = "",
        host: Host = LOCAL_HOST,
        proc: PurePath = PROC,
        process: str = SERVER,
    ) -> None:
        self.postmaster = postmaster_pid  # pgbench's pid when process is PGBENCH
        self.process = process
        self.data = work_dir / PERF_DATA
        self.work_dir = work_dir
        self.frequency = frequency_hz
        self.label = label
        self.symbols = symbols
        self.host = host
        self.proc = proc
        self.types: dict[int, str] = {postmaster_pid: POSTMASTER if process == SERVER else PGBENCH}
        self.stderr: list[str] = []
        self.perf: Process | None = None
        # The measured run on perf's clock (-k CLOCK_MONOTONIC: Python's time.monotonic).
        self.window: tuple[float | None, float | None] = (None, None)
        # pgbench processes on this host, profiled from this recording (`RunProfiler`).
        self.pgbench_pids: list[int] = []
        self.pgbench_label = ""
        self.pgbench_symbols = ""
        self.pgbench_profile: Profile | None = None
        self._halt = threading.Event()
        self._looker = threading.Thread(target=self._look_loop, name="profiler", daemon=True)

    def start(self) -> None:
        """Attach perf to the postmaster and its children (pgbench and its threads); return
        once it records."""
        if self.process == SERVER:
            self._look()
        everywhere = may_record_every_cpu(self.host)
        which = ["-a"] if everywhere else ["-p", ",".join(str(p) for p in sorted(self.types))]
        argv = ["perf", "record", *which, "-e", "cpu-clock", "-F", str(self.frequency), "-g"]
        argv += ["-N", "-k", "CLOCK_MONOTONIC", "-o", str(self.data)]
        self.host.remove_tree(self.data)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.work_dir)}
        self.perf = self.host.start(
            argv, env=env, cwd=self.work_dir, on_stderr_line=self.stderr.append
        )
        self._await_recording(1 if everywhere else len(self.types))
        if self.process == SERVER:  # pgbench's threads are its own pid's: nothing to look for
            self._looker.start()

    def measuring(self) -> None:
        """The measured run starts now: samples before it (hygiene, warmup) are left out."""
        self.window = (time.monotonic(), None)

    def measured(self) -> None:
        """The measured run ended now."""
        self.window = (self.window[0], time.monotonic())

    def close(self) -> None:
        """Stop perf if it still runs and delete what it wrote (a run that failed)."""
        self._halt.set()
        if self.perf is not None:
            self.perf.interrupt()
            self.perf.wait()
            self.perf = None
        self.host.remove_tree(self.data)

    def stop(self) -> Profile | None:
        """Stop perf and fold what it recorded in the measured window; None when there is
        nothing (no window, or perf wrote no file)."""
        self._halt.set()
        if self.perf is None:
            return None
        self.perf.interrupt()
        self.perf.wait()
        self.perf = None
        if self._looker.is_alive():
            self._looker.join()
        start, end = self.window
        if start is None or not self.host.exists(self.data):
            return None
        end = end or time.monotonic()
        argv = ["perf", "script", "-i", str(self.data), "-F", SCRIPT_FIELDS]
        # Task events are printed whatever --time says: the fork records of the whole recording.
        argv += ["--show-lost-events", "--show-task-events", "--time", f"{start:.6f},{end:.6f}"]
        done = self.host.run(argv, cwd=self.work_dir, timeout=900)
        self.host.remove_tree(self.data)
        if done.returncode != 0 and not done.stdout:
            return None  # perf could not read its own file: no profile rather than an empty one
        script = fold_perf_script(done.stdout)
        if self.process == SERVER:
            mine = script.descendants(self.postmaster) | set(self.types)
        else:
            mine = {self.postmaster}
        seconds = end - start
        if self.pgbench_pids:
            pgbench = set(self.pgbench_pids)
            self.pgbench_profile = self._profile(
                script, pgbench, PGBENCH, seconds, self.pgbench_label, self.pgbench_symbols
            )
        return self._profile(script, mine, self.process, seconds, self.label, self.symbols)

    def _profile(
        self,
        script: PerfScript,
        pids: set[int],
        process: str,
        seconds: float,
        label: str,
        symbols: str,
    ) -> Profile:
        """The profile of the processes ``pids`` in the recording."""
        stacks = Counter({key: n for key, n in script.stacks.items() if key[0] in pids})
        by_stack = Counter[str]()
        for (pid, stack), count in stacks.items():
            root = self.types.get(pid, UNSEEN) if process == SERVER else PGBENCH
            by_stack[f"{root};{stack}"] += count
        folded = "".join(f"{stack} {n}\n" for stack, n in sorted(by_stack.items()))
        return Profile(
            frequency_hz=self.frequency,
            samples=sum(stacks.values()),
            lost=script.lost,
            target=label,
            folded=folded,
            symbols=symbols,
            complete_share=complete_share(stacks),
            seconds=round(seconds, 3),
            process=process,
        )

    def _await_recording(self, targets: int, limit_s: float = 10.0) -> None:
        """Wait until perf holds its events (one per CPU and target: the machine, or each
        process), so the samples of the run's start are taken: its output file appears well
        before (0.03 s against 0.2 s on a loaded 2-CPU machine)."""
        assert self.perf is not None
        wanted = targets * (self.host.cpu_count() or 1)
        fds = self.proc / str(self.perf.pid) / "fd"
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and self._perf_events(fds) < wanted:
            if not self.host.exists(self.proc / str(self.postmaster)):
                return  # pgbench already ended (or perf could not attach): nothing to await
            time.sleep(0.01)
        time.sleep(0.05)  # opened, then enabled

    def _perf_events(self, fds: PurePath) -> int:
        try:
            links = [self.host.resolve(fds / name) for name in self.host.list_dir(fds)]
        except OSError:
            return 0
        return sum(link.name.endswith("[perf_event]") for link in links)

    def _look_loop(self) -> None:
        while not self._halt.wait(LOOK_PERIOD_S):
            self._look()

    def _look(self) -> None:
        try:
            children = child_pids(self.proc, self.postmaster, self.host)
        except OSError:
            return
        for pid in children:
            if pid in self.types:
                continue
            try:
                title = self.host.read_text(self.proc / str(pid) / "cmdline")
            except OSError:
                continue
            kind = backend_type(title)
            if kind not in (POSTMASTER, UNSEEN):  # a fresh fork not yet titled: next look
                self.types[pid] = kind


@dataclass(frozen=True)
class PgbenchTarget:
    """The run's pgbench, to profile beside the server: its binary on the host it runs on."""

    binary: PurePath
    host: Host
    symbols: str  # what the binary lacks (`symbols.symbols_note`)
    run: str  # the run's label


class RunProfiler:
    """The profiles of one measured run: the server's processes from `start()` (before the
    hygiene), and each pgbench process from its start when pgbench is profiled too (its perf
    in a directory of its own on pgbench's host)."""

    def __init__(self, server: Profiler, pgbench: PgbenchTarget | None = None) -> None:
        self.server = server
        self.pgbench = pgbench
        self.clients: list[tuple[Profiler, PurePath]] = []  # per pgbench process: perf, dir

    def start(self) -> None:
        self.server.start()

    def pgbench_started(self, pid: int) -> None:
        """The measured run starts now, in pgbench process pid (the first one, when there are
        several): attach perf to it too."""
        if self.server.window[0] is None:
            self.server.measuring()
        # An attach that fails leaves the run (pgbench is running) without pgbench's profile.
        if self.pgbench is not None:
            with contextlib.suppress(OSError):
                self._attach(self.pgbench, pid)

    def _attach(self, target: PgbenchTarget, pid: int) -> None:
        label = f"pgbench ({target.binary}): pid {pid} and its threads; {target.run}"
        if target.host.name == self.server.host.name:  # the server's recording has it
            self.server.pgbench_pids.append(pid)
            self.server.pgbench_label, self.server.pgbench_symbols = label, target.symbols
            return
        work = target.host.make_temp_dir("pgbenchlab-perf-", PurePath("/tmp"))
        profiler = Profiler(
            pid,
            work,
            frequency_hz=self.server.frequency,
            label=label,
            symbols=target.symbols,
            host=target.host,
            process=PGBENCH,
        )
        self.clients.append((profiler, work))
        profiler.measuring()
        # Held still while perf starts: pgbench's first transactions would go unsampled.
        target.host.signal(pid, signal.SIGSTOP)
        try:
            profiler.start()
        finally:
            target.host.signal(pid, signal.SIGCONT)

    def measured(self) -> None:
        self.server.measured()
        for profiler, _ in self.clients:
            profiler.measured()

    def stop(self) -> RunProfiles:
        """Stop every perf; the server's profile and pgbench's (its processes merged)."""
        server = self.server.stop()
        found = [p for p in (c.stop() for c, _ in self.clients) if p is not None]
        if self.server.pgbench_profile is not None:
            found.insert(0, self.server.pgbench_profile)
        pgbench = merged(found) if found else None
        if pgbench is not None and len(found) > 1:
            pgbench = replace(pgbench, target="; ".join(p.target for p in found))
        return RunProfiles(server, pgbench)

    def close(self) -> None:
        """Stop perf where it still runs; delete what it wrote and pgbench's perf directories."""
        self.server.close()
        for profiler, work in self.clients:
            profiler.close()
            profiler.host.remove_tree(work)


def may_record_every_cpu(host: Host) -> bool:
    """Whether perf may record every CPU there (`-a`): as root, or with perf_event_paranoid at
    most 0. Otherwise only the login's own processes can be profiled (`-p`: a pgbench on a load
    generator host, at the cost of per-process events)."""
    try:
        if int(host.read_text(PARANOID).strip()) <= 0:
            return True
    except (OSError, ValueError):
        pass
    return host.run(["id", "-u"], timeout=30).stdout.strip() == "0"


def complete_share(stacks: Counter[tuple[int, str]]) -> float | None:
    """The share of samples whose stack reaches the program's entry (main, or the C library's
    start; a thread's start for pgbench's threads): frame-pointer unwinding through code built
    without frame pointers stops early."""
    total = sum(stacks.values())
    if total == 0:
        return None
    entries = ("main", "__libc_start_main", "__libc_start_call_main", "_start")
    roots = (*entries, "start_thread", "clone", "clone3")
    whole = sum(n for (_, stack), n in stacks.items() if stack.split(";", 1)[0] in roots)
    return whole / total
