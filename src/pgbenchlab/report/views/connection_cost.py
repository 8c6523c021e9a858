"""The connection-cost view: for every cell but its connection kind and -C, what a new
connection per transaction costs over each kind, and TLS on top of a new TCP connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgbenchlab.analysis.connection_cost import (
    ConnectionCost,
    connection_costs,
    ms_per_transaction,
)
from pgbenchlab.report.views.labels import cell_title
from pgbenchlab.report.views.model import ReportView

APART = ("connect", "connection")  # the axes a cost is measured across


@dataclass(frozen=True)
class CostGroup:
    """The costs measured in one cell of the other axes (server, workload, clients, …)."""

    title: str
    server: str
    costs: tuple[ConnectionCost, ...]


def cost_groups(view: ReportView) -> list[CostGroup]:
    """Groups with a cost to show: campaigns with -C and without, or tcp and tls under -C.
    Rate-limited runs are left out (their time per transaction is the schedule's)."""
    runs = {r.id: r for r in view.runs}
    axes = [a for a in view.axes if a.key not in APART]
    times: dict[tuple[str, str], dict[tuple[str, bool], list[float]]] = {}
    for cell in view.cells:
        key = (cell_title(cell, axes), cell.dim("server"))
        for run_id in cell.run_ids:
            run = runs[run_id]
            ms = ms_per_transaction(run.clients, run.tps) if run.ok and not run.rate else None
            if ms is not None:
                side = (run.connection, run.connect)
                times.setdefault(key, {}).setdefault(side, []).append(ms)
    groups = []
    for (title, server), found in times.items():
        costs = connection_costs(found, view.confidence)
        if costs:
            groups.append(CostGroup(title, server, tuple(costs)))
    return groups


def cost_json(group: CostGroup, cost: ConnectionCost, confidence: float) -> dict[str, Any]:
    """One cost for programs: what it is of, over which kind, in which cell, with its interval
    (None with fewer than 2 runs a side) and the runs behind it."""
    return {
        "server": group.server,
        "cell": group.title,
        "cost_of": cost.cost_of,
        "over": cost.over,
        "what": cost.what,
        "estimate_ms": cost.estimate_ms,
        "ci_low_ms": cost.ci_low_ms,
        "ci_high_ms": cost.ci_high_ms,
        "confidence": confidence,
        "runs_without": cost.runs[0],
        "runs_with": cost.runs[1],
    }
