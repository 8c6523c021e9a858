"""Equivalence: whether a change is shown to lie within ±margin (two one-sided tests).

"No change" cannot be shown by a test of difference; what can be shown is that the change
lies within a margin the user names. With the estimate d of mean(log candidate) −
mean(log baseline) and the band b = log(1 + margin), symmetric on the log scale as the
threshold is (docs/statistics.md §3.4):

- equivalent: both one-sided tests reject at α = 1 − confidence ("d ≤ −b" and "d ≥ b"), which
  is the (1 − 2α) interval lying wholly inside (−b, b);
- not equivalent: the same interval lies wholly beyond b or below −b;
- otherwise not decided, with the further runs (or rounds) that would likely decide it if the
  estimate and the noise hold.

`tost` works on independent runs (Welch, as `comparison.compare`); `sequential_tost` on rounds
paired by the interleaved order and looked at after every round (a confidence sequence of
coverage 1 − 2α, as `sequential` gives, so peeking keeps the rate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pgbenchlab.analysis.comparison import (
    DEFAULT_CONFIDENCE,
    MAX_REPEATS,
    log_values,
    pooled_log_sd,
    repeats_for_margin,
    welch_log_difference,
)
from pgbenchlab.analysis.sequential import rounds_to_reach, sequence_interval
from pgbenchlab.analysis.stats import student_t_quantile, student_t_sf
from pgbenchlab.errors import UserError


class EquivalenceVerdict(StrEnum):
    EQUIVALENT = "equivalent"
    NOT_EQUIVALENT = "not_equivalent"
    NOT_DECIDED = "not_decided"


@dataclass(frozen=True)
class Equivalence:
    """The change (candidate / baseline − 1) against ±margin. ``ci_low``/``ci_high``: the
    (1 − 2α) interval of the two one-sided tests (None without noise to measure); ``p_value``:
    the larger of the two one-sided tests' (below α: equivalent), None when not computed;
    ``more``: further runs per side (or rounds) that would likely decide an open verdict;
    ``p_beyond``: the smaller one-sided p-value of "the change lies beyond the margin" (below
    α: not equivalent). Both p-values are for adjusting across many cells (`multiplicity`)."""

    margin: float
    confidence: float
    relative_change: float
    ci_low: float | None
    ci_high: float | None
    verdict: EquivalenceVerdict
    more: int | None
    p_value: float | None = None
    p_beyond: float | None = None

    @property
    def decided(self) -> bool:
        return self.verdict is not EquivalenceVerdict.NOT_DECIDED

    def text(self, unit: str = "rounds") -> str:
        """One line: the verdict, the change and its interval."""
        if self.verdict is EquivalenceVerdict.EQUIVALENT:
            head = f"equivalent within ±{margin_text(self.margin)}"
        elif self.verdict is EquivalenceVerdict.NOT_EQUIVALENT:
            head = f"not equivalent within ±{margin_text(self.margin)}"
        elif self.more is None or self.more >= MAX_REPEATS:
            head = "not decided: too close to the margin (or too few runs) to say when"
        else:
            head = f"not decided: about {self.more} more {unit}"
        level = 1 - 2 * (1 - self.confidence)
        if self.ci_low is None or self.ci_high is None:
            return f"{head} ({self.relative_change:+.1%})"
        return (
            f"{head} ({self.relative_change:+.1%}, {level:.0%} CI {_bound(self.ci_low)} to "
            f"{_bound(self.ci_high)})"
        )


def margin_text(margin: float) -> str:
    """1 % as "1%", 0.5 % as "0.5%"."""
    return f"{margin * 100:.2f}".rstrip("0").rstrip(".") + "%"


def verdict_of(low: float, high: float, band: float) -> EquivalenceVerdict:
    """The verdict of a log-scale interval against ±band."""
    if -band < low and high < band:
        return EquivalenceVerdict.EQUIVALENT
    if low >= band or high <= -band:
        return EquivalenceVerdict.NOT_EQUIVALENT
    return EquivalenceVerdict.NOT_DECIDED


def _check(margin: float, confidence: float) -> None:
    if not 0 < margin < 1:
        raise ValueError(f"margin must be between 0 and 1, got {margin}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be between 0.5 and 1, got {confidence}")


def tost(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    margin: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Equivalence:
    """Two one-sided Welch tests on the logs of independent runs (all positive)."""
    _check(margin, confidence)
    base, cand = log_values(baseline), log_values(candidate)
    band, alpha = math.log1p(margin), 1 - confidence
    estimate = sum(cand) / len(cand) - sum(base) / len(base)
    change = math.expm1(estimate)
    if len(base) < 2 or len(cand) < 2:
        needed = _runs_needed(pooled_log_sd(base, cand), estimate, band, confidence)
        more = _beyond(needed, min(len(base), len(cand)))
        return Equivalence(margin, confidence, change, None, None, _NOT_DECIDED, more)
    diff = welch_log_difference(base, cand)
    if diff.se == 0:
        low = high = diff.estimate
        p_value = 0.0 if abs(diff.estimate) < band else 1.0
        p_beyond = 0.0 if abs(diff.estimate) > band else 1.0
    else:
        half = student_t_quantile(1 - alpha, diff.df) * diff.se
        low, high = diff.estimate - half, diff.estimate + half
        above = student_t_sf((band - diff.estimate) / diff.se, diff.df)  # "d >= band" rejected
        below = student_t_sf((diff.estimate + band) / diff.se, diff.df)  # "d <= -band" rejected
        p_value, p_beyond = max(above, below), min(1 - above, 1 - below)
    verdict = verdict_of(low, high, band)
    more = None
    if verdict is _NOT_DECIDED:
        needed = _runs_needed(pooled_log_sd(base, cand), estimate, band, confidence)
        more = _beyond(needed, min(len(base), len(cand)))
    return Equivalence(
        margin, confidence, change, math.expm1(low), math.expm1(high), verdict, more, p_value,
        p_beyond,
    )  # fmt: skip


_NOT_DECIDED = EquivalenceVerdict.NOT_DECIDED


def _beyond(needed: int | None, have: int) -> int | None:
    """Runs per side beyond those there are; None when no affordable number would do."""
    if needed is None or needed >= MAX_REPEATS:
        return None
    return max(1, needed - have)


def _runs_needed(sd: float | None, estimate: float, band: float, confidence: float) -> int | None:
    """Runs per side whose (1 − 2α) interval likely clears the margin, if the estimate and the
    noise hold: inside it when the estimate is, beyond it otherwise."""
    if sd is None:
        return None
    distance = abs(band - abs(estimate))
    return repeats_for_margin(sd, distance, 1 - 2 * (1 - confidence))


def sequential_tost(
    pairs: Sequence[tuple[float, float]],
    *,
    margin: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Equivalence:
    """(baseline, candidate) values of the rounds both completed: the confidence sequence of
    the paired log differences, at coverage 1 − 2α, against ±margin."""
    _check(margin, confidence)
    if not pairs:
        raise ValueError("no rounds to compare")
    base = log_values([b for b, _ in pairs])
    cand = log_values([c for _, c in pairs])
    level = 1 - 2 * (1 - confidence)
    interval = sequence_interval([c - b for b, c in zip(base, cand, strict=True)], level)
    band = math.log1p(margin)
    change = math.expm1(interval.estimate)
    if not math.isfinite(interval.half):
        more = rounds_to_reach(interval.sd, abs(band - abs(interval.estimate)), interval.n, level)
        return Equivalence(margin, confidence, change, None, None, _NOT_DECIDED, more)
    verdict = verdict_of(interval.low, interval.high, band)
    more = None
    if verdict is _NOT_DECIDED:
        distance = abs(band - abs(interval.estimate))
        more = rounds_to_reach(interval.sd, distance, interval.n, level)
    low, high = math.expm1(interval.low), math.expm1(interval.high)
    return Equivalence(margin, confidence, change, low, high, verdict, more)


def _bound(x: float) -> str:
    return f"{x:+.1%}"


def floor_note(margin: float, floor: float | None, what: str) -> str:
    """The margin against the build-to-build floor measured for ``what``: refused below it
    (a change smaller than the floor cannot be told from rebuilding the same source)."""
    if floor is None:
        return f"no build-to-build floor was measured for {what}; the margin is not checked"
    if margin < floor:
        raise UserError(
            f"equivalence margin ±{margin_text(margin)} is below the build-to-build floor of "
            f"±{margin_text(floor)} measured for {what}; give a margin of at least that"
        )
    return f"the margin is above the build-to-build floor of ±{margin_text(floor)} for {what}"
