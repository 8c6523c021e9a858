"""Answers that may be looked at after every round: anytime-valid confidence sequences.

`repeats = "auto"` looks at a comparison after every round of runs and stops as soon as it is
decided. A fixed-n interval looked at that way calls identical configurations "changed" far more
often than its 5 % (each look is another chance), so these intervals are *confidence
sequences*: with probability at least ``confidence`` they contain the true value at every
round at once, so a rule that stops at any round, chosen from the data, keeps its error rate.

Method: the one-sample t-test martingale of Lai (1976), as a mixture over the effect size.
For n values with mean ``m`` and sample standard deviation ``s`` (log scale), and a
Gaussian prior N(0, TAU²) on the effect size δ = μ/σ with the scale-invariant (right Haar)
prior on σ, the Bayes factor of "mean μ" against "mean μ0" is a function of
t = (m - μ0)·√n / s alone:

    BF_n = (1 + n·TAU²)^(-1/2) · [(1 + t²/ν) / (1 + t²/(ν(1 + n·TAU²)))]^((ν+1)/2),  ν = n - 1.

Under μ = μ0 it is a nonnegative martingale with mean 1 (a likelihood ratio of the scale-free
data; Pérez-Ortiz, Lardy, de Heide and Grünwald, "E-statistics, group invariance and anytime
valid testing", 2024), so by Ville's inequality it ever reaches 1/α with probability at most α.
The μ0 it has not rejected form the interval m ± c_n·s/√n, with c_n in closed form (below):
no numerical search, and no maximum number of rounds fixed in advance (a resumed campaign or a
larger budget may add rounds without spending the error rate again).

Why this and not alpha spending (O'Brien–Fleming or Pocock through Lan–DeMets): spending needs
the maximum number of looks in advance and multivariate-normal integrals for the boundaries,
which with t statistics and two or three runs per look are approximations; the budget and a
resume change the number of looks. The price of the confidence sequence: at a given n it is
wider than the fixed-n t interval (c_10 = 4.2 against t = 2.26 at 95 %), so an answer that
needs a narrow interval (a "within noise" at a tight precision) takes more runs than a fixed
design that knew the noise in advance. An answer far from the threshold is reached after a few
rounds, which a fixed design must not assume. TAU = 3 puts the mixture's weight on effects of a
few standard deviations, the changes a benchmark looks for, and allows a decision from the
third round (c_3 = 14.6; the second round can never decide, whatever TAU below 14).

Comparisons are paired by round: the two configurations run once each per interleaved round,
and the differences of their log values cancel the host's drift between rounds.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.comparison import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESOLUTION,
    DEFAULT_THRESHOLD,
    ComparisonVerdict,
    log_values,
)
from pgbenchlab.analysis.stats import sample_variance

TAU = 3.0
# Searching for the rounds that would answer stops here: beyond it the answer is "too close".
MAX_ROUNDS = 10_000


@functools.lru_cache(maxsize=4096)  # asked for the same n after every round
def sequence_multiplier(n: int, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """c_n: the confidence sequence after n values is mean ± c_n·s/√n (inf: cannot yet).

    BF_n >= 1/α solved for x = t²: with a = 1 + n·TAU² and R = (√a/α)^(2/(ν+1)),
    x = ν(R - 1)/(1 - R/a), and no t reaches 1/α when R >= a.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if n < 2:
        return math.inf
    nu, a = n - 1, 1 + n * TAU * TAU
    log_r = (0.5 * math.log(a) - math.log(1 - confidence)) * 2 / (nu + 1)
    if log_r >= math.log(a):
        return math.inf
    ratio = math.exp(log_r)
    return math.sqrt(nu * (ratio - 1) / (1 - ratio / a))


@dataclass(frozen=True)
class SequenceInterval:
    """Mean of n log values with its confidence-sequence half-width (inf: not yet bounded)."""

    n: int
    estimate: float
    sd: float | None
    half: float

    @property
    def low(self) -> float:
        return self.estimate - self.half

    @property
    def high(self) -> float:
        return self.estimate + self.half


def sequence_interval(
    logs: Sequence[float], confidence: float = DEFAULT_CONFIDENCE
) -> SequenceInterval:
    """The confidence sequence of the mean of ``logs`` (one or more values) after them all."""
    n = len(logs)
    estimate = statistics.fmean(logs)
    if n < 2:
        return SequenceInterval(n, estimate, None, math.inf)
    sd = math.sqrt(sample_variance(logs))
    return SequenceInterval(n, estimate, sd, sequence_multiplier(n, confidence) * sd / math.sqrt(n))


