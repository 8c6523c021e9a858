"""A run's CPU profile as stored: folded stacks whose root frame is the backend type of the
process the sample came from ("client backend;main;…;ExecScan 42")."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    frequency_hz: int  # perf record -F on the software CPU clock
    samples: int
    lost: int  # samples perf itself reported lost (PERF_RECORD_LOST)
    target: str  # what was profiled, in words
    folded: str  # "backend type;root;…;leaf count" lines
    symbols: str = ""  # what the binary lacks (frame pointers, symbols) and what that limits
    complete_share: float | None = None  # samples whose stack reaches main(): unbroken stacks
    seconds: float | None = None  # how long perf recorded

    def stacks(self) -> Iterator[tuple[list[str], int]]:
        """(frames root first, with the backend type as the first, samples) per stack."""
        for line in self.folded.splitlines():
            stack, _, count = line.rpartition(" ")
            if stack:
                yield stack.split(";"), int(count)

    def cpu_seconds(self, samples: int) -> float:
        """The CPU time that number of samples stands for."""
        return samples / self.frequency_hz
