"""`pgbenchlab compare`: every matrix cell two selections have in common, with a verdict.

A selection is one server of a campaign (within a campaign) or a whole campaign (across
campaigns). Cells are matched on every axis but the one that differs (`analysis.cells`, as the
report matches servers); the unit of evidence is
the run (repeats), and the verdicts come from `pgbenchlab.analysis.comparison.compare`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pgbenchlab import jsontext
from pgbenchlab.analysis.cells import cell_label, match_cells, match_key, varying_axes
from pgbenchlab.analysis.comparison import (
    DEFAULT_CONFIDENCE,
    DEFAULT_THRESHOLD,
    Comparison,
    ComparisonVerdict,
    compare,
)
from pgbenchlab.analysis.equivalence import (
    Equivalence,
    EquivalenceVerdict,
    floor_note,
    margin_text,
    tost,
)
from pgbenchlab.analysis.multiplicity import DEFAULT_CORRECTION, Correction, adjusted
from pgbenchlab.analysis.stats import high_variation_warning
from pgbenchlab.errors import UserError
from pgbenchlab.report.views.advice import likely_cause
from pgbenchlab.report.views.build import load_view, simulated
from pgbenchlab.report.views.floors import HELD_VERDICT, against_floors, floors_of
from pgbenchlab.report.views.metrics import (
    DEFAULT_METRICS,
    METRICS,
    format_value,
    label,
    one_server_each,
    run_values,
)
from pgbenchlab.report.views.model import CellView, ReportView, RunView
from pgbenchlab.store import BUILD_FLOOR, NoiseFloor, Store


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
    # The p-value adjusted across every comparison of the output (`CompareRules.correction`).
    adjusted_p: float | None = None
    # With --equivalence: the verdict against ±margin and its sentence.
    equivalence: EquivalenceVerdict | None = None
    equivalence_reason: str = ""
    equivalence_p: float | None = None  # of the claim made or nearest, adjusted across cells
    adjusted_away: bool = False  # a change alone, not once adjusted across the comparisons
    cell_id: str = ""  # the candidate's cell in its view (the report's tables key on it)
    measured_floors: tuple[tuple[str, float], ...] = ()  # kind → floor, for its cells
    floors: str = ""  # the floors measured for its cells, and which its verdict beat
    held: bool = False  # within the build-to-build floor: no change of the patch

    @property
    def verdict_text(self) -> str:
        return HELD_VERDICT if self.held else self.verdict.replace("_", " ")


@dataclass(frozen=True)
class CompareRules:
    """What a comparison is asked: the metrics, the threshold of a change, the margin of an
    equivalence (None: not asked) and how the verdicts of many cells are adjusted."""

    threshold: float = DEFAULT_THRESHOLD
    metrics: tuple[str, ...] = DEFAULT_METRICS
    equivalence: float | None = None
    correction: Correction = DEFAULT_CORRECTION
    confidence: float = DEFAULT_CONFIDENCE


def floor_notes(store: Store, campaign_ids: Sequence[int], rules: CompareRules) -> list[str]:
    """With an equivalence margin: each metric's build-to-build floor stored for the compared
    campaigns, a user error when the margin lies below it (none measured: said so)."""
    if rules.equivalence is None:
        return []
    floors = [f for i in campaign_ids for f in store.noise_floors(i) if f.kind == BUILD_FLOOR]
    notes = []
    for metric in rules.metrics:
        spreads = [f.spread for f in floors if f.metric == metric]
        floor = max(spreads) if spreads else None
        notes.append(floor_note(rules.equivalence, floor, label(metric)))
    return notes


def within_campaign(
    store: Store,
    campaign: str | None,
    baseline: str,
    candidate: str,
    threshold: float,
    rules: CompareRules | None = None,
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
    asked = replace(rules or CompareRules(), threshold=threshold)
    return match(view, base, view, cand, ignore=("server",), rules=asked)


def across_campaigns(
    store: Store, first: str, second: str, threshold: float, rules: CompareRules | None = None
) -> list[CellChange]:
    views = [load_view(store, store.campaign_id(name), detail=False) for name in (first, second)]
    ignore = ("server",) if one_server_each(views) else ()
    asked = replace(rules or CompareRules(), threshold=threshold)
    return match(views[0], views[0].cells, views[1], views[1].cells, ignore=ignore, rules=asked)


def match(
    base_view: ReportView,
    base_cells: Sequence[CellView],
    cand_view: ReportView,
    cand_cells: Sequence[CellView],
    *,
    ignore: tuple[str, ...],
    rules: CompareRules,
    adjust: bool = True,
) -> list[CellChange]:
    """Every matched cell's change on each metric; ``adjust``: the verdicts adjusted across
    them (`corrected`), else left for a larger family to adjust."""
    base_runs = {r.id: r for r in base_view.runs}
    cand_runs = {r.id: r for r in cand_view.runs}
    pairs = match_cells(base_cells, cand_cells, _dims, ignore)
    floors = (*base_view.floors, *(cand_view.floors if cand_view is not base_view else ()))
    varying = varying_axes([match_key(c.dims, ignore) for c in base_cells])
    changes, left_out = [], set()
    for pair in pairs:
        name = cell_label(pair.key, varying)
        counted = simulated(pair.baseline, base_runs) or simulated(pair.candidate, cand_runs)
        for metric in rules.metrics:
            if counted and not METRICS[metric].counts_work:
                left_out.add(metric)  # the simulator's time, not the server's
                continue
            change = cell_change(
                name, metric, pair.baseline, base_runs, pair.candidate, cand_runs, rules, floors
            )
            if change is not None:
                changes.append(change)
    if not changes and left_out:
        raise UserError(
            f'the cells compared were counted under a CPU simulator (count = "instructions"): '
            f"their {', '.join(sorted(left_out))} are the simulator's; compare them with "
            "--metric instructions_per_tx (or WAL and buffers per transaction)"
        )
    if not changes:
        raise UserError("the two selections have no matrix cell with results in common")
    return corrected(changes, rules) if adjust else changes


def _dims(cell: CellView) -> tuple[tuple[str, str], ...]:
    return cell.dims


def cell_change(
    label: str,
    metric: str,
    base: CellView,
    base_runs: dict[int, RunView],
    cand: CellView,
    cand_runs: dict[int, RunView],
    rules: CompareRules,
    floors: Sequence[NoiseFloor] = (),
) -> CellChange | None:
    base_values = run_values(base, base_runs, metric)
    cand_values = run_values(cand, cand_runs, metric)
    if not base_values or not cand_values:
        return None
    result: Comparison = compare(
        base_values,
        cand_values,
        higher_is_better=METRICS[metric].higher_is_better,
        threshold=rules.threshold,
        confidence=rules.confidence,
    )
    equivalent = None
    if rules.equivalence is not None:
        equivalent = tost(
            base_values, cand_values, margin=rules.equivalence, confidence=rules.confidence
        )
    change = CellChange(
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
        adjusted_p=result.p_value,
        equivalence=equivalent.verdict if equivalent else None,
        equivalence_reason=equivalent.text("runs per side") if equivalent else "",
        equivalence_p=_claim_p(equivalent) if equivalent else None,
        cell_id=cand.cell_id,
    )
    found = floors_of(floors, metric, (base.cell_id, cand.cell_id))
    return replace(change, measured_floors=tuple(found.items()))


def _floored(change: CellChange) -> CellChange:
    """The change against its cells' floors, once its verdict is adjusted across cells."""
    if not change.measured_floors:
        return change
    interval = (change.ci_low, change.ci_high)
    found = dict(change.measured_floors)
    f = against_floors(found, change.verdict, change.reason, change.relative_change, interval)
    return replace(change, verdict=f.verdict, reason=f.reason, floors=f.floors, held=f.held)


