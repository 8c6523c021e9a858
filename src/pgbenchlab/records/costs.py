"""What one server spent over one measured run, as totals: its CPU (user and system, of the
postmaster's whole process tree), the WAL it wrote, its shared buffers' traffic, its context
switches and, where the machine has hardware counters, its instructions and cycles.

A figure that could not be had is None and `notes` says why (never zero). The evidence the
consistency check weighs (`seen_cpu_s`, `host_busy_s`) travels with it. The store keeps the
figures per committed transaction (`store.columns`) and this record as JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# How the server's CPU was accounted.
CGROUP = "cgroup"  # a cgroup v2 of its own for the run: every process, exited ones included
PROCESS_TREE = "process tree"  # /proc: the postmaster, its children, and its reaped children
# The note of a run whose costs are its member servers' (a group's run): the figures are theirs.
GROUP_NOTE = "a group's run: each member server's costs are in its part"
# Where the buffer figures came from.
STATEMENTS = "pg_stat_statements"
DATABASE = "pg_stat_database"


@dataclass(frozen=True)
class RunCosts:
    """Totals over the run window (from the first sample to the last, `window_s`)."""

    window_s: float | None = None  # None: nothing was read (`notes` says why)
    cpu_method: str | None = None  # CGROUP | PROCESS_TREE; None: not accounted
    server_user_s: float | None = None
    server_system_s: float | None = None
    seen_cpu_s: float | None = None  # what the server's processes were seen to use otherwise
    host_busy_s: float | None = None  # the server's host: all CPUs' non-idle time
    host_others_s: float | None = None  # of which pgbench's, when it ran there (not the server)
    wal_bytes: float | None = None
    buffers_source: str | None = None  # STATEMENTS | DATABASE
    buffers_hit: float | None = None
    buffers_read: float | None = None
    buffers_dirtied: float | None = None
    buffers_written: float | None = None
    context_switches: float | None = None  # voluntary + involuntary
    instructions: float | None = None
    cycles: float | None = None
    notes: dict[str, str] = field(default_factory=dict)  # figure → why it is absent

    @property
    def server_cpu_s(self) -> float | None:
        if self.server_user_s is None or self.server_system_s is None:
            return None
        return self.server_user_s + self.server_system_s

    def stored(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_stored(value: dict[str, Any]) -> RunCosts:
        known = set(RunCosts.__dataclass_fields__)
        return RunCosts(**{k: v for k, v in value.items() if k in known})


def per_transaction(
    total: float | None, transactions: int | None, scale: float = 1.0
) -> float | None:
    """A run total per committed transaction (times scale: 1e6 for µs from seconds)."""
    if total is None or not transactions:
        return None
    return total * scale / transactions
