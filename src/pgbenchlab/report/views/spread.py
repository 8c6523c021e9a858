"""How much a cell's TPS moves from repeat to repeat, by how its runs' datasets started
(`[dataset] reset`): a write workload on a reused dataset drifts with the bloat its repeats
leave, one restored from its snapshot (or made again) before each repeat does not. Shown when
some run of the campaign did not simply reuse its dataset, so that the modes' spreads stand
side by side (cells that differ only in their server or reset are adjacent rows)."""

from __future__ import annotations

from pgbenchlab.report.views.labels import cell_title
from pgbenchlab.report.views.model import CellView, ReportView
from pgbenchlab.report.views.text import Table

REUSE = "reuse"
SPREAD_NOTE = (
    "The spread of each cell's TPS over its successful repeats: the coefficient of variation "
    "(standard deviation ÷ mean) and the {confidence:.0%} confidence interval of the mean. "
    "reuse: each run finds the dataset as the runs before left it; snapshot: its data directory "
    "restored from the image taken once it was built, verified identical; init: pgbench -i "
    "again before each run."
)


def reset_mode(reset: str | None) -> str:
    """A run's reset as a mode: "reuse" (also for runs stored before it was recorded),
    "snapshot" (whatever the copy) or "init"."""
    return (reset or REUSE).split(" (", 1)[0]


def spread_table(view: ReportView) -> Table | None:
    """One row per cell: the reset of its successful runs (those its figures are of), their
    count, TPS, CV and interval; None when every run reused its dataset."""
    by_id = {r.id: r for r in view.runs}
    modes = {
        c.cell_id: ", ".join(sorted({reset_mode(by_id[i].reset) for i in c.run_ids if by_id[i].ok}))
        or "-"
        for c in view.cells
    }
    if set(modes.values()) <= {REUSE, "-"}:
        return None
    order = sorted(view.cells, key=lambda c: (_point(c), modes[c.cell_id], c.dim("server")))
    header = ("cell", "dataset reset", "runs", "TPS", "CV", f"{view.confidence:.0%} interval")
    rows = tuple(_row(c, view, modes[c.cell_id]) for c in order)
    note = SPREAD_NOTE.format(confidence=view.confidence)
    return Table("Repeat-to-repeat spread by dataset reset", header, rows, note, anchor="spread")


def _point(cell: CellView) -> tuple[str, ...]:
    """The cell without its server, clients last in number order."""
    others = tuple(v for k, v in cell.dims if k not in ("server", "clients"))
    return (*others, f"{cell.clients:09d}")


def _row(cell: CellView, view: ReportView, mode: str) -> tuple[str, ...]:
    tps = cell.tps
    title = cell_title(cell, view.axes)
    if tps is None:
        return (title, mode, "0", "-", "-", "-")
    cv = "-" if tps.cv is None else f"{tps.cv:.1%}"
    interval = "-"
    if tps.low is not None and tps.high is not None:
        interval = f"{tps.low:,.0f} … {tps.high:,.0f}"
    return (title, mode, str(tps.n), f"{tps.mean:,.0f}", cv, interval)