def rounds_to_reach(
    sd: float | None, margin: float, n: int, confidence: float = DEFAULT_CONFIDENCE
) -> int | None:
    """More values (beyond n) for a half-width within ``margin`` if the noise stays ``sd``;
    None when no number up to MAX_ROUNDS would (or the noise is unknown)."""
    if sd is None or margin <= 0:
        return None

    def reaches(total: int) -> bool:
        return sequence_multiplier(total, confidence) * sd / math.sqrt(total) <= margin

    low, high = max(n, 2), MAX_ROUNDS
    if not reaches(high):
        return None
    while low < high:  # the half-width shrinks with every value: bisect
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle + 1, high)
    return low - n


@dataclass(frozen=True)
class SequentialComparison:
    """A candidate against its baseline over paired rounds; relative = candidate/baseline - 1.

    ``more_rounds``: for an open verdict, the further rounds that would likely decide it if the
    estimate and the noise hold (None: too close to the threshold to tell, or no noise yet).
    """

    rounds: int
    relative_change: float
    ci_low: float
    ci_high: float
    verdict: ComparisonVerdict
    more_rounds: int | None
    reason: str

    @property
    def decided(self) -> bool:
        return self.verdict is not ComparisonVerdict.NOT_ENOUGH_DATA


def sequential_compare(
    pairs: Sequence[tuple[float, float]],
    *,
    higher_is_better: bool,
    threshold: float = DEFAULT_THRESHOLD,
    resolution: float = DEFAULT_RESOLUTION,
    confidence: float = DEFAULT_CONFIDENCE,
) -> SequentialComparison:
    """(baseline, candidate) values of the rounds both completed, all positive.

    Changed (improved/regressed) when the whole sequence interval lies beyond ±threshold; within
    noise when the estimate lies inside ±threshold and the interval inside ±resolution; else
    not enough data. The rules of `comparison.compare`, on an interval valid at every round.
    """
    if not 0 <= threshold < resolution:
        raise ValueError(f"need 0 <= threshold < resolution, got {threshold}, {resolution}")
    if not pairs:
        raise ValueError("no rounds to compare")
    base = log_values([b for b, _ in pairs])
    cand = log_values([c for _, c in pairs])
    interval = sequence_interval([c - b for b, c in zip(base, cand, strict=True)], confidence)
    band, reach = math.log1p(threshold), math.log1p(resolution)
    verdict = _verdict(interval, band, reach, higher_is_better)
    more = (
        None if verdict is not ComparisonVerdict.NOT_ENOUGH_DATA else _more(interval, band, reach)
    )
    low, high = math.expm1(interval.low), math.expm1(interval.high)
    change = math.expm1(interval.estimate)
    reason = (
        f"{change:+.1%} ({confidence:.0%} sequence interval "
        f"{_bound(low)} to {_bound(high)}) after {interval.n} round(s)"
    )
    return SequentialComparison(interval.n, change, low, high, verdict, more, reason)


def _verdict(
    interval: SequenceInterval, band: float, reach: float, higher_is_better: bool
) -> ComparisonVerdict:
    if interval.low > band or interval.high < -band:
        better = (interval.estimate > 0) == higher_is_better
        return ComparisonVerdict.IMPROVED if better else ComparisonVerdict.REGRESSED
    if abs(interval.estimate) <= band and max(-interval.low, interval.high) <= reach:
        return ComparisonVerdict.WITHIN_NOISE
    return ComparisonVerdict.NOT_ENOUGH_DATA


def _more(interval: SequenceInterval, band: float, reach: float) -> int | None:
    """Rounds until the interval clears the band (estimate beyond it) or fits inside ±reach."""
    size = abs(interval.estimate)
    margin = size - band if size > band else reach - size
    return rounds_to_reach(interval.sd, margin, interval.n)


@dataclass(frozen=True)
class CellPrecision:
    """A cell's mean (log scale interval) against the precision asked: open while wider."""

    runs: int
    mean: float
    relative_half: float  # inf until two runs
    precision: float
    more_rounds: int | None

    @property
    def decided(self) -> bool:
        return self.relative_half <= self.precision


def cell_precision(
    values: Sequence[float], precision: float, confidence: float = DEFAULT_CONFIDENCE
) -> CellPrecision:
    """Whether the confidence sequence of a cell's geometric mean is within ±precision."""
    interval = sequence_interval(log_values(values), confidence)
    half = math.expm1(interval.half) if math.isfinite(interval.half) else math.inf
    more = None
    if half > precision:
        more = rounds_to_reach(interval.sd, math.log1p(precision), interval.n, confidence)
    return CellPrecision(interval.n, math.exp(interval.estimate), half, precision, more)


def _bound(x: float) -> str:
    return f"{x:+.1%}" if math.isfinite(x) else ("+∞" if x > 0 else "-100%")
