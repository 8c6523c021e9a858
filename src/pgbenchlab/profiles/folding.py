"""`perf script` output folded into stacks on this side: one line per distinct stack, root
first, frames joined by ";", with its sample count (the "folded" format flame graphs read).

The parser reads what `perf script -F comm,pid,tid,ip,sym,dso --show-lost-events
--show-task-events` prints: a header line per sample (``comm pid/tid``), its frames leaf first
(``ip symbol (dso)``), a blank line; ``PERF_RECORD_LOST lost N`` lines when perf's ring buffer
overflowed; and ``PERF_RECORD_FORK(pid:tid):(ppid:ptid)`` lines, which tell whose child each
process is (a system-wide recording keeps the server's process tree by them).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

_HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s*$")
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>.*)\)\s*$")
_LOST = re.compile(r"PERF_RECORD_LOST lost (\d+)")
_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)")
_OFFSET = re.compile(r"\+0x[0-9a-f]+$")


@dataclass
class PerfScript:
    """Samples by (pid, folded stack), the processes' names, the samples perf lost, and each
    forked process's parent."""

    stacks: Counter[tuple[int, str]] = field(default_factory=Counter)
    comms: dict[int, str] = field(default_factory=dict)
    lost: int = 0
    parents: dict[int, int] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def descendants(self, root: int) -> set[int]:
        """``root`` and every process forked under it, as far as the fork records tell."""
        children: dict[int, list[int]] = {}
        for child, parent in self.parents.items():
            children.setdefault(parent, []).append(child)
        found, todo = {root}, [root]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found


def frame_name(symbol: str, dso: str) -> str:
    """A frame as drawn: the function, or "[binary]" when perf could not name it."""
    if symbol in ("", "[unknown]"):
        base = dso.rsplit("/", 1)[-1] or "unknown"
        return base if base.startswith("[") else f"[{base}]"
    return _OFFSET.sub("", symbol).replace(";", ":")


def fold_perf_script(text: str) -> PerfScript:
    found = PerfScript()
    pid: int | None = None
    frames: list[str] = []

    def close() -> None:
        if pid is not None:
            found.stacks[(pid, ";".join(reversed(frames)) or "[no stack]")] += 1

    for line in text.splitlines():
        if not line.strip():
            close()
            pid, frames = None, []
            continue
        lost = _LOST.search(line)
        if lost:
            found.lost += int(lost.group(1))
            continue
        fork = _FORK.search(line)
        if fork:
            child, parent = int(fork.group(1)), int(fork.group(2))
            if child != parent:  # a new thread has its process's pid: not a new process
                found.parents[child] = parent
            continue
        frame = _FRAME.match(line) if line[0].isspace() else None
        if frame is not None and pid is not None:
            frames.append(frame_name(frame["sym"], frame["dso"]))
            continue
        header = _HEADER.match(line)
        if header is not None:
            close()
            pid, frames = int(header["pid"]), []
            found.comms[pid] = header["comm"]
    close()
    return found
