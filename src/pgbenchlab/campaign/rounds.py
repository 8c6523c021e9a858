"""Repeats until answered: the questions a plan asks, which cells the next round runs, what
stayed open, and what the time budget affords. Pure functions of the plan's specs and the stored
values (the budget aside), so a resumed campaign
makes the same decisions from what is stored.

The questions: every cell that differs from another in one configuration axis only (the
server, one `[matrix.setting]` or one `[matrix.sysctl]`) is compared with the cell holding that
axis's first value (the first `[[server]]`, a setting's first value), as `compare --baseline`
would; a cell in no comparison asks for its TPS interval within ±precision. The decision before
round r uses only the rounds before r, which makes it repeatable after an interruption.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pgbenchlab.analysis.equivalence import sequential_tost
from pgbenchlab.analysis.sequential import cell_precision, sequential_compare
from pgbenchlab.plan import AutoRepeats, RunSpec
from pgbenchlab.store import RunValue
from pgbenchlab.store.metrics import METRICS

Values = Mapping[str, Mapping[int, float]]  # cell id → round → a metric of the ok runs


@dataclass(frozen=True)
class Question:
    """A comparison (baseline and candidate cell ids) or one cell's precision."""

    label: str
    cells: tuple[str, ...]


@dataclass(frozen=True)
class Answer:
    question: Question
    decided: bool
    text: str
    more_rounds: int | None  # further rounds that would likely close it (None: cannot tell)


def questions(first_round: Sequence[RunSpec], server_order: Sequence[str]) -> tuple[Question, ...]:
    """The comparisons between the cells of one round, then the precision of the others."""
    configs = {s.cell_id: _config(s) for s in first_round}
    index = {(s.point, _frozen(configs[s.cell_id])): s for s in first_round}
    baselines = _first_values(first_round, server_order)
    found: list[Question] = []
    for spec in first_round:
        config = configs[spec.cell_id]
        for axis, first in baselines.items():
            if config.get(axis, first) == first:
                continue
            baseline = index.get((spec.point, _frozen({**config, axis: first})))
            if baseline is not None:
                label = f"{_name(spec)} against {axis}={first}"
                found.append(Question(label, (baseline.cell_id, spec.cell_id)))
    compared = {c for q in found for c in q.cells}
    alone = [Question(_name(s), (s.cell_id,)) for s in first_round if s.cell_id not in compared]
    return (*found, *alone)


def _config(spec: RunSpec) -> dict[str, str]:
    settings = {f"setting {k}": v for k, v in spec.server_settings}
    return {"server": spec.server, **settings, **{f"sysctl {k}": v for k, v in spec.sysctl}}


def _frozen(config: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(config.items()))


def _first_values(first_round: Sequence[RunSpec], server_order: Sequence[str]) -> dict[str, str]:
    """Each configuration axis's baseline value: the first server, a setting's first value."""
    firsts: dict[str, str] = {}
    for spec in sorted(first_round, key=lambda s: server_order.index(s.server)):
        for axis, value in _config(spec).items():
            firsts.setdefault(axis, value)
    return firsts


def _name(spec: RunSpec) -> str:
    return spec.label.rsplit(" #", 1)[0]


def tps_by_cell(values: Iterable[RunValue]) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for value in values:
        if value.tps is not None and value.tps > 0:
            found.setdefault(value.cell_id, {})[value.repeat] = value.tps
    return found


def by_metric(values: Iterable[RunValue], metrics: Sequence[str]) -> dict[str, Values]:
    """metric → cell id → round → value of the ok runs (positive values: ratios need them)."""
    kept = list(values)
    found: dict[str, Values] = {"tps": tps_by_cell(kept)} if "tps" in metrics else {}
    for metric in (m for m in metrics if m != "tps"):
        cells: dict[str, dict[int, float]] = {}
        for value in kept:
            figure = dict(value.figures).get(metric)
            if figure is not None and figure > 0:
                cells.setdefault(value.cell_id, {})[value.repeat] = figure
        found[metric] = cells
    return found


