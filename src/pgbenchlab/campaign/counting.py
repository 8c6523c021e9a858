"""A counted run (`count = "instructions"`) on a server running under callgrind: the same
pgbench with one transaction per client first (the reference), then the measured run, each
followed by the counts its backends wrote as they exited (`profiles.counting` subtracts them).

A run's backends are told apart from the rest by pid: the server's processes alive before
pgbench starts (the telemetry's connection, the hygiene's, the auxiliary processes) are left
out, and the files written before are removed then (read files are removed too: a pid used
again would write the same name); of the processes that came after, only client backends count
(an autovacuum worker does not)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePath, PurePosixPath

from pgbenchlab.errors import PgbenchParseError, ServerError
from pgbenchlab.hosts import Host
from pgbenchlab.invocation import command
from pgbenchlab.invocation.shares import total_report
from pgbenchlab.profiles.counting import ProcessCounts, parse_callgrind
from pgbenchlab.server import ManagedServer, Server
from pgbenchlab.server.cluster_files import postmaster_pid
from pgbenchlab.telemetry.osstats import child_pids

PROC = PurePosixPath("/proc")
EXIT_WAIT_S = 300.0  # a backend under callgrind exits in well under a second; an autovacuum
# worker that started meanwhile may take longer, and is not counted anyway


VALGRIND_FIX = "install valgrind (apt install valgrind), or remove count"


def check_valgrind(host: Host) -> None:
    """A one-line ServerError with the fix when callgrind cannot run on the server's host."""
    try:
        done = host.run(["valgrind", "--tool=callgrind", "--version"], timeout=60)
    except FileNotFoundError:
        raise ServerError(
            f"count: valgrind is not installed on {host.name}: {VALGRIND_FIX}"
        ) from None
    if done.returncode != 0 or not done.stdout.startswith("valgrind-"):
        lines = (done.stderr or done.stdout).strip().splitlines()
        why = lines[0] if lines else f"exit {done.returncode}"
        raise ServerError(f"count: valgrind does not run on {host.name} ({why}): {VALGRIND_FIX}")


class BackendCounts:
    """The counts the server's processes write between `mark()` and `collect()`."""

    def __init__(self, server: ManagedServer) -> None:
        self.server = server
        self.before: set[int] = set()

    def _children(self) -> set[int]:
        pid = postmaster_pid(self.server.data_dir, self.server.host)
        if pid is None:
            raise RuntimeError(f"server {self.server.name}: no postmaster to count under")
        return set(child_pids(PROC, pid, self.server.host))

    def _written(self) -> list[PurePath]:
        names = self.server.host.list_dir(self.server.count_dir)
        return [self.server.count_dir / n for n in sorted(names) if n.startswith("callgrind.")]

    def _remove(self, paths: list[PurePath]) -> None:
        for path in paths:  # a pid used again writes the same name: no file is left to mistake
            self.server.host.remove_tree(path)

    def mark(self) -> None:
        self._remove(self._written())
        self.before = self._children()

    def collect(self) -> list[ProcessCounts]:
        """The counts of the processes started since `mark()`, once they have exited."""
        deadline = time.monotonic() + EXIT_WAIT_S
        while self._children() - self.before and time.monotonic() < deadline:
            time.sleep(0.1)
        paths = self._written()
        found = read_counts(self.server.host, paths, self.before)
        self._remove(paths)
        return found


def read_counts(host: Host, paths: list[PurePath], before: set[int]) -> list[ProcessCounts]:
    """The counts in the files of processes not in `before`. A process of before (the
    telemetry's backend, closed just before) may be writing its file at this moment: never
    read, it cannot be taken half-written."""
    new = [path for path in paths if _pid_of(path) not in before]
    return [parse_callgrind(text) for text in host.read_texts(new) if text is not None]


def _pid_of(path: PurePath) -> int | None:
    """callgrind.PID's pid (None for a name of another form)."""
    _, _, pid = path.name.partition(".")
    return int(pid) if pid.isdigit() else None


def reference_run(
    counts: BackendCounts,
    run_pgbench: Callable[[command.Invocation], command.Completed],
    invocation: command.Invocation,
) -> tuple[list[ProcessCounts], int]:
    """The run's pgbench with one transaction per client, counted: what the measured run's
    setup, first transaction and exit cost (its counts and its committed transactions)."""
    once = replace(
        invocation,
        options=replace(invocation.options, transactions=1),
        seconds=None,
        log_dir=None,
        progress=False,
    )
    counts.mark()
    done = run_pgbench(once)
    if done.interrupted:
        raise KeyboardInterrupt
    try:
        committed = total_report(done).transactions
    except PgbenchParseError as exc:
        raise RuntimeError(f"the counted run's reference (-t 1) failed: {exc}") from exc
    return counts.collect(), committed


def counting_server(server: Server) -> ManagedServer:
    if not isinstance(server, ManagedServer) or not server.counting:
        raise RuntimeError("a counted run needs its managed server started under callgrind")
    return server
