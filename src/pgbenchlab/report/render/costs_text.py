"""What a run's server spent per committed transaction, for a person: `show`'s lines for a run,
and for each member server of a group's run (`records.costs`, as stored)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgbenchlab.records.costs import RunCosts, per_transaction

ABSENT = "—"


def cost_lines(
    stored: Mapping[str, Any] | None,
    transactions: int | None,
    indent: str,
    client_us: float | None = None,
) -> list[str]:
    """The title, the figures per transaction (pgbench's CPU too, when given), and why each
    absent one is absent."""
    if not stored:
        return []
    costs = RunCosts.from_stored(dict(stored))
    if costs.window_s is None:
        return [f"costs per transaction: none ({'; '.join(costs.notes.values())})"]

    def each(total: float | None, scale: float = 1.0, digits: int = 2) -> str:
        value = per_transaction(total, transactions, scale)
        return ABSENT if value is None else f"{value:,.{digits}f}"

    how = [f"server CPU by {costs.cpu_method}"] if costs.cpu_method else []
    how += [f"buffers from {costs.buffers_source}"] if costs.buffers_source else []
    title = f"costs per transaction ({'; '.join(how)}):" if how else "costs per transaction:"
    lines = [
        title,
        f"{indent}server CPU {each(costs.server_cpu_s, 1e6, 1)} µs (user "
        f"{each(costs.server_user_s, 1e6, 1)}, system {each(costs.server_system_s, 1e6, 1)}) · "
        f"WAL {each(costs.wal_bytes, digits=0)} B · context switches "
        f"{each(costs.context_switches)}"
        + ("" if client_us is None else f" · pgbench CPU {client_us:,.1f} µs"),
        f"{indent}shared buffers hit {each(costs.buffers_hit)}, read {each(costs.buffers_read)}, "
        f"dirtied {each(costs.buffers_dirtied)}, written {each(costs.buffers_written)} · "
        f"instructions {each(costs.instructions, digits=0)}, cycles {each(costs.cycles, digits=0)}",
    ]
    return lines + [f"{indent}{ABSENT} {name}: {why}" for name, why in _reasons(costs)]


def _reasons(costs: RunCosts) -> list[tuple[str, str]]:
    """Each reason once, with the figures it explains."""
    by_reason: dict[str, list[str]] = {}
    for name, why in costs.notes.items():
        by_reason.setdefault(why, []).append(name.replace("_", " "))
    return [(", ".join(names), why) for why, names in by_reason.items()]
