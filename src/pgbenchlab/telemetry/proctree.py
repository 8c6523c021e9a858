"""A server's CPU time, user and system, at one moment: of its whole process tree, by /proc
(process accounting), or by a cgroup v2 of its own for the run.

Process accounting: the postmaster's own utime/stime, plus its cutime/cstime (the CPU of every
child it has reaped: backends that came and went, under -C one per transaction), plus each live
child's utime/stime and cutime/cstime. The difference of two such readings is the tree's CPU
in between, a backend that exited meanwhile included (its time moved from its own file into
the postmaster's cutime, counted once either way). The figures are clock ticks (10 ms here):
each process read rounds down by up to a tick.

A cgroup (this machine, as root, where cgroup v2 is mounted): a child of the postmaster's own
cgroup (so every limit above it still holds) that the postmaster and its children are moved
into when the run starts; whatever they fork later is born in it, and the kernel sums their CPU
to the microsecond (cpu.stat), exited processes included. The processes go back and the cgroup
is removed when the run ends. Only where the postmaster's cgroup gives its children no
controller: a child cgroup with `cpu` enabled would be scheduled as one entity, and the run
would measure that instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath

from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.telemetry.osstats import SNAPSHOT_TRIES, child_pids
from pgbenchlab.telemetry.taskstats import TaskExit

MOUNTINFO = Path("/proc/self/mountinfo")
USER, SYSTEM, CHILD_USER, CHILD_SYSTEM = 11, 12, 13, 14  # /proc/PID/stat after "(comm) "


@dataclass(frozen=True)
class TreeTimes:
    """A process tree's CPU seconds at one moment, and each live process's own."""

    user_s: float
    system_s: float
    own_s: dict[int, float]  # pid → its own utime + stime (children excluded)


def _stat_fields(text: str) -> list[str]:
    return text[text.rfind(")") + 2 :].split()


def tree_times(proc: PurePath, postmaster: int, host: Host = LOCAL_HOST) -> TreeTimes | None:
    """The tree's CPU now (None: no such postmaster). A child reaped while its siblings are
    read would count in neither sum, so the postmaster's file is read before and after its
    children's and the scan repeated until its reaped CPU did not change."""
    ticks = host.clock_ticks_per_s()
    here = proc / str(postmaster)
    listing = here / "task" / str(postmaster) / "children"
    stat, listed = host.read_texts([here / "stat", listing])
    if stat is None:
        return None
    children = _children(listed, proc, postmaster, host)
    for _ in range(SNAPSHOT_TRIES):
        *texts, after, listed = host.read_texts(
            [*(proc / str(pid) / "stat" for pid in children), here / "stat", listing]
        )
        if after is None:
            return None
        if _reaped(after) == _reaped(stat):
            break
        stat, children = after, _children(listed, proc, postmaster, host)
    user = system = 0
    own: dict[int, float] = {}
    for pid, text in [(postmaster, after), *zip(children, texts, strict=True)]:
        if text is None:
            continue  # exited between the listing and the read (its time is in the reaped)
        f = [int(x) for x in _stat_fields(text)[USER : CHILD_SYSTEM + 1]]
        user += f[0] + f[2]
        system += f[1] + f[3]
        own[pid] = (f[0] + f[1]) / ticks
    return TreeTimes(user / ticks, system / ticks, own)


def _reaped(stat: str) -> tuple[str, str]:
    fields = _stat_fields(stat)
    return fields[CHILD_USER], fields[CHILD_SYSTEM]


def _children(listed: str | None, proc: PurePath, pid: int, host: Host) -> list[int]:
    return [int(p) for p in listed.split()] if listed is not None else child_pids(proc, pid, host)


def seen_cpu_s(
    before: TreeTimes, after: TreeTimes, exits: Mapping[int, TaskExit] | None = None
) -> float:
    """The CPU the server's processes used in between by their own figures, each process once:
    those alive at both readings, those born since and alive, and (when their exits were heard)
    those that exited meanwhile. However the tree's CPU was accounted, it used at least this."""
    exits = exits or {}
    alive = {pid: s for pid, s in after.own_s.items() if pid not in exits}
    return sum(s - before.own_s.get(pid, 0.0) for pid, s in alive.items()) + sum(
        e.cpu_s - before.own_s.get(pid, 0.0) for pid, e in exits.items()
    )


# -- a cgroup of the run's own ---------------------------------------------------------------


def cgroup2_mount(mountinfo: Path = MOUNTINFO) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified
    beside the v1 controllers)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        before, _, after = line.partition(" - ")
        if after.split(" ", 1)[0] == "cgroup2":
            return Path(before.split()[4])
    return None


def cgroup_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """A process's cgroup v2 path ("0::/path" in /proc/PID/cgroup)."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


PREFIX = "pgbenchlab-"  # a run's cgroup: pgbenchlab-POSTMASTER-RANDOM


def _remove_stale(home: Path, proc: Path) -> None:
    """The run cgroups a killed pgbenchlab left whose postmaster is gone (rmdir removes only
    an empty one)."""
    for stale in home.glob(f"{PREFIX}*-*"):
        pid = stale.name.removeprefix(PREFIX).split("-", 1)[0]
        if pid.isdigit() and not (proc / pid).exists():
            with contextlib.suppress(OSError):
                stale.rmdir()


@dataclass
class RunCgroup:
    """A cgroup v2 holding a server's processes for one run."""

    path: Path
    home: Path  # where its processes were, and go back to

    @classmethod
    def around(cls, postmaster: int, proc: Path = Path("/proc")) -> RunCgroup:
        """Move the postmaster, then its children, into a new cgroup below its own. Raises
        OSError (with why) where the host does not allow it."""
        if os.geteuid() != 0:
            raise PermissionError("not root")
        mount, place = cgroup2_mount(), cgroup_of(postmaster, proc)
        if mount is None or place is None:
            raise FileNotFoundError("no cgroup v2 hierarchy mounted")
        home = mount / place.lstrip("/")
        enabled = (home / "cgroup.subtree_control").read_text().split()
        if enabled:  # a child would get them: the server scheduled as one group, say
            raise PermissionError(
                f"its cgroup gives its children controllers ({' '.join(enabled)}): one of the "
                "run's own would change how the server is scheduled"
            )
        _remove_stale(home, proc)
        path = home / f"{PREFIX}{postmaster}-{secrets.token_hex(4)}"
        path.mkdir()
        group = cls(path, home)
        try:
            group._move([postmaster], path)  # what it forks from now on is born inside
            group._move(child_pids(proc, postmaster), path)
        except OSError:
            group.remove()
            raise
        return group

    def times(self) -> tuple[float, float]:
        """(user, system) seconds of every process that has been in it."""
        values = {}
        for line in (self.path / "cpu.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            values[name] = int(value)
        return values["user_usec"] / 1e6, values["system_usec"] / 1e6

    def remove(self) -> None:
        """Its processes back home, then the cgroup gone (retried: one may fork meanwhile)."""
        for _attempt in range(50):
            self._move(self._pids(), self.home)
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.02)
        self.path.rmdir()

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    @staticmethod
    def _move(pids: list[int], to: Path) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                (to / "cgroup.procs").write_text(str(pid))
