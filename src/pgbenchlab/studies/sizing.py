"""Sizes computed from the machine: shared_buffers, the three dataset scales, client ladders,
run lengths and the estimate of initialising the datasets. Pure functions of the facts."""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.studies.facts import MachineFacts

MIB = 1024**2
GIB = 1024**3
# pgbench -i: 100,000 pgbench_accounts rows per scale unit, heap and primary key; the other
# tables are negligible. Measured with PostgreSQL 18: scale 10 holds 149.7 MiB in its tables.
BYTES_PER_SCALE = 15 * MIB
# pgbench -i (load, vacuum, keys): 175 MiB/s measured at scale 10 here (2 CPUs); datasets
# beyond the page cache go at the disk's pace, hence a rough, lower figure.
INIT_BYTES_PER_S = 100 * MIB
SHARED_BUFFERS_SHARE = 0.25  # the usual starting point: a quarter of RAM
SHARED_BUFFERS_MIN, SHARED_BUFFERS_MAX = 128 * MIB, 16 * GIB
QUICK_SHARED_BUFFERS = 128 * MIB
# Timed checkpoints every minute and runs three times as long: every run sees checkpoints
# (and their effect on latency) rather than one run in five hitting one by chance.
CHECKPOINT_TIMEOUT_S = 60
RUN_S = 3 * CHECKPOINT_TIMEOUT_S
QUICK_RUN_S = 2


@dataclass(frozen=True)
class Scale:
    """A dataset scale, where it is meant to fit and how large it is."""

    value: int
    fits: str  # "in shared_buffers", "in RAM", "beyond RAM"

    @property
    def bytes(self) -> int:
        return self.value * BYTES_PER_SCALE


def shared_buffers(facts: MachineFacts, quick: bool) -> int:
    """What the plan sets: a quarter of RAM, within 128 MiB … 16 GiB, in whole MiB."""
    if quick:
        return QUICK_SHARED_BUFFERS
    share = int(facts.memory_bytes * SHARED_BUFFERS_SHARE)
    return max(SHARED_BUFFERS_MIN, min(SHARED_BUFFERS_MAX, share)) // MIB * MIB


def scales(facts: MachineFacts, quick: bool) -> tuple[Scale, Scale, Scale]:
    """In shared_buffers (60 % of it: room for indexes' churn and the catalog), in RAM (half
    of it: the page cache holds it beside the server), beyond RAM (twice RAM: reads reach
    the disk)."""
    if quick:
        return Scale(1, "in shared_buffers"), Scale(1, "in RAM"), Scale(1, "beyond RAM")
    small = max(1, int(0.6 * shared_buffers(facts, quick)) // BYTES_PER_SCALE)
    medium = max(small + 1, facts.memory_bytes // 2 // BYTES_PER_SCALE)
    large = max(medium + 1, 2 * facts.memory_bytes // BYTES_PER_SCALE)
    return Scale(small, "in shared_buffers"), Scale(medium, "in RAM"), Scale(large, "beyond RAM")


def disk_needed(scale: Scale) -> int:
    """The dataset plus room for WAL, vacuum and index builds while it is made and used."""
    return int(scale.bytes * 1.5)


def fits_disk(scale: Scale, facts: MachineFacts) -> bool:
    return disk_needed(scale) <= facts.disk_free_bytes


def ladder(facts: MachineFacts, quick: bool, top: int | None = None) -> list[int]:
    """1, 2, 4 … up to `top` (default 4 × CPUs), `top` itself included; quick: one client
    count (CPUs) unless a top is asked for."""
    if quick and top is None:
        return [max(2, facts.cpus)]
    top = top or 4 * facts.cpus
    found, clients = [], 1
    while clients < top:
        found.append(clients)
        clients *= 2
    return [*found, top]


def tens_ladder(facts: MachineFacts, quick: bool) -> list[int]:
    """1, 10, 20 … up to 4 × CPUs (which is always included)."""
    if quick:
        return ladder(facts, quick)
    top = 4 * facts.cpus
    return sorted({1, *range(10, top + 1, 10), top})


def init_seconds(total_bytes: int) -> float:
    return total_bytes / INIT_BYTES_PER_S


def size_text(size: int) -> str:
    if size >= GIB:
        return f"{size / GIB:.1f} GiB"
    return f"{size / MIB:.0f} MiB"


def setting_size(size: int) -> str:
    """A size as a PostgreSQL setting: "2GB" when whole gigabytes, else "768MB"."""
    if size % GIB == 0:
        return f"{size // GIB}GB"
    return f"{size // MIB}MB"
