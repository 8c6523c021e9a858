"""The metrics cells are compared on, their run-level values, and how they print.

The unit of evidence is the run (its repeats), never the second: `compare`, the report's
change tables and the step scans all take a cell's values from `run_values`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.report.views.model import CellView, ReportView, RunView

# metric → (label, higher is better)
METRICS = {
    "tps": ("TPS", True),
    "p99": ("p99 latency", False),
    "p50": ("p50 latency", False),
    "cpu_per_tx": ("server CPU/tx", False),
    "wal_per_tx": ("WAL/tx", False),
    "instructions_per_tx": ("instructions/tx", False),
}
# The costs per transaction (`telemetry.costs`): the run's field, and how a value prints.
COSTS = {
    "cpu_per_tx": ("server_cpu_us_per_tx", "{:,.1f} µs"),
    "wal_per_tx": ("wal_bytes_per_tx", "{:,.0f} B"),
    "instructions_per_tx": ("instructions_per_tx", "{:,.0f}"),
}


def run_values(cell: CellView, runs: dict[int, RunView], metric: str) -> list[float]:
    """The metric of each successful run of a cell; a missing or non-positive value is left out
    (comparisons are of logarithms)."""
    found = [_value(runs[i], metric) for i in cell.run_ids if runs[i].ok]
    return [v for v in found if v is not None and v > 0]


def _value(run: RunView, metric: str) -> float | None:
    if metric in COSTS:
        value = getattr(run, COSTS[metric][0])
        return None if value is None else float(value)
    if metric == "tps":
        return run.tps
    return run.p99_ms if metric == "p99" else run.p50_ms


def format_value(metric: str, value: float) -> str:
    if metric in COSTS:
        return COSTS[metric][1].format(value)
    return f"{value:,.0f}" if metric == "tps" else f"{value:.3f} ms"


def one_server_each(views: Sequence[ReportView]) -> bool:
    """One server per campaign (a patch against master, say): matched whatever it is called."""
    return all(len({c.dim("server") for c in v.cells}) == 1 for v in views)
