"""What `report --format text` says: the campaign's comparisons as the plan asks them to be
judged (its `decide` metrics, its `equivalence` margin, its `correction`), each candidate
server against the baseline cell by cell, and the run-to-run noise measured by the repeats.

The numbers are `compare`'s (`views.compare.match`), so a mailing-list post and the terminal
never disagree.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.floors import RUN_FLOOR, spread
from pgbenchlab.errors import UserError
from pgbenchlab.plan import Verdicts, stored_verdicts
from pgbenchlab.report.views.compare import CellChange, CompareRules, corrected, match
from pgbenchlab.report.views.floors import FloorRow, floor_rows
from pgbenchlab.report.views.metrics import DEFAULT_METRICS, label, run_values
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.store import NoiseFloor


@dataclass(frozen=True)
class MailView:
    view: ReportView
    rules: CompareRules
    candidates: tuple[tuple[str, tuple[CellChange, ...]], ...]  # (candidate, its changes)
    floors: tuple[NoiseFloor, ...]  # run to run from the repeats, then the stored ones
    cell_floors: tuple[FloorRow, ...] = ()  # the floors measured in each cell


def mail_view(view: ReportView, stored: Sequence[NoiseFloor] = ()) -> MailView:
    verdicts = stored_verdicts(view.campaign.plan_text)
    rules = verdict_rules(verdicts)
    baseline = view.baseline
    found: list[tuple[str, list[CellChange]]] = []
    for server in view.servers:
        if baseline is None or server.label == baseline:
            continue
        base = [c for c in view.cells if c.dim("server") == baseline]
        cand = [c for c in view.cells if c.dim("server") == server.label]
        try:
            changes = match(view, base, view, cand, ignore=("server",), rules=rules, adjust=False)
        except UserError:  # no cell of this server ran where the baseline did
            continue
        found.append((server.label, changes))
    family = corrected([c for _, changes in found for c in changes], rules)
    candidates, start = [], 0
    for name, changes in found:  # the whole campaign is one family
        candidates.append((name, tuple(family[start : start + len(changes)])))
        start += len(changes)
    whole = [f for f in stored if f.metric in rules.metrics and not f.cell]
    floors = (*_floors(view, rules.metrics), *whole)
    labels = {label(m) for m in rules.metrics}
    cells = tuple(r for r in floor_rows(view) if r.metric in labels)
    return MailView(view, rules, tuple(candidates), floors, cells)


@dataclass(frozen=True)
class Equivalences:
    """The equivalence verdicts `report --format text` gives, by (candidate's cell id,
    metric), judged against ±margin and adjusted together."""

    margin: float
    rules: CompareRules
    verdicts: dict[tuple[str, str], CellChange]


def equivalences(view: ReportView) -> Equivalences | None:
    """The campaign's equivalence verdicts; None when its plan names no `equivalence`."""
    if stored_verdicts(view.campaign.plan_text).equivalence is None:
        return None
    mail = mail_view(view)
    if mail.rules.equivalence is None:
        return None
    found = {(c.cell_id, c.metric): c for _, changes in mail.candidates for c in changes}
    return Equivalences(mail.rules.equivalence, mail.rules, found)


def verdict_rules(verdicts: Verdicts) -> CompareRules:
    """A plan's verdict rules as comparisons take them: its decide metrics (TPS, p99 and p50
    by default), equivalence margin and correction."""
    wanted = verdicts.decide if verdicts.decide != ("tps",) else DEFAULT_METRICS
    return CompareRules(
        metrics=tuple(dict.fromkeys(wanted)),
        equivalence=verdicts.equivalence,
        correction=verdicts.correction,
    )


def _floors(view: ReportView, metrics: tuple[str, ...]) -> list[NoiseFloor]:
    """The run-to-run floor of each metric: the median spread of repeats over the cells that
    have two or more."""
    runs = {r.id: r for r in view.runs}
    found = []
    for metric in metrics:
        spreads = [
            value
            for cell in view.cells
            if (value := spread(run_values(cell, runs, metric))) is not None
        ]
        if spreads:
            floor = statistics.median(spreads)
            how = f"median over {len(spreads)} cell(s) of the spread between repeats"
            found.append(NoiseFloor(metric, RUN_FLOOR, floor, evidence=how))
    return found


def floor_line(floor: NoiseFloor) -> str:
    server = f" on {floor.server}" if floor.server else ""
    how = f" ({floor.evidence})" if floor.evidence else ""
    return f"{label(floor.metric)}: {floor.kind}{server} {floor.spread:.1%}{how}"
