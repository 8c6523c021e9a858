"""CPU lists as the kernel writes them ("0-3,8,10-11": /proc/PID/status Cpus_allowed_list,
taskset -c): parsed into sorted CPU numbers and written back in that canonical form, so a
plan's list and the kernel's read-back compare as text."""

from __future__ import annotations

import re
from collections.abc import Iterable

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
