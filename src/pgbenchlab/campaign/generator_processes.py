"""The pgbench processes of a run split across load generators: when each started (`Started`),
and how much CPU each wanted (`CpuWatch`).

wait4 tells how long a generator's pgbench ran on a CPU, not how long it waited for one: on a
loaded machine a pgbench that wanted its CPUs all the time shows only the share it was given.
`CpuWatch` reads each one's threads' run-queue wait twice a second on its own host
(/proc/PID/task/*/schedstat, through the `Host`) from the moment pgbench runs (its wrapper
exec'd it); the wait per second between the first and the last reading stands for the run
(the end, which no reading sees, is left out rather than counted as no wait), so a saturated
generator is named whatever else runs there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from types import TracebackType

from pgbenchlab.errors import UserError
from pgbenchlab.hosts import Host
from pgbenchlab.telemetry.osstats import process_times

PROC = PurePosixPath("/proc")
WATCH_PERIOD_S = 0.5


class Started:
    """A generator's start: its process id (when spawned) and its own clock's reading (when
    the wrapper execs pgbench), passed on once both are known."""

    def __init__(self, on_start: Callable[[int], None] | None) -> None:
        self.on_start = on_start
        self.pid: int | None = None
        self.at: float | None = None
        self._lock = threading.Lock()

    def spawned(self, pid: int) -> None:
        with self._lock:
            self.pid = pid
            self._tell()

    def mark(self, at: float) -> None:
        with self._lock:
            self.at = at
            self._tell()

    def _tell(self) -> None:
        if self.on_start is not None and self.pid is not None and self.at is not None:
            self.on_start(self.pid)
            self.on_start = None


Reading = tuple[float, float]  # (this machine's monotonic clock, run-queue wait seconds)


class CpuWatch:
    """Each watched process's run-queue wait while the block runs: `wait_per_s(i)` for the
    i-th, over its threads (None: read fewer than twice)."""

    def __init__(
        self, processes: Sequence[tuple[Host, Started]], period_s: float = WATCH_PERIOD_S
    ) -> None:
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
        for i, (host, started) in enumerate(self.processes):
            if started.pid is None or started.at is None:
                continue
            now = time.monotonic()
            try:
                times = process_times(PROC, started.pid, host)
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
