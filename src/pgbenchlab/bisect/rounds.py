"""A step's measurements: each commit's figure per round (the repeat number of the step's
campaign, where every commit ran once), and the judgement of one commit against another over
the rounds both completed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pgbenchlab.analysis.comparison import DEFAULT_RESOLUTION, ComparisonVerdict
from pgbenchlab.analysis.sequential import SequentialComparison, sequential_compare
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.store import Store
from pgbenchlab.store.columns import BY_KEY
from pgbenchlab.store.metrics import Metric


class Rules(Protocol):
    """What a judgement needs of the bisection: the metric and the request's threshold."""

    @property
    def metric(self) -> Metric: ...

    @property
    def threshold(self) -> float: ...


@dataclass(frozen=True)
class Rounds:
    """label → round → figure of the complete runs, and the first failure of each label."""

    figures: Mapping[str, Mapping[int, float]]
    failures: Mapping[str, str]

    @property
    def complete(self) -> int:
        """Rounds in which every label has a figure."""
        if not self.figures:
            return 0
        shared = set.intersection(*(set(by_round) for by_round in self.figures.values()))
        return len(shared)

    def paired(self, base: str, cand: str) -> tuple[list[float], list[float]]:
        """Both labels' figures over the rounds both completed, in round order."""
        one, two = self.figures.get(base, {}), self.figures.get(cand, {})
        shared = sorted(set(one) & set(two))
        return [one[r] for r in shared], [two[r] for r in shared]

    def figure(self, label: str) -> float | None:
        """The geometric mean of a label's figures."""
        values = list(self.figures.get(label, {}).values())
        return math.exp(sum(map(math.log, values)) / len(values)) if values else None

    def failed(self, label: str) -> str | None:
        return self.failures.get(label)

    def failed_any(self) -> str | None:
        return next(iter(self.failures.values()), None)

    def plus(self, results: Iterable[RunResult], metric: Metric) -> Rounds:
        figures = {label: dict(by_round) for label, by_round in self.figures.items()}
        failures = dict(self.failures)
        for result in results:
            _take(figures, failures, result.spec.server, result.repeat, result.status,
                  BY_KEY[metric.column].read(result), result.error)  # fmt: skip
        return Rounds(figures, failures)


def stored_rounds(database: Path, campaign: str, metric: Metric) -> Rounds:
    """The rounds a step's campaign has stored (none when it has not run)."""
    figures: dict[str, dict[int, float]] = {}
    failures: dict[str, str] = {}
    if not database.is_file():
        return Rounds(figures, failures)
    with Store(database) as store:
        found = store.find_campaign(campaign)
        records = () if found is None else store.run_records(found.id)
    for record in records:
        _take(figures, failures, record.spec.server, record.repeat, record.status,
              record[metric.column], record.error)  # fmt: skip
    return Rounds(figures, failures)


def _take(
    figures: dict[str, dict[int, float]],
    failures: dict[str, str],
    label: str,
    repeat: int,
    status: RunStatus,
    value: Any,
    error: str | None,
) -> None:
    if status == RunStatus.OK and isinstance(value, int | float) and value > 0:
        figures.setdefault(label, {})[repeat] = float(value)
    elif status in (RunStatus.FAILED, RunStatus.ABORTED):
        failures.setdefault(label, (error or status).splitlines()[0])


@dataclass(frozen=True)
class Judgement:
    """A candidate against a baseline over the rounds both completed: a confidence sequence
    on the round-paired differences, valid although a step looks after every round."""

    comparison: SequentialComparison | None

    @property
    def verdict(self) -> ComparisonVerdict:
        found = self.comparison
        return ComparisonVerdict.NOT_ENOUGH_DATA if found is None else found.verdict

    @property
    def decided(self) -> bool:
        return self.verdict != ComparisonVerdict.NOT_ENOUGH_DATA

    @property
    def within_noise(self) -> bool:
        return self.verdict == ComparisonVerdict.WITHIN_NOISE

    @property
    def relative_change(self) -> float:
        return 0.0 if self.comparison is None else self.comparison.relative_change

    @property
    def ci_low(self) -> float | None:
        return None if self.comparison is None else self.comparison.ci_low

    @property
    def ci_high(self) -> float | None:
        return None if self.comparison is None else self.comparison.ci_high

    @property
    def reason(self) -> str:
        found = self.comparison
        if found is None:
            return "fewer than two shared rounds"
        return f"{found.reason}: {found.verdict}"


def judge(rounds: Rounds, base: str, cand: str, rules: Rules) -> Judgement:
    before, after = rounds.paired(base, cand)
    if len(before) < 2:
        return Judgement(None)
    found = sequential_compare(
        list(zip(before, after, strict=True)),
        higher_is_better=rules.metric.higher_is_better,
        threshold=rules.threshold,
        resolution=max(DEFAULT_RESOLUTION, 2 * rules.threshold),
    )
    return Judgement(found)
