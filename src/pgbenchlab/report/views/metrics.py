"""The metrics cells are compared on, their run-level values, and how they print.

The unit of evidence is the run (its repeats), never the second: `compare`, the report's
change tables and the step scans all take a cell's values from `run_values`. The metrics and
their directions are the store's registry (`store.metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.report.views.model import CellView, ReportView, RunView
from pgbenchlab.store.metrics import DEFAULT_METRICS, METRICS, Metric

__all__ = ["DEFAULT_METRICS", "METRICS", "Metric", "format_value", "label", "run_values"]


def run_values(cell: CellView, runs: dict[int, RunView], metric: str) -> list[float]:
    """The metric of each successful run of a cell; a missing or non-positive value is left out
    (comparisons are of logarithms)."""
    found = [dict(runs[i].figures).get(metric) for i in cell.run_ids if runs[i].ok]
    return [v for v in found if v is not None and v > 0]


def label(metric: str) -> str:
    return METRICS[metric].label


def format_value(metric: str, value: float) -> str:
    return METRICS[metric].format(value)


def one_server_each(views: Sequence[ReportView]) -> bool:
    """One server per campaign (a patch against master, say): matched whatever it is called."""
    return all(len({c.dim("server") for c in v.cells}) == 1 for v in views)
