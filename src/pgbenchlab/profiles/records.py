"""A run's CPU profile as stored: folded stacks whose root frame is the backend type of the
process the sample came from ("client backend;main;…;ExecScan 42"), or "pgbench" in the
profile of the run's pgbench process(es)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

SERVER = "server"  # the server's processes
PGBENCH = "pgbench"  # the load generator: pgbench's process and its threads
PROCESSES = (SERVER, PGBENCH)


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
    process: str = SERVER  # which processes: SERVER or PGBENCH
    # A counted profile: what its counts are ("instructions (callgrind)"), not perf's samples
    # at frequency_hz; and the transactions they stand for (profiles.counting).
    counter: str = ""
    transactions: int | None = None

    def stacks(self) -> Iterator[tuple[list[str], int]]:
        """(frames root first, with the backend type as the first, samples) per stack."""
        for line in self.folded.splitlines():
            stack, _, count = line.rpartition(" ")
            if stack:
                yield stack.split(";"), int(count)

    def cpu_seconds(self, samples: int) -> float:
        """The CPU time that number of samples stands for."""
        return samples / self.frequency_hz

    @property
    def counted(self) -> bool:
        return bool(self.counter)

    @property
    def unit(self) -> str:
        """What `per_transaction` gives."""
        return self.counter.split(" ")[0] if self.counted else "CPU µs"

    @property
    def extent(self) -> str:
        """What the profile holds, in words: samples at a frequency, or instructions counted."""
        if self.counted:
            return f"{self.samples:,} {self.counter} counted"
        return f"{self.samples:,} samples at {self.frequency_hz} Hz"

    def per_transaction(self, count: int, run_transactions: int) -> float:
        """A count per committed transaction in the profile's unit: CPU µs of samples, or
        instructions of a counted profile (over the transactions its counts stand for)."""
        if self.counted:
            return count / (self.transactions or run_transactions)
        return self.cpu_seconds(count) / run_transactions * 1e6


@dataclass(frozen=True)
class RunProfiles:
    """What one profiled run recorded: the server's profile and pgbench's (None: not asked,
    or nothing recorded)."""

    server: Profile | None = None
    pgbench: Profile | None = None


def merged(profiles: Sequence[Profile]) -> Profile:
    """One profile of several recordings at the same frequency (runs of a cell, or the pgbench
    processes of one run): stacks and counts summed; the share of whole stacks weighted by
    samples."""
    stacks = Counter[str]()
    for p in profiles:
        for frames, count in p.stacks():
            stacks[";".join(frames)] += count
    first = profiles[0]
    samples = sum(p.samples for p in profiles)
    shares = [(p.complete_share, p.samples) for p in profiles if p.complete_share is not None]
    weighted = sum(s * n for s, n in shares) / samples if shares and samples else None
    return replace(
        first,
        samples=samples,
        lost=sum(p.lost for p in profiles),
        folded="".join(f"{s} {n}\n" for s, n in sorted(stacks.items())),
        seconds=sum(p.seconds or 0 for p in profiles),
        complete_share=weighted if len(profiles) > 1 else first.complete_share,
        transactions=sum(p.transactions or 0 for p in profiles) if first.counted else None,
    )
