"""The noise floors measured for a campaign's cells, as every output states them: per cell, each
floor measured (`floor_rows`), and per change, which floors its verdict beat or which one holds
it (`analysis.floors.judge`; a change held by the build-to-build floor is no change of the
patch, `judged_change`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.analysis.floors import BUILD_FLOOR, KINDS, held_reason, judge
from pgbenchlab.report.views.labels import cell_title
from pgbenchlab.report.views.metrics import label
from pgbenchlab.report.views.model import ChangeView, ReportView
from pgbenchlab.store import NoiseFloor

CHANGED = (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED)
HELD_VERDICT = "within the build-to-build floor"


def floors_of(
    floors: Sequence[NoiseFloor], metric: str, cell_ids: Collection[str]
) -> dict[str, float]:
    """kind → the largest floor of that kind measured for ``metric`` in these cells."""
    found: dict[str, float] = {}
    for floor in floors:
        if floor.metric == metric and floor.cell and floor.cell in cell_ids:
            found[floor.kind] = max(found.get(floor.kind, 0.0), floor.spread)
    return {k: found[k] for k in KINDS if k in found}


def floors_text(floors: Mapping[str, float], beaten: Sequence[str], held: bool) -> str:
    """One clause per floor measured: "beat run to run 4.1 %; within build to build 2.0 %"."""
    parts = []
    for kind, floor in floors.items():
        if kind in beaten:
            parts.append(f"beat {kind} {floor:.1%}")
        elif kind == BUILD_FLOOR and held:
            parts.append(f"within {kind} {floor:.1%}")
        else:
            parts.append(f"{kind} {floor:.1%}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Floored:
    """A change's verdict and reason once its cells' floors are weighed, and the floors said."""

    verdict: ComparisonVerdict
    reason: str
    floors: str
    held: bool


def against_floors(
    floors: Mapping[str, float],
    verdict: ComparisonVerdict,
    reason: str,
    change: float,
    interval: tuple[float | None, float | None],
) -> Floored:
    """The floors (kind → floor) a verdict beat; a change the build-to-build floor holds is
    within noise (`analysis.floors.judge`)."""
    judged = judge(verdict in CHANGED, change, *interval, floors)
    text = floors_text(floors, judged.beaten, judged.held)
    if not judged.held:
        return Floored(verdict, reason, text, held=False)
    reason = f"{reason}; {held_reason(floors[BUILD_FLOOR])}"
    return Floored(ComparisonVerdict.WITHIN_NOISE, reason, text, held=True)


def judged_change(change: ChangeView, floors: Sequence[NoiseFloor]) -> ChangeView:
    """The report's change against its cells' floors."""
    found = floors_of(floors, change.metric, (change.cell_id, change.baseline_cell_id))
    if not found:
        return change
    interval = (change.ci_low, change.ci_high)
    f = against_floors(found, change.verdict, change.reason, change.relative_change, interval)
    return replace(change, verdict=f.verdict, reason=f.reason, floors=f.floors, held=f.held)


@dataclass(frozen=True)
class FloorRow:
    cell: str  # the cell's title
    metric: str  # its label
    kind: str
    spread: float
    evidence: str


def floor_rows(view: ReportView) -> list[FloorRow]:
    """Every floor measured in a cell of the campaign, cell by cell."""
    titles = {c.cell_id: cell_title(c, view.axes) for c in view.cells}
    rows = [
        FloorRow(titles[f.cell], label(f.metric), f.kind, f.spread, f.evidence)
        for f in view.floors
        if f.cell in titles
    ]
    order = {c.cell_id: i for i, c in enumerate(view.cells)}
    cells = {titles[k]: order[k] for k in titles}
    return sorted(rows, key=lambda r: (cells[r.cell], r.metric, KINDS.index(r.kind)))
