"""The `Host` interface: run and start processes, read and write files, tell a few facts.

Paths are the host's own (`PurePath`: a remote host's paths are not this machine's). Reads and
file operations raise `OSError` as pathlib does; a command that outlives its timeout raises
`TimeoutError` (an `OSError` too). Only what pgbenchlab needs is here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Protocol

from pgbenchlab.cpusets import NumaPolicy

LineCallback = Callable[[str], None]


class Account(Protocol):
    """The OS account a command runs as (see osuser.OsAccount)."""

    @property
    def name(self) -> str: ...

    @property
    def uid(self) -> int: ...

    @property
    def gid(self) -> int: ...


@dataclass(frozen=True)
class Finished:
    """A command run to completion."""

    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Exit:
    """How a started process ended: its exit code and its own user + system CPU seconds."""

    returncode: int
    cpu_s: float


class Process(Protocol):
    """A long-running process; its output lines reach the callbacks given to `Host.start`."""

    @property
    def pid(self) -> int: ...

    def interrupt(self) -> None:
        """SIGINT: ask it to stop."""

    def kill(self) -> None:
        """SIGKILL, to its whole process group when it was started in a session of its own.
        Does nothing once it has been reaped."""

    def wait(self) -> Exit:
        """Reap it (once every output line has reached its callback)."""


class Tail(Protocol):
    """A file followed from where it ended when opened."""

    def read(self, limit: int = 16 << 20) -> str:
        """The whole lines written since the last read (at most limit bytes)."""


class LockedFile(Protocol):
    """A small file held under an exclusive lock until `release()` or the holder's end."""

    def read_text(self) -> str: ...

    def write_text(self, text: str) -> None:
        """Replace the content in place (a renamed file would carry no lock), durably."""

    def release(self) -> None: ...


class Host(Protocol):
    name: str

    # -- processes ----------------------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: PurePath | str = "/",
        timeout: float | None = None,
        as_user: Account | None = None,
        new_session: bool = False,
    ) -> Finished:
        """Run argv (never through a shell) to completion, capturing its text output."""

    def start(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: PurePath | str,
        on_stdout_line: LineCallback | None = None,
        on_stderr_line: LineCallback | None = None,
        as_user: Account | None = None,
        new_session: bool = False,
    ) -> Process:
        """Start argv and stream its output lines (without their newline) to the callbacks."""

    def signal(self, pid: int, signum: int) -> None:
        """Send a signal to a process of this host; ProcessLookupError when there is none."""

    # -- files --------------------------------------------------------------------------------

    def read_text(self, path: PurePath) -> str: ...

    def read_bytes(self, path: PurePath) -> bytes: ...

    def read_texts(self, paths: Sequence[PurePath]) -> list[str | None]:
        """Several small files at once (one round trip to another host); None for each that
        cannot be read (say, of a process that has ended)."""

    def write_text(
        self, path: PurePath, text: str, *, mode: int = 0o600, owner: Account | None = None
    ) -> None:
        """Replace path's content whole (a reader never sees half of it), with that mode, owned
        by owner when given."""

    def put_file(self, local: Path, path: PurePath) -> None:
        """Copy a file of this machine to path there (a large one: an installation's archive)."""

    def write_in_place(self, path: PurePath, text: str) -> None:
        """Write text into an existing file without replacing it: a kernel file (/proc/sys),
        which takes one write and cannot be renamed over."""

    def exists(self, path: PurePath) -> bool: ...

    def mkdir(self, path: PurePath, *, mode: int = 0o700, owner: Account | None = None) -> None:
        """Create path and missing parents; path gets mode and, when given, owner."""

    def make_temp_dir(
        self, prefix: str, parent: PurePath, *, owner: Account | None = None
    ) -> PurePath:
        """A new private directory (mode 0700) named prefix + random characters."""

    def remove_tree(self, path: PurePath) -> None:
        """Remove a file, a symbolic link or a directory tree; nothing when path is absent."""

    def list_dir(self, path: PurePath) -> list[str]:
        """The names in a directory."""

    def resolve(self, path: PurePath) -> PurePath:
        """The absolute path with symbolic links resolved."""

    def device_of(self, path: PurePath) -> str:
        """The "major:minor" device of the file system holding path."""

    def lock(self, path: PurePath) -> LockedFile:
        """Open path (created with mode 0600) under an exclusive lock; BlockingIOError when
        someone else holds it."""

    def follow(self, path: PurePath) -> Tail:
        """Follow path from its current end (from its start when it does not exist yet)."""

    # -- facts --------------------------------------------------------------------------------

    def cpu_count(self) -> int | None: ...

    def allowed_cpus(self) -> frozenset[int]:
        """The CPUs processes started here may run on (the machine's, or its cpuset's)."""

    def pin_prefix(self, cpus: str) -> list[str] | None:
        """The argv prefix that starts a command pinned to a CPU list ("0-3": taskset, or
        numactl --physcpubind where taskset is missing); its children inherit the pinning.
        None when this host has neither."""

    def numactl(self) -> str | None:
        """numactl's path there (None: not installed)."""

    def numa_nodes(self) -> frozenset[int]:
        """The NUMA nodes this host has (a machine without NUMA: node 0)."""

    def clock_ticks_per_s(self) -> int:
        """The unit of the CPU times in /proc/<pid>/stat."""

    def clock_readings(self, count: int) -> list[tuple[float, float, float]]:
        """count readings of this host's clock, each (this machine's clock before asking, the
        host's reading, this machine's clock after the answer), in seconds since the epoch."""

    def free_port(self) -> int:
        """A TCP port no one listens on now."""

    # -- reaching it -------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """Where clients on other machines reach this host's servers (127.0.0.1 for this
        machine: none)."""

    def state_dir(self) -> PurePath | None:
        """pgbenchlab's own directory there (claims, detached processes); None on this
        machine, whose usual places are known."""

    def own_dir(self) -> PurePath | None:
        """This pgbenchlab process's directory there, for its scratch files: removed by a
        later start once this process is gone (killed before it could clean up); None on this
        machine."""

    def reach(self, socket_dir: PurePath, port: int) -> tuple[str, int]:
        """How this machine connects to a server listening in socket_dir on port there: libpq's
        host and port (the socket itself here; a forward over SSH to it on another host)."""


NODES_DIR = "/sys/devices/system/node"


def nodes_in(paths: Iterable[PurePath]) -> frozenset[int]:
    """The node numbers among a node directory's entries ("node0", "node1"; none: node 0)."""
    found = {int(p.name[4:]) for p in paths if p.name.startswith("node") and p.name[4:].isdigit()}
    return frozenset(found or {0})


def pinned(
    argv: list[str], cpus: str | None, host: Host, numa: NumaPolicy | None = None
) -> list[str]:
    """argv, started pinned to the CPU list cpus and placed by the NUMA policy numa when
    given (its children inherit both)."""
    if numa is not None:
        tool = host.numactl()
        if tool is None:
            raise OSError(f"cannot place by NUMA policy {numa.text} on {host.name}: no numactl")
        return [tool, *numa.options(), "--", *pinned(argv, cpus, host)]
    if not cpus:
        return argv
    prefix = host.pin_prefix(cpus)
    if prefix is None:
        raise OSError(f"cannot pin to CPU {cpus} on {host.name}: no taskset or numactl")
    return [*prefix, *argv]


def process_running(pid: int, host: Host) -> bool:
    """Whether the process is there on the host and not a zombie waiting to be reaped."""
    try:
        status = host.read_text(PurePath("/proc") / str(pid) / "status")
    except OSError:
        return False
    return "\nState:\tZ" not in status
