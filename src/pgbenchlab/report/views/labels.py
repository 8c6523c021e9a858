"""How cells and panels are named in charts, tables and warnings."""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.report.views.model import Axis, CellView


def panel_label(cell: CellView, axes: Sequence[Axis], series: str | None) -> str:
    """The panel a cell belongs to when lines are drawn per ``series``: the other axes."""
    parts = []
    for a in axes:
        if a.key in (series, "clients"):
            continue
        value = cell.dim(a.key)
        parts.append(f"scale {value}" if a.key == "scale" else value)
    return " · ".join(parts) or "all runs"


def cell_title(cell: CellView, axes: Sequence[Axis]) -> str:
    """A cell named by the axes that vary, and its clients: "pg15 · scale 10 · 8 clients"."""
    parts = [panel_label(cell, axes, None)] if axes else []
    parts.append(f"{cell.clients} client" + ("" if cell.clients == 1 else "s"))
    return " · ".join(parts)