def _claim_p(found: Equivalence) -> float:
    """The p-value of the equivalence claim made, or of the nearer one when none is made."""
    if found.verdict is EquivalenceVerdict.EQUIVALENT:
        return _p(found.p_value)
    if found.verdict is EquivalenceVerdict.NOT_EQUIVALENT:
        return _p(found.p_beyond)
    return min(_p(found.p_value), _p(found.p_beyond))


def _p(value: float | None) -> float:
    return 1.0 if value is None else value


def corrected(changes: Sequence[CellChange], rules: CompareRules) -> list[CellChange]:
    """Changes and equivalences kept only where their p-value, adjusted across every
    comparison of the output (`multiplicity`), stays below α; the others become open."""
    alpha, many = 1 - rules.confidence, len(changes)
    tested = [i for i, c in enumerate(changes) if c.p_value is not None]
    p_adjusted = adjusted([_p(changes[i].p_value) for i in tested], rules.correction)
    found = list(changes)
    for i, p in zip(tested, p_adjusted, strict=True):
        found[i] = replace(found[i], adjusted_p=p)
        if found[i].verdict in _CHANGED and p >= alpha:
            found[i] = replace(
                found[i],
                verdict=ComparisonVerdict.NOT_ENOUGH_DATA,
                adjusted_away=True,
                reason=f"{found[i].reason}; not significant across the {many} comparisons "
                f"({rules.correction.described}: adjusted p={p:.2g})",
            )
    weighed = [i for i, c in enumerate(found) if c.equivalence_p is not None]
    e_adjusted = adjusted([_p(found[i].equivalence_p) for i in weighed], rules.correction)
    for i, p in zip(weighed, e_adjusted, strict=True):
        found[i] = replace(found[i], equivalence_p=p)
        if found[i].equivalence is not EquivalenceVerdict.NOT_DECIDED and p >= alpha:
            found[i] = replace(
                found[i],
                equivalence=EquivalenceVerdict.NOT_DECIDED,
                equivalence_reason=f"not decided across the {many} comparisons "
                f"({rules.correction.described}: adjusted p={p:.2g}); alone: "
                + found[i].equivalence_reason,
            )
    return [_floored(c) for c in found]


