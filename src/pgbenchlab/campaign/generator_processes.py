"""The pgbench processes of a run split across load generators: each one run in a thread of its
own and stopped together on an interruption (`run_all`), when each started (`Started`), and how
much CPU each wanted (`CpuWatch`).

wait4 tells how long a generator's pgbench ran on a CPU, not how long it waited for one: on a
loaded machine a pgbench that wanted its CPUs all the time shows only the share it was given.
`CpuWatch` reads each one's threads' run-queue wait twice a second on its own host
(/proc/PID/task/*/schedstat, through the `Host`) from the moment pgbench runs (its wrapper
exec'd it); the wait per second between the first and the last reading stands for the run
(the end, which no reading sees, is left out rather than counted as no wait), so a saturated
generator is named whatever else runs there.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import replace
from pathlib import PurePosixPath
from types import TracebackType

from pgbenchlab.errors import UserError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.invocation.command import Completed
from pgbenchlab.telemetry.osstats import process_times

PROC = PurePosixPath("/proc")
WATCH_PERIOD_S = 0.5
INTERRUPT_POLL_S = 0.1  # after Ctrl-C: how often the shares still running are looked at again
REASK_S = 2.0  # after Ctrl-C: a share still running is asked again (its signal session failed)


class Started:
    """A generator's start: its process id (when spawned) and its own clock's reading (when
    the wrapper execs pgbench), passed on once both are known. Once the run is interrupted
    (`stop`), its process is asked to stop as soon as it has been spawned."""

    def __init__(self, on_start: Callable[[int], None] | None, host: Host = LOCAL_HOST) -> None:
        self.on_start = on_start
        self.host = host
        self.pid: int | None = None
        self.at: float | None = None
        self._stopping = False
        self._asked = -math.inf  # when its process was last asked to stop
        self._lock = threading.Lock()

    def spawned(self, pid: int) -> None:
        with self._lock:
            self.pid = pid
            self._tell()
            stopping = self._stopping
        if stopping:  # interrupted while its start was in flight
            self.stop()

    def mark(self, at: float) -> None:
        with self._lock:
            self.at = at
            self._tell()

    def stop(self) -> None:
        """Ask its pgbench (or its waiting wrapper) to stop, as Ctrl-C does: now if it has been
        spawned, else as soon as it is; again when called REASK_S later (a signal's SSH session
        may fail)."""
        with self._lock:
            self._stopping = True
            pid, now = self.pid, time.monotonic()
            if pid is None or now - self._asked < REASK_S:
                return
            self._asked = now
        with contextlib.suppress(OSError, UserError):
            self.host.signal(pid, signal.SIGINT)

    def _tell(self) -> None:
        if self.on_start is not None and self.pid is not None and self.at is not None:
            self.on_start(self.pid)
            self.on_start = None


def run_all(
    jobs: Sequence[Callable[[], Completed]],
    starts: Sequence[Started],
    argvs: Sequence[tuple[str, ...]],
) -> list[Completed]:
    """Each job (one share's pgbench, its start noted in its `Started`) run in a thread of its
    own, and their outcomes. An interruption, also one that comes while they are still being
    started, cancels the jobs not begun, asks the others' processes to stop (a share whose start
    is in flight: once it has started, else its pgbench would run its whole duration), waits for
    them and marks every outcome interrupted (a job never begun: its argv, no output)."""
    outcomes = [Future[Completed]() for _ in range(len(jobs))]
    try:
        for job, outcome in zip(jobs, outcomes, strict=True):
            threading.Thread(target=_settle, args=(outcome, job), name="generator").start()
        return [f.result() for f in outcomes]
    except KeyboardInterrupt:
        for outcome in outcomes:
            outcome.cancel()  # only those not begun
        while running := [i for i, f in enumerate(outcomes) if not f.done()]:
            for i in running:
                starts[i].stop()
            wait([outcomes[i] for i in running], timeout=INTERRUPT_POLL_S)
        never = [Completed(argv, 0, "", "", 0.0, 0.0, interrupted=True) for argv in argvs]
        return [
            n if f.cancelled() else replace(f.result(), interrupted=True)
            for f, n in zip(outcomes, never, strict=True)
        ]


def _settle(outcome: Future[Completed], job: Callable[[], Completed]) -> None:
    """Run the job into outcome, unless it was cancelled before it began."""
    if not outcome.set_running_or_notify_cancel():
        return
    try:
        outcome.set_result(job())
    except BaseException as exc:  # handed to the waiting thread, which raises it
        outcome.set_exception(exc)


Reading = tuple[float, float]  # (this machine's monotonic clock, run-queue wait seconds)


class CpuWatch:
    """Each watched process's run-queue wait while the block runs: `wait_per_s(i)` for the
    i-th, over its threads (None: read fewer than twice)."""

    def __init__(self, processes: Sequence[Started], period_s: float = WATCH_PERIOD_S) -> None:
        self.processes = list(processes)
        self.period_s = period_s
        self.first: list[Reading | None] = [None] * len(self.processes)
        self.last: list[Reading | None] = [None] * len(self.processes)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="generator-cpu", daemon=True)

    def __enter__(self) -> CpuWatch:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._halt.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._halt.wait(self.period_s):
            self.read()

    def read(self) -> None:
        """One reading of every process running pgbench (one that has ended keeps its last)."""
        for i, started in enumerate(self.processes):
            if started.pid is None or started.at is None:
                continue
            now = time.monotonic()
            try:
                times = process_times(PROC, started.pid, started.host)
            except (OSError, UserError):  # its host unreachable: the run's failure says so
                times = None
            if times is not None:
                self.first[i] = self.first[i] or (now, times[1])
                self.last[i] = (now, times[1])

    def wait_per_s(self, i: int) -> float | None:
        first, last = self.first[i], self.last[i]
        if first is None or last is None or last[0] <= first[0]:
            return None
        return (last[1] - first[1]) / (last[0] - first[0])
