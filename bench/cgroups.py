"""cpuacct cgroups (v1) for the benchmarks: a process moved into one takes every process it
starts later with it, short-lived ones included, so the group's usage is their exact CPU time.
Root only."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


@dataclass
class Cgroup:
    """A cpuacct cgroup holding a process and all it starts."""

    path: Path

    @classmethod
    def holding(cls, name: str, pid: int) -> Cgroup:
        path = CPUACCT / name
        path.mkdir()
        (path / "cgroup.procs").write_text(str(pid))
        return cls(path)

    def usage_s(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def remove(self) -> None:
        for _attempt in range(50):  # its processes back to the root group, or rmdir fails
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    (CPUACCT / "cgroup.procs").write_text(str(pid))
            try:
                self.path.rmdir()
                return
            except OSError:  # one forked meanwhile
                time.sleep(0.1)
        self.path.rmdir()


@contextmanager
def holding(processes: dict[str, int], tag: str) -> Iterator[dict[str, Cgroup]]:
    """A cgroup per named process (tag-name), for the time of the block."""
    groups: dict[str, Cgroup] = {}
    try:
        for name, pid in processes.items():
            groups[name] = Cgroup.holding(f"{tag}-{name}", pid)
        yield groups
    finally:
        for group in groups.values():
            group.remove()


def usage_s(groups: dict[str, Cgroup]) -> float:
    return sum(group.usage_s() for group in groups.values())