_CHANGED = (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED)


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


def as_text(
    changes: Sequence[CellChange],
    baseline: str,
    candidate: str,
    rules: CompareRules | None = None,
    notes: Sequence[str] = (),
) -> str:
    asked = rules or CompareRules()
    header = ["cell", "metric", "n", baseline, candidate, "change", "95 % CI", "verdict"]
    if asked.equivalence is not None:
        header.append(f"within ±{margin_text(asked.equivalence)}")
    rows = [header]
    for c in changes:
        interval = (
            f"{c.ci_low:+.1%} … {c.ci_high:+.1%}"
            if c.ci_low is not None and c.ci_high is not None
            else "-"
        )
        verdict = c.verdict_text
        if c.repeats_needed:
            verdict += f" (~{c.repeats_needed} runs per side needed)"
        rows.append([
            c.cell, label(c.metric), f"{c.baseline_n}/{c.candidate_n}",
            format_value(c.metric, c.baseline_mean), format_value(c.metric, c.candidate_mean),
            f"{c.relative_change:+.1%}", interval, verdict,
        ])  # fmt: skip
        if asked.equivalence is not None:
            rows[-1].append(c.equivalence_reason.split(" (")[0])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    counts = {v: sum(c.verdict == v for c in changes) for v in ComparisonVerdict}
    lines.append("")
    lines.append(", ".join(f"{n} {v.value.replace('_', ' ')}" for v, n in counts.items()))
    lines.append(correction_line(len(changes), asked))
    if asked.equivalence is not None:
        lines += ["", "Equivalence (two one-sided tests):"]
        lines += [f"  {c.cell}, {label(c.metric)}: {c.equivalence_reason}" for c in changes]
        lines += [f"  Build-to-build floor: {note}" for note in notes]
    floored = [c for c in changes if c.floors]
    if floored:
        lines += ["", "Noise floors measured for the cells (and which the verdict beat):"]
        lines += [f"  {c.cell}, {label(c.metric)}: {c.floors}" for c in floored]
    warnings = [w for c in changes for w in c.warnings]
    if warnings:
        lines += ["", "High variation between repeats:", *(f"  {w}" for w in warnings)]
    return "\n".join(lines)


def correction_line(comparisons: int, rules: CompareRules) -> str:
    """Which share of false calls the verdicts control, across how many comparisons."""
    return (
        f"Verdicts adjusted across the {comparisons} comparison(s): "
        f"{rules.correction.described} at {1 - rules.confidence:.0%}."
    )


# The shape of `compare --json`; version 1 was the bare list of changes.
JSON_VERSION = 2


def as_json(
    changes: Sequence[CellChange],
    connection_costs: Sequence[Mapping[str, Any]],
    rules: CompareRules | None = None,
    notes: Sequence[str] = (),
) -> str:
    """compare --json: the cells' changes, and the compared sides' connection costs."""
    asked = rules or CompareRules()
    document = {
        "schema_version": JSON_VERSION,
        "correction": asked.correction.value,
        "equivalence_margin": asked.equivalence,
        "floor_notes": list(notes),
        "changes": [asdict(c) for c in changes],
        "connection_costs": list(connection_costs),
    }
    return jsontext.dumps(document, indent=2)
