"""The report's answer: what a reader wants first, computed once from the view model.

Findings are sentences, each with the anchor of its evidence in the HTML report (a table, the
warnings' list, a section) and that evidence's name: the page links to it, the Markdown
summary names it. The comparisons and their verdicts, what each capacity search found, where
scaling stops (the departure from linear and the fitted peak), the change points, what limited
the runs, and the warnings that change a conclusion; counted runs' instructions per transaction
against the baseline's. A pure function of the view.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.report.views.model import CellView, ChangeView, ReportView, ScalabilityView
from pgbenchlab.report.views.scalability import ANCHOR as SCALABILITY
from pgbenchlab.report.views.scalability import RATE_LIMITED
from pgbenchlab.report.views.steps import summary

# The change tables, per metric: (the metric's name in their titles, their anchor).
CHANGE_TABLES = {"tps": ("TPS", "change-tps"), "p99": ("p99 latency", "change-p99")}
LIMITS = "limits"
CAPACITY = "capacity"
CHANGE_POINTS = "change-points"
PROFILES = "profiles"
WARNINGS = "warnings"
# Warnings that change what the figures say, beyond errors (results missing or partial): the
# repeats disagree, pgbench or a checkpoint set the figure rather than the server, the runs are
# too short to hold steady state.
DECISIVE = frozenset(
    {"high-variation", "load-generator", "checkpoint", "scale-below-clients", "short-run"}
)
MAX_SERIES = 6  # series whose scaling is stated one by one; the table has the rest
MAX_LIMITS = 3  # limits named, the most frequent first
VERDICT_ORDER = (
    ComparisonVerdict.REGRESSED,
    ComparisonVerdict.IMPROVED,
    ComparisonVerdict.WITHIN_NOISE,
    ComparisonVerdict.NOT_ENOUGH_DATA,
)


@dataclass(frozen=True)
class ReportFinding:
    kind: str  # comparison | capacity | scaling | steps | limits | warning
    text: str
    anchor: str  # the id of its evidence in the HTML report
    evidence: str  # that evidence, in words


def warning_anchor(index: int) -> str:
    """The id of the index-th warning (of `ReportView.advice`) in the report's list."""
    return f"warning-{index + 1}"


def findings(view: ReportView) -> tuple[ReportFinding, ...]:
    return (
        *_comparisons(view),
        *_counted(view),
        *_capacity(view),
        *_scaling(view),
        *_steps(view),
        *_limits(view),
        *_warnings(view),
    )


def _comparisons(view: ReportView) -> list[ReportFinding]:
    """Per candidate and metric: how many cells went which way, and by how much; the
    candidates with no cell decided said together, once per metric."""
    groups: dict[tuple[str, str], list[ChangeView]] = {}
    for change in view.changes:
        groups.setdefault((change.metric, change.candidate), []).append(change)
    found = []
    undecided: dict[str, list[str]] = {}
    for (metric, candidate), changes in sorted(groups.items(), key=_by_metric):
        name, anchor = CHANGE_TABLES[metric]
        title = f"{name}: change against {changes[0].baseline}"
        if all(c.verdict == ComparisonVerdict.NOT_ENOUGH_DATA for c in changes):
            undecided.setdefault(metric, []).append(candidate)
            continue
        parts = [_verdict_part(v, changes) for v in VERDICT_ORDER]
        said = "; ".join(p for p in parts if p)
        text = f"{candidate} against {changes[0].baseline}, {name}: {said}"
        found.append(ReportFinding("comparison", text, anchor, title))
    for metric, candidates in undecided.items():
        name, anchor = CHANGE_TABLES[metric]
        baseline = next(c.baseline for c in view.changes if c.metric == metric)
        text = (
            f"{', '.join(candidates)} against {baseline}, {name}: not enough data in any cell "
            "(more repeats decide)"
        )
        found.append(
            ReportFinding("comparison", text, anchor, f"{name}: change against {baseline}")
        )
    return found


def _counted(view: ReportView) -> list[ReportFinding]:
    """Per candidate cell counted against the baseline's: instructions per transaction (the
    runs' mean) and the function that added the most (`count = "instructions"`)."""
    per_tx = {r.id: r.instructions_per_tx for r in view.runs if r.instructions_per_tx}
    found = []
    for change in (c for c in view.profile_changes if c.candidate.profile.counted):
        base, cand = (
            [per_tx[i] for i in cell.run_ids if i in per_tx]
            for cell in (change.baseline, change.candidate)
        )
        if not base or not cand or not change.rows:
            continue
        before, after = sum(base) / len(base), sum(cand) / len(cand)
        top = change.rows[0]
        text = (
            f"{change.candidate.label} against {change.baseline.label}, instructions per "
            f"transaction (counted by callgrind): {before:,.0f} → {after:,.0f} "
            f"({after / before - 1:+.1%}); most changed: {top.function} "
            f"({top.self_change_us:+,.0f} per transaction)"
        )
        found.append(ReportFinding("comparison", text, PROFILES, "Profiles"))
    return found