def answer_all(
    question: Question, values: Mapping[str, Values], auto: AutoRepeats, before: float
) -> Answer:
    """The question on every metric the plan decides: answered once each one is."""
    found = [answer(question, values[m], auto, before, m) for m in auto.decide]
    if len(found) == 1:
        return found[0]
    open_ = [a.more_rounds for a in found if not a.decided]
    more = None if None in open_ or not open_ else max(r for r in open_ if r is not None)
    text = "; ".join(a.text for a in found)
    return Answer(question, not open_, text, more)


def answer(
    question: Question, values: Values, auto: AutoRepeats, before: float, metric: str = "tps"
) -> Answer:
    """Where the question stands on ``metric`` with the rounds before ``before`` (math.inf:
    all)."""
    known = METRICS[metric]
    rounds = [{r: v for r, v in values.get(c, {}).items() if r < before} for c in question.cells]
    if len(rounds) == 2:
        base, cand = rounds
        pairs = [(base[r], cand[r]) for r in sorted(base) if r in cand]
        if not pairs:
            return Answer(question, False, "no round with both sides yet", None)
        result = sequential_compare(
            pairs,
            higher_is_better=known.higher_is_better,
            threshold=auto.threshold,
            resolution=auto.precision,
        )
        text = f"{known.label} {result.verdict.value.replace('_', ' ')}: {result.reason}"
        if auto.equivalence is None:
            return Answer(question, result.decided, text, result.more_rounds)
        same = sequential_tost(pairs, margin=auto.equivalence)
        mores = [m for m in (result.more_rounds, same.more) if m is not None]
        decided = result.decided or same.decided
        more = None if decided or not mores else min(mores)
        return Answer(question, decided, f"{text}; {same.text()}", more)
    if not rounds[0]:
        return Answer(question, False, "no complete run yet", None)
    cell = cell_precision(list(rounds[0].values()), auto.precision)
    half = f"±{cell.relative_half:.1%}" if math.isfinite(cell.relative_half) else "unbounded"
    text = (
        f"{known.label} {known.format(cell.mean)} {half} after {cell.runs} run(s) "
        f"({'within' if cell.decided else 'wider than'} ±{auto.precision:.0%})"
    )
    return Answer(question, cell.decided, text, cell.more_rounds)


def open_cells(answers: Iterable[Answer]) -> set[str]:
    """The cells the next round runs: both sides of every open comparison, open cells."""
    return {c for a in answers if not a.decided for c in a.question.cells}


def round_specs(first_round: Sequence[RunSpec], round_: int, cells: set[str]) -> list[RunSpec]:
    """The runs of round ``round_`` (beyond the minimum) for these cells, interleaved in the
    first round's order; sequence numbers follow the plan's, whichever cells are open."""
    start = len(first_round) * (round_ - 1)
    return [
        replace(spec, repeat=round_, sequence=start + i)
        for i, spec in enumerate(first_round)
        if spec.cell_id in cells
    ]


def affordable(
    runs: int, seconds_per_run: float | None, spent: float, budget: float | None
) -> bool:
    """Whether ``runs`` more fit in the budget, at the mean wall time measured per run."""
    if budget is None or seconds_per_run is None:
        return True
    return spent + runs * seconds_per_run <= budget


def seconds_per_run(values: Sequence[RunValue]) -> float | None:
    return sum(v.seconds for v in values) / len(values) if values else None


def open_lines(answers: Sequence[Answer]) -> list[str]:
    """One line per open answer: where it stands and what would close it."""
    lines = []
    for found in answers:
        if found.decided:
            continue
        closing = (
            f"about {found.more_rounds} more round(s) would likely close it"
            if found.more_rounds is not None
            else "too close to the threshold (or too few runs) to say how many rounds would"
        )
        lines.append(f"open: {found.question.label}: {found.text}; {closing}")
    return lines


def summary(answers: Sequence[Answer], why: str) -> list[str]:
    decided = sum(a.decided for a in answers)
    head = f"repeats auto: {decided} of {len(answers)} answer(s) decided; {why}"
    return [head, *open_lines(answers)]


@dataclass(frozen=True)
class Budget:
    """A campaign's time budget from its start (monotonic clock); None: no limit."""

    started: float
    seconds: float | None

    def affords(self, runs: int, seconds_per_run: float | None) -> bool:
        return affordable(runs, seconds_per_run, time.monotonic() - self.started, self.seconds)
