"""`pgbenchlab compare`: every matrix cell two selections have in common, with a verdict.

A selection is one server of a campaign (within a campaign) or a whole campaign (across
campaigns). Cells are matched on every axis but the one that differs (`analysis.cells`, as the
report matches servers); the unit of evidence is
the run (repeats), and the verdicts come from `pgbenchlab.analysis.comparison.compare`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pgbenchlab import jsontext
from pgbenchlab.analysis.cells import cell_label, match_cells, match_key, varying_axes
from pgbenchlab.analysis.comparison import Comparison, ComparisonVerdict, compare
from pgbenchlab.analysis.stats import high_variation_warning
from pgbenchlab.errors import UserError
from pgbenchlab.report.views.advice import likely_cause
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.metrics import METRICS, format_value, one_server_each, run_values
from pgbenchlab.report.views.model import CellView, ReportView, RunView
from pgbenchlab.store import Store


@dataclass(frozen=True)
class CellChange:
    cell: str  # the matched axes, as text
    metric: str
    baseline_n: int
    candidate_n: int
    baseline_mean: float
    candidate_mean: float
    relative_change: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: ComparisonVerdict
    repeats_needed: int | None
    reason: str
    warnings: tuple[str, ...] = ()  # high variation between repeats, with its likely cause


def within_campaign(
    store: Store, campaign: str | None, baseline: str, candidate: str, threshold: float
) -> list[CellChange]:
    view = load_view(store, store.campaign_id(campaign), detail=False)
    servers = {c.dim("server") for c in view.cells}
    for name in (baseline, candidate):
        if name not in servers:
            raise UserError(
                f"no server {name!r} in this campaign; servers: {', '.join(sorted(servers))}"
            )
    base = [c for c in view.cells if c.dim("server") == baseline]
    cand = [c for c in view.cells if c.dim("server") == candidate]
    return match(view, base, view, cand, ignore=("server",), threshold=threshold)


def across_campaigns(store: Store, first: str, second: str, threshold: float) -> list[CellChange]:
    views = [load_view(store, store.campaign_id(name), detail=False) for name in (first, second)]
    ignore = ("server",) if one_server_each(views) else ()
    return match(
        views[0], views[0].cells, views[1], views[1].cells, ignore=ignore, threshold=threshold
    )


def match(
    base_view: ReportView,
    base_cells: Sequence[CellView],
    cand_view: ReportView,
    cand_cells: Sequence[CellView],
    *,
    ignore: tuple[str, ...],
    threshold: float,
) -> list[CellChange]:
    base_runs = {r.id: r for r in base_view.runs}
    cand_runs = {r.id: r for r in cand_view.runs}
    pairs = match_cells(base_cells, cand_cells, _dims, ignore)
    varying = varying_axes([match_key(c.dims, ignore) for c in base_cells])
    changes = []
    for pair in pairs:
        label = cell_label(pair.key, varying)
        for metric in METRICS:
            change = cell_change(
                label, metric, pair.baseline, base_runs, pair.candidate, cand_runs, threshold
            )
            if change is not None:
                changes.append(change)
    if not changes:
        raise UserError("the two selections have no matrix cell with results in common")
    return changes


def _dims(cell: CellView) -> tuple[tuple[str, str], ...]:
    return cell.dims


def cell_change(
    label: str,
    metric: str,
    base: CellView,
    base_runs: dict[int, RunView],
    cand: CellView,
    cand_runs: dict[int, RunView],
    threshold: float,
) -> CellChange | None:
    base_values = run_values(base, base_runs, metric)
    cand_values = run_values(cand, cand_runs, metric)
    if not base_values or not cand_values:
        return None
    _, higher_is_better = METRICS[metric]
    result: Comparison = compare(
        base_values, cand_values, higher_is_better=higher_is_better, threshold=threshold
    )
    return CellChange(
        cell=label,
        metric=metric,
        baseline_n=len(base_values),
        candidate_n=len(cand_values),
        baseline_mean=result.baseline.mean,
        candidate_mean=result.candidate.mean,
        relative_change=result.relative_change,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        p_value=result.p_value,
        verdict=result.verdict,
        repeats_needed=result.repeats_needed,
        reason=result.reason,
        warnings=_variation(label, (base_values, base, base_runs), (cand_values, cand, cand_runs))
        if metric == "tps"
        else (),
    )


Side = tuple[list[float], CellView, dict[int, RunView]]


def _variation(label: str, baseline: Side, candidate: Side) -> tuple[str, ...]:
    """The sides whose TPS varies too much between repeats, each with its likely cause."""
    found = []
    for name, (tps, cell, runs) in (("baseline", baseline), ("candidate", candidate)):
        warning = high_variation_warning(tps)
        if warning is not None:
            cause = likely_cause([runs[i] for i in cell.run_ids])
            found.append(
                f"{label}, {name}: TPS varies with CV {warning.cv:.0%} over {warning.n} runs"
                + (f"; likely cause: {cause}" if cause else "")
            )
    return tuple(found)


def regressed(changes: Sequence[CellChange]) -> bool:
    return any(c.verdict == ComparisonVerdict.REGRESSED for c in changes)


def as_text(changes: Sequence[CellChange], baseline: str, candidate: str) -> str:
    header = ["cell", "metric", "n", baseline, candidate, "change", "95 % CI", "verdict"]
    rows = [header]
    for c in changes:
        interval = (
            f"{c.ci_low:+.1%} … {c.ci_high:+.1%}"
            if c.ci_low is not None and c.ci_high is not None
            else "-"
        )
        verdict = c.verdict.replace("_", " ")
        if c.repeats_needed:
            verdict += f" (~{c.repeats_needed} runs per side needed)"
        rows.append([
            c.cell, METRICS[c.metric][0], f"{c.baseline_n}/{c.candidate_n}",
            format_value(c.metric, c.baseline_mean), format_value(c.metric, c.candidate_mean),
            f"{c.relative_change:+.1%}", interval, verdict,
        ])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    counts = {v: sum(c.verdict == v for c in changes) for v in ComparisonVerdict}
    lines.append("")
    lines.append(", ".join(f"{n} {v.value.replace('_', ' ')}" for v, n in counts.items()))
    warnings = [w for c in changes for w in c.warnings]
    if warnings:
        lines += ["", "High variation between repeats:", *(f"  {w}" for w in warnings)]
    return "\n".join(lines)


# The shape of `compare --json`; version 1 was the bare list of changes.
JSON_VERSION = 2


def as_json(changes: Sequence[CellChange], connection_costs: Sequence[Mapping[str, Any]]) -> str:
    """compare --json: the cells' changes, and the compared sides' connection costs."""
    document = {
        "schema_version": JSON_VERSION,
        "changes": [asdict(c) for c in changes],
        "connection_costs": list(connection_costs),
    }
    return jsontext.dumps(document, indent=2)
