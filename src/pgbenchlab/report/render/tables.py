"""The key tables, as text: TPS and p99 by clients per server, and the change against the
baseline. Markdown, the HTML report and the terminal summary all print these same cells.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD
from pgbenchlab.analysis.connection_cost import ConnectionCost
from pgbenchlab.analysis.equivalence import margin_text
from pgbenchlab.analysis.multiplicity import Correction
from pgbenchlab.analysis.stats import DEFAULT_CV_LIMIT
from pgbenchlab.report.render.charts import VERDICT_MARKS
from pgbenchlab.report.views.answer import CHANGE_TABLES
from pgbenchlab.report.views.connection_cost import CostGroup, cost_groups
from pgbenchlab.report.views.floors import HELD_VERDICT, floor_rows
from pgbenchlab.report.views.labels import cell_title, panel_label
from pgbenchlab.report.views.mail import Equivalences, equivalences
from pgbenchlab.report.views.metrics import label
from pgbenchlab.report.views.model import CellView, ChangeView, ReportView
from pgbenchlab.report.views.text import Table, fmt_ms, fmt_tps


def fmt_change(change: ChangeView | None) -> str:
    if change is None:
        return "-"
    text = f"{change.relative_change:+.1%} {VERDICT_MARKS[change.verdict]}"
    if change.ci_low is not None and change.ci_high is not None:
        text += f" ({change.ci_low:+.1%} … {change.ci_high:+.1%})"
    return text


def _series_key(view: ReportView) -> str | None:
    return view.series_axis


def _panels(view: ReportView, series: str | None) -> dict[str, list[CellView]]:
    panels: dict[str, list[CellView]] = {}
    for cell in view.cells:
        panels.setdefault(panel_label(cell, view.axes, series), []).append(cell)
    return panels


def key_tables(view: ReportView) -> list[Table]:
    """One table per panel: clients down, TPS then p99 for each series across."""
    series = _series_key(view)
    tables = []
    for panel, cells in _panels(view, series).items():
        names = list(dict.fromkeys(c.dim(series) if series else "all" for c in cells))
        grid = {(c.dim(series) if series else "all", c.clients): c for c in cells}
        header = ("clients", *(f"{n} TPS" for n in names), *(f"{n} p99 ms" for n in names))
        rows = []
        for clients in sorted({c.clients for c in cells}):
            found = [grid.get((n, clients)) for n in names]
            rows.append(
                (
                    str(clients),
                    *(fmt_tps(c.tps) if c else "-" for c in found),
                    *(fmt_ms(c.p99_ms) if c else "-" for c in found),
                )
            )
        tables.append(Table(panel, header, tuple(rows), _repeats_note(view, cells)))
    return tables


def _repeats_note(view: ReportView, cells: Sequence[CellView]) -> str:
    counts = sorted({c.n_ok for c in cells})
    repeats = "/".join(str(n) for n in counts)
    return (
        f"TPS: mean of {repeats} run(s) ± half the {view.confidence:.0%} confidence interval; "
        f"⚠: runs vary by more than {DEFAULT_CV_LIMIT:.0%}; p99: mean of the runs' 99th "
        "percentiles (ms)."
    )


def change_tables(view: ReportView) -> list[Table]:
    """Relative change against the baseline: one table per metric, one column per candidate,
    each followed by its equivalence verdict when the plan names a margin."""
    if view.baseline is None or not view.changes:
        return []
    cells = {c.cell_id: c for c in view.cells}
    candidates = list(dict.fromkeys(ch.candidate for ch in view.changes))
    judged = equivalences(view)
    header = [h for c in candidates for h in (c, *_within(c, judged))]
    tables = []
    for metric, (name, anchor) in CHANGE_TABLES.items():
        by_key: dict[tuple[str, int], dict[str, ChangeView]] = {}
        for ch in view.changes:
            if ch.metric == metric:
                cell = cells[ch.cell_id]
                key = (panel_label(cell, view.axes, "server"), cell.clients)
                by_key.setdefault(key, {})[ch.candidate] = ch
        order = {panel: i for i, (panel, _) in enumerate(by_key)}
        rows = tuple(
            (panel, str(clients), *_row(found, candidates, judged))
            for (panel, clients), found in sorted(
                by_key.items(), key=lambda item: (order[item[0][0]], item[0][1])
            )
        )
        if rows:
            tables.append(
                Table(
                    f"{name}: change against {view.baseline}",
                    ("panel", "clients", *header),
                    rows,
                    _change_note(view) + _equivalence_note(judged),
                    anchor=anchor,
                )
            )
    return tables


def _within(candidate: str, judged: Equivalences | None) -> tuple[str, ...]:
    return () if judged is None else (f"{candidate} within ±{margin_text(judged.margin)}",)


def _row(
    found: dict[str, ChangeView], candidates: list[str], judged: Equivalences | None
) -> list[str]:
    """Each candidate's change, and its equivalence verdict as `compare --equivalence` prints
    it in its table ("-": none for that cell)."""
    row = []
    for candidate in candidates:
        change = found.get(candidate)
        row.append(fmt_change(change))
        if judged is not None:
            verdict = judged.verdicts.get((change.cell_id, change.metric)) if change else None
            row.append(verdict.equivalence_reason.split(" (")[0] if verdict else "-")
    return row


def _change_note(view: ReportView) -> str:
    return (
        "Ratio of geometric means minus one, with its "
        f"{view.confidence:.0%} confidence interval; ↑ improved, ↓ regressed, ≈ within noise "
        f"(±{DEFAULT_THRESHOLD:.0%}), ? not enough data to tell. Verdicts adjusted across the "
        f"{len(view.changes)} comparisons: {Correction(view.correction).described}."
    )


def _equivalence_note(judged: Equivalences | None) -> str:
    if judged is None:
        return ""
    level = 1 - 2 * (1 - judged.rules.confidence)
    return (
        f" Within ±{margin_text(judged.margin)}: equivalence by two one-sided tests (the "
        f"{level:.0%} interval inside the margin), as the text report (report --format text) "
        f"gives it, adjusted across its {len(judged.verdicts)} comparisons: "
        f"{judged.rules.correction.described}."
    )


def connection_cost_tables(
    view: ReportView, groups: Sequence[CostGroup] | None = None
) -> list[Table]:
    """What a new connection, and TLS on top, cost per transaction (`cost_groups`)."""
    groups = cost_groups(view) if groups is None else groups
    rows = tuple(
        (group.title, cost.what, f"{cost.estimate_ms:+.3f}", _interval(cost), _runs(cost))
        for group in groups
        for cost in group.costs
    )
    if not rows:
        return []
    header = ("cell", "cost of", "ms per transaction", f"{view.confidence:.0%} interval", "runs")
    return [Table("Connection cost per transaction", header, rows, COST_NOTE)]


COST_NOTE = (
    "A client's time per transaction is 1000 × clients ÷ TPS (pgbench's TPS includes "
    "connecting under -C; its latency average does not), averaged over the repeats; a cost is "
    "the difference of those means with and without, with Welch's interval (2 runs a side "
    "at least). Rate-limited runs are left out."
)


def _interval(cost: ConnectionCost) -> str:
    if cost.ci_low_ms is None or cost.ci_high_ms is None:
        return "-"
    return f"{cost.ci_low_ms:+.3f} … {cost.ci_high_ms:+.3f}"


def _runs(cost: ConnectionCost) -> str:
    return f"{cost.runs[0]} / {cost.runs[1]}"


FLOOR_NOTE = (
    "How much each metric moved between identical members of the cell: run to run and restart "
    "to restart, the spread of its runs across rounds, exp(sd of ln) − 1; build to build, the "
    "offset between two builds of the same source laid out differently. A verdict beat a "
    "floor when its interval lies beyond it; a change within the build-to-build floor is said "
    "within noise."
)


def floor_tables(view: ReportView) -> list[Table]:
    """The noise floors measured per cell, and which of them each change's verdict beat."""
    rows = tuple(
        (r.cell, r.metric, r.kind, f"{r.spread:.1%}", r.evidence) for r in floor_rows(view)
    )
    if not rows:
        return []
    header = ("cell", "metric", "floor", "measured", "how")
    tables = [Table("Noise floors", header, rows, FLOOR_NOTE, anchor="floors")]
    cells = {c.cell_id: c for c in view.cells}
    judged = tuple(
        (
            cell_title(cells[ch.cell_id], view.axes), label(ch.metric),
            f"{ch.relative_change:+.1%}",
            HELD_VERDICT if ch.held else ch.verdict.replace("_", " "), ch.floors,
        )
        for ch in view.changes
        if ch.floors
    )  # fmt: skip
    if judged:
        header = ("cell", "metric", "change", "verdict", "noise floors")
        title = f"Verdicts against the noise floors (against {view.baseline})"
        tables.append(Table(title, header, judged))
    return tables
