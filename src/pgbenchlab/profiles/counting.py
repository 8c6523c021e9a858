"""Instructions counted by callgrind (`count = "instructions"`): each server process's counts
as callgrind wrote them when it exited (`callgrind.PID`, from its fork on), its client backends
picked out, and a run's instructions per committed transaction with the connection setup
excluded.

Setup is excluded by difference: the same pgbench with one transaction per client is counted
just before the measured run, and instructions per transaction are (measured − reference) ÷
(committed − committed in the reference). Whatever happens once per connection cancels —
fork, authentication, catalog caches, the first transaction's plans, pgbench's own scale
query, the backends' exit — and what is left is what each further transaction costs. The
counted profile is that difference per function (self instructions), in the profile's shape:
stacks of one frame rooted at "client backend", counts in instructions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pgbenchlab.profiles.records import SERVER, Profile

TOOL = "callgrind"
COUNTER = "instructions"
CLIENT_BACKEND = "client backend"
BACKEND_MAIN = "PostgresMain"  # a client backend's main loop, in every version from 9.6 on
TARGET = "client backends under callgrind: instructions (self) per function"


@dataclass(frozen=True)
class ProcessCounts:
    """One process's counts: its instructions per function (self, not what it calls)."""

    pid: int
    functions: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.functions.values())

    @property
    def client_backend(self) -> bool:
        return BACKEND_MAIN in self.functions


def parse_callgrind(text: str) -> ProcessCounts:
    """A callgrind output file written with --compress-strings=no (every part summed). A
    cost line after `calls=` is the inclusive cost of that call, not the caller's own."""
    pid, function, inclusive = 0, "", False
    functions: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("fn="):
            function = line[3:]
        elif line.startswith("calls="):
            inclusive = True
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if not inclusive and function:
                functions[function] += int(line.split()[1])
            inclusive = False
        elif line.startswith("pid:"):
            pid = int(line[4:])
    return ProcessCounts(pid, dict(functions))


@dataclass(frozen=True)
class CountedRun:
    """A counted run: its instructions per committed transaction, and the profile behind it."""

    instructions_per_tx: float
    profile: Profile


def summed(processes: Iterable[ProcessCounts]) -> Counter[str]:
    """The client backends' instructions per function."""
    total: Counter[str] = Counter()
    for process in processes:
        if process.client_backend:
            total.update(process.functions)
    return total


def counted_run(
    measured: Iterable[ProcessCounts],
    committed: int,
    reference: Iterable[ProcessCounts],
    reference_committed: int,
) -> CountedRun | None:
    """The measured run's client backends against its one-transaction reference's (None when
    the measured run committed no more transactions than the reference)."""
    transactions = committed - reference_committed
    if transactions <= 0:
        return None
    more, less = summed(measured), summed(reference)
    difference = {name: more[name] - less[name] for name in more.keys() | less.keys()}
    per_tx = sum(difference.values()) / transactions
    folded = "".join(
        f"{CLIENT_BACKEND};{name} {count}\n"
        for name, count in sorted(difference.items())
        if count > 0
    )
    profile = Profile(
        frequency_hz=0,
        samples=sum(count for count in difference.values() if count > 0),
        lost=0,
        target=TARGET,
        folded=folded,
        process=SERVER,
        counter=f"{COUNTER} ({TOOL})",
        transactions=transactions,
    )
    return CountedRun(per_tx, profile)
