"""CPU lists as the kernel writes them ("0-3,8,10-11": /proc/PID/status Cpus_allowed_list,
taskset -c): parsed into sorted CPU numbers and written back in that canonical form, so a
plan's list and the kernel's read-back compare as text. NUMA node lists are written alike; a
NUMA policy (`NumaPolicy`) is numactl's placement of a process tree on them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_CPU = 1 << 16  # far beyond any machine; stops "0-999999999" from expanding


class BadCpuList(ValueError):
    """Not a CPU list such as "0-7" or "0,2,4-6"."""


def parse(text: str) -> tuple[int, ...]:
    """The sorted, distinct CPU numbers of a list; BadCpuList when it is not one."""
    found: set[int] = set()
    items = text.replace(" ", "").split(",")
    for item in items:
        match = _ITEM.match(item)
        if match is None:
            raise BadCpuList(f'"{text}" is not a CPU list such as "0-7" or "0,2,4-6"')
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first or last >= MAX_CPU:
            raise BadCpuList(f'"{item}" in "{text}" is not a range of CPU numbers')
        found.update(range(first, last + 1))
    return tuple(sorted(found))


def text(cpus: Iterable[int]) -> str:
    """The canonical list of CPU numbers: ascending, runs as ranges ("0-3,8")."""
    ordered = sorted(set(cpus))
    runs: list[str] = []
    start = prev = None
    for cpu in [*ordered, None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(runs)


def count(listed: str) -> int:
    return len(parse(listed))


NUMA_POLICIES = ("cpunodebind", "membind", "interleave", "preferred")


@dataclass(frozen=True)
class NumaPolicy:
    """Where a process tree runs and takes its memory on a NUMA machine: numactl's options,
    each a node list ("0", "0-1") or "all" (interleave). Its processes inherit it; the kernel's
    view is read back from /proc/PID/status (Mems_allowed_list) and numa_maps."""

    cpunodebind: str | None = None
    membind: str | None = None
    interleave: str | None = None
    preferred: str | None = None

    def options(self) -> list[str]:
        """numactl's arguments for it."""
        return [f"--{name}={value}" for name, value in self.items()]

    def items(self) -> list[tuple[str, str]]:
        return [(n, v) for n in NUMA_POLICIES if (v := getattr(self, n)) is not None]

    @property
    def text(self) -> str:
        """As the plan and the report write it: "cpunodebind=0 membind=0"."""
        return " ".join(f"{n}={v}" for n, v in self.items())

    def nodes(self) -> set[int]:
        """Every node it names ("all" names none in particular)."""
        return {node for _, v in self.items() if v != "all" for node in parse(v)}