def _by_metric(item: tuple[tuple[str, str], list[ChangeView]]) -> int:
    return list(CHANGE_TABLES).index(item[0][0])


def _verdict_part(verdict: ComparisonVerdict, changes: Sequence[ChangeView]) -> str:
    hit = [c.relative_change for c in changes if c.verdict == verdict]
    if not hit:
        return ""
    text = f"{verdict.value.replace('_', ' ')} in {len(hit)} of {len(changes)} cell(s)"
    if verdict in (ComparisonVerdict.REGRESSED, ComparisonVerdict.IMPROVED):
        low, high = min(hit), max(hit)
        text += f" ({low:+.1%})" if low == high else f" ({low:+.1%} … {high:+.1%})"
    return text


def _capacity(view: ReportView) -> list[ReportFinding]:
    found = []
    for search in view.capacity:
        answer = search.answer
        said = (
            "not decided yet"
            if answer is None
            else "no rate met it"
            if answer.rate is None
            else f"{answer.rate:g} tx/s"
        )
        text = f"Capacity of {search.server} ({search.cell}) within {search.slo.text}: {said}"
        found.append(ReportFinding("capacity", text, CAPACITY, "Capacity"))
    return found


def _scaling(view: ReportView) -> list[ReportFinding]:
    """Where each series of TPS against clients stops scaling, with its best measured TPS."""
    series = [s for s in view.scalability if s.fit.refused != RATE_LIMITED]
    found = []
    for s in series[:MAX_SERIES]:
        cells = [c for c in view.cells if _series_dims(c) == s.dims and c.tps is not None]
        if not cells:
            continue
        best = max(cells, key=lambda c: c.tps.mean if c.tps else 0.0)
        most = max(c.clients for c in cells)
        highest = f"{best.tps.mean:,.0f} TPS at {best.clients} clients" if best.tps else "-"
        text = f"{s.label}: highest {highest}; {_where_it_stops(s, most)}"
        found.append(ReportFinding("scaling", text, SCALABILITY, "Scalability"))
    if len(series) > MAX_SERIES:
        more = f"{len(series) - MAX_SERIES} more series: their scaling is in the table"
        found.append(ReportFinding("scaling", more, SCALABILITY, "Scalability"))
    return found


def _series_dims(cell: CellView) -> tuple[tuple[str, str], ...]:
    return tuple(d for d in cell.dims if d[0] != "clients")


def _where_it_stops(s: ScalabilityView, most: int) -> str:
    peak = s.fit.peak
    fitted = f"the fitted curve peaks near {peak.value:.0f} clients" if peak else ""
    if s.departure:
        return f"{s.departure}; {fitted}" if fitted else s.departure
    near_linear = f"near-linear up to {most} clients, the most measured"
    return f"{near_linear}; {fitted}" if fitted else near_linear


def _steps(view: ReportView) -> list[ReportFinding]:
    return [
        ReportFinding(
            "steps", f"Along {scan.axis}: {summary(scan)}", CHANGE_POINTS, "Change points"
        )
        for scan in view.scans
        if scan.steps
    ]


def _limits(view: ReportView) -> list[ReportFinding]:
    """What held the runs back, where their telemetry could tell."""
    counts = Counter(r.diagnosis for r in view.runs if r.diagnosis)
    if not counts:
        return []
    named = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    said = ", ".join(f"{k.replace('_', ' ')} in {n}" for k, n in named[:MAX_LIMITS])
    rest = sum(n for _, n in named[MAX_LIMITS:])
    if rest:
        said += f", other limits in {rest}"
    text = f"What limited the runs: {said} of {len(view.runs)} run(s)"
    return [ReportFinding("limits", text, LIMITS, "What limited the runs")]


def _warnings(view: ReportView) -> list[ReportFinding]:
    return [
        ReportFinding("warning", a.message, warning_anchor(i), "Warnings")
        for i, a in enumerate(view.advice)
        if a.severity == "error" or a.kind in DECISIVE
    ]
