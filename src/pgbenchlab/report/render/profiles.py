"""The report's "Profiles" section: per profiled cell a flame graph (drawn by the page's own
renderer, assets/flame.js, from trees pruned to the report's budget) and its top functions by
backend type, then a second graph of pgbench when it was profiled too; between a baseline
server's cell and a candidate's, what changed in CPU time per committed transaction. The
section is rendered by templates/profiles.html; this module says what it shows."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Any

from pgbenchlab.profiles import PGBENCH, FunctionTime, ProfileDiff
from pgbenchlab.report.views.model import CellProfile, ProfileChange, ReportView
from pgbenchlab.report.views.profiles import flame_tree, nodes_per_graph


def flame_payload(view: ReportView) -> list[dict[str, Any]]:
    """One flame graph tree per profiled cell, in the section's order."""
    budget = nodes_per_graph(len(view.profiles))
    return [flame_tree(p.profile, budget) for p in view.profiles]


@dataclass(frozen=True)
class ProfiledCell:
    title: str
    process: str  # whose processes: the server's or pgbench's
    facts: str
    notes: tuple[str, ...]
    top: tuple[tuple[str, tuple[FunctionTime, ...]], ...]  # per backend type, its top functions


@dataclass(frozen=True)
class ProfileCellChange:
    title: str
    whose: str
    rows: tuple[ProfileDiff, ...]
    peak: float  # the largest change of self time, the bars' full length
    before: float  # CPU µs per transaction, baseline then candidate
    after: float
    unit: str = "µs"  # a counted profile's: instructions


@dataclass(frozen=True)
class ProfilesSection:
    cells: tuple[ProfiledCell, ...]
    changes: tuple[ProfileCellChange, ...]


def profiles_section(view: ReportView) -> ProfilesSection | None:
    """What templates/profiles.html shows; None without profiles."""
    if not view.profiles:
        return None
    return ProfilesSection(
        tuple(_cell(p) for p in view.profiles), tuple(_change(c) for c in view.profile_changes)
    )


def _cell(cell: CellProfile) -> ProfiledCell:
    p = cell.profile
    facts = [
        f"runs {', '.join(str(i) for i in cell.run_ids)}",
        p.extent,
        *([] if p.counted else [f"{p.lost:,} lost" if p.lost else "none lost"]),
    ]
    if cell.cpu_us_per_tx is not None and p.counted:
        facts.append(f"{cell.cpu_us_per_tx:,.0f} {p.unit} per transaction (client backends)")
    elif cell.cpu_us_per_tx is not None:
        facts.append(f"{cell.cpu_us_per_tx:,.1f} µs of {_whose(cell)} CPU per transaction")
    if p.complete_share is not None:
        facts.append(f"{p.complete_share:.0%} of stacks reach main()")
    notes = []
    if cell.out_of_statistics:
        notes.append(
            "An extra repeat profiled (profile = auto), kept out of the cell's statistics: "
            "profiling costs throughput."
        )
    if p.symbols:
        notes.append(f"Limits: {p.symbols}")
    top = tuple(
        (backend_type, tuple(functions))
        for backend_type, functions in groupby(cell.top, key=lambda t: t.backend_type)
    )
    return ProfiledCell(_title(cell), p.process, "; ".join(facts), tuple(notes), top)


def _change(change: ProfileChange) -> ProfileCellChange:
    peak = max((abs(r.self_change_us) for r in change.rows), default=0.0) or 1.0
    unit = "µs" if not change.candidate.profile.counted else change.candidate.profile.unit
    title = f"{_title(change.candidate)} against {change.baseline.label} ({unit} per transaction)"
    return ProfileCellChange(
        title,
        _whose(change.candidate),
        change.rows,
        peak,
        change.baseline.cpu_us_per_tx or 0,
        change.candidate.cpu_us_per_tx or 0,
        unit,
    )


def _title(cell: CellProfile) -> str:
    return f"{cell.label}: pgbench" if cell.profile.process == PGBENCH else cell.label


def _whose(cell: CellProfile) -> str:
    return "pgbench" if cell.profile.process == PGBENCH else "server"
