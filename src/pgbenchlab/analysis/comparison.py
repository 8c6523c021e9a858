"""Baseline against candidate: relative change, confidence interval, significance and verdict.

Every comparison works on the logarithms of run-level values. A multiplicative effect becomes an
additive one, the result does not depend on units, and swapping baseline and candidate only
flips signs. docs/statistics.md gives the method, the defaults and the simulated error rates.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pgbenchlab.analysis.stats import (
    DEFAULT_CV_LIMIT,
    Summary,
    VariationWarning,
    high_variation_warning,
    sample_variance,
    student_t_quantile,
    student_t_sf,
    summarize,
)


class ComparisonVerdict(StrEnum):
    """How a candidate compares with its baseline (a step with the values before it, too)."""

    IMPROVED = "improved"
    REGRESSED = "regressed"
    WITHIN_NOISE = "within_noise"
    NOT_ENOUGH_DATA = "not_enough_data"


# A change smaller than 2 % is not attributed to the server: the instrument itself moves results
# by that much (a per-transaction log costs about 2 % of throughput), as does host drift.
DEFAULT_THRESHOLD = 0.02
DEFAULT_CONFIDENCE = 0.95
# "Within noise" is said only when the interval also excludes changes beyond 10 %.
DEFAULT_RESOLUTION = 0.10
MAX_REPEATS = 1000
# repeats_needed aims at an 80 % chance of a decisive verdict, the usual planning figure.
POWER = 0.80
# Log-scale standard errors below this are rounding, not noise (a relative spread of 1e-9).
_NEGLIGIBLE_SE = 1e-9


@dataclass(frozen=True)
class LogDifference:
    """Welch's estimate of mean(log candidate) - mean(log baseline)."""

    estimate: float
    se: float
    df: float


@dataclass(frozen=True)
class Comparison:
    """The comparison of one matrix cell; relative values are candidate / baseline - 1.

    ``relative_change`` is the ratio of geometric means minus one; ``ci_low``/``ci_high`` bound
    it at ``confidence``; ``p_value`` is Welch's two-sided test on the logarithms. These three
    are None when a side has fewer than two runs. ``repeats_needed`` (runs per side, in total)
    is set when the verdict is not_enough_data and the noise could be estimated.
    """

    baseline: Summary
    candidate: Summary
    higher_is_better: bool
    threshold: float
    confidence: float
    relative_change: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: ComparisonVerdict
    repeats_needed: int | None
    reason: str
    warnings: tuple[VariationWarning, ...]


def compare(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    higher_is_better: bool,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    resolution: float = DEFAULT_RESOLUTION,
    cv_limit: float = DEFAULT_CV_LIMIT,
) -> Comparison:
    """Compare run-level values (all positive) of a candidate with those of a baseline.

    A change (improved/regressed) needs significance at ``1 - confidence`` and the whole
    interval beyond the band of +-``threshold``. Within noise needs the estimate inside that
    band and the interval inside +-``resolution``. Anything else is not enough data.
    """
    rules = _Rules(threshold, confidence, resolution, higher_is_better)
    base_logs, cand_logs = log_values(baseline), log_values(candidate)
    inference = _infer(base_logs, cand_logs, rules)
    return Comparison(
        baseline=summarize(baseline),
        candidate=summarize(candidate),
        higher_is_better=higher_is_better,
        threshold=threshold,
        confidence=confidence,
        relative_change=math.expm1(inference.estimate),
        ci_low=inference.ci_low,
        ci_high=inference.ci_high,
        p_value=inference.p_value,
        verdict=inference.verdict,
        repeats_needed=inference.repeats_needed,
        reason=inference.reason,
        warnings=_warnings((baseline, candidate), cv_limit),
    )


@dataclass(frozen=True)
class _Rules:
    threshold: float
    confidence: float
    resolution: float
    higher_is_better: bool

    def __post_init__(self) -> None:
        if not 0 <= self.threshold < self.resolution:
            raise ValueError(
                f"need 0 <= threshold < resolution, got {self.threshold}, {self.resolution}"
            )
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be between 0 and 1, got {self.confidence}")

    @property
    def band(self) -> float:
        """The threshold on the log scale: symmetric, so swapping sides only flips signs."""
        return math.log1p(self.threshold)

    @property
    def reach(self) -> float:
        return math.log1p(self.resolution)


@dataclass(frozen=True)
class _Inference:
    estimate: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: ComparisonVerdict
    repeats_needed: int | None
    reason: str


def _infer(base_logs: Sequence[float], cand_logs: Sequence[float], rules: _Rules) -> _Inference:
    estimate = statistics.fmean(cand_logs) - statistics.fmean(base_logs)
    sd = pooled_log_sd(base_logs, cand_logs)
    if len(base_logs) < 2 or len(cand_logs) < 2:
        reason = (
            "needs at least 2 runs on each side to estimate the noise "
            f"(baseline {len(base_logs)}, candidate {len(cand_logs)})"
        )
        needed = _repeats_for(sd, estimate, rules)
        return _Inference(
            estimate, None, None, None, ComparisonVerdict.NOT_ENOUGH_DATA, needed, reason
        )
    diff = welch_log_difference(base_logs, cand_logs)
    half = log_half_width(diff, rules.confidence)
    p_value = welch_p_value(diff)
    verdict = decide(
        estimate, half, p_value, rules.band, rules.reach, rules.confidence, rules.higher_is_better
    )
    needed = (
        _repeats_for(sd, estimate, rules) if verdict is ComparisonVerdict.NOT_ENOUGH_DATA else None
    )
    low, high = math.expm1(estimate - half), math.expm1(estimate + half)
    stated = (
        f"{_signed(math.expm1(estimate))} ({rules.confidence:.0%} CI {_signed(low)} to "
        f"{_signed(high)}, p={p_value:.2g})"
    )
    reason = f"{stated}: {_explain(verdict, p_value, needed, rules)}"
    return _Inference(estimate, low, high, p_value, verdict, needed, reason)


def _warnings(samples: Sequence[Sequence[float]], limit: float) -> tuple[VariationWarning, ...]:
    found = (high_variation_warning(values, limit) for values in samples)
    return tuple(w for w in found if w is not None)


def log_values(values: Sequence[float]) -> list[float]:
    """Natural logarithms of run-level values, which must be positive and finite."""
    if not values:
        raise ValueError("no values to compare")
    if not all(0 < v < math.inf for v in values):
        raise ValueError("ratios need positive, finite values")
    return [math.log(v) for v in values]


def welch_log_difference(base_logs: Sequence[float], cand_logs: Sequence[float]) -> LogDifference:
    """Difference of mean logs with Welch's standard error and Welch–Satterthwaite df."""
    share_b = sample_variance(base_logs) / len(base_logs)
    share_c = sample_variance(cand_logs) / len(cand_logs)
    estimate = statistics.fmean(cand_logs) - statistics.fmean(base_logs)
    se = math.sqrt(share_b + share_c)
    if se < _NEGLIGIBLE_SE:  # identical runs: a difference as small as that is rounding too
        return LogDifference(estimate if abs(estimate) >= _NEGLIGIBLE_SE else 0.0, 0.0, math.inf)
    df = (share_b + share_c) ** 2 / (
        share_b**2 / (len(base_logs) - 1) + share_c**2 / (len(cand_logs) - 1)
    )
    return LogDifference(estimate, se, df)


def log_half_width(diff: LogDifference, confidence: float) -> float:
    """Half-width of the two-sided t interval around ``diff.estimate``."""
    if diff.se == 0:
        return 0.0
    return student_t_quantile(0.5 + confidence / 2, diff.df) * diff.se


def welch_p_value(diff: LogDifference) -> float:
    """Two-sided p-value of 'no difference of mean logs'."""
    if diff.se == 0:
        return 1.0 if diff.estimate == 0 else 0.0
    return min(1.0, 2 * student_t_sf(abs(diff.estimate) / diff.se, diff.df))


def decide(
    estimate: float,
    half: float,
    p_value: float,
    band: float,
    reach: float,
    confidence: float,
    higher_is_better: bool,
) -> ComparisonVerdict:
    """The verdict from log-scale estimate, interval half-width, p-value and bands."""
    if p_value < 1 - confidence and abs(estimate) - half > band:
        return (
            ComparisonVerdict.IMPROVED
            if (estimate > 0) == higher_is_better
            else ComparisonVerdict.REGRESSED
        )
    if abs(estimate) <= band and abs(estimate) + half <= reach:
        return ComparisonVerdict.WITHIN_NOISE
    return ComparisonVerdict.NOT_ENOUGH_DATA


def pooled_log_sd(base_logs: Sequence[float], cand_logs: Sequence[float]) -> float | None:
    """Standard deviation of logs pooled over both sides (about the CV); None without repeats."""
    parts = [(len(x) - 1, sample_variance(x)) for x in (base_logs, cand_logs) if len(x) >= 2]
    if not parts:
        return None
    dof = sum(d for d, _ in parts)
    return math.sqrt(sum(d * v for d, v in parts) / dof)


def _repeats_for(sd: float | None, estimate: float, rules: _Rules) -> int | None:
    """Runs per side for a decisive verdict in ``POWER`` of campaigns, if estimate and noise hold.

    An estimate beyond the band needs the interval to clear the band. One inside it needs the
    interval to fit inside +-resolution and the estimate to stay inside the band.
    """
    if sd is None:
        return None
    size, level = abs(estimate), 0.5 + rules.confidence / 2
    if size > rules.band:
        return _smallest_n(sd, size - rules.band, (level, POWER))
    fits = _smallest_n(sd, rules.reach - size, (level, POWER))
    stays = _smallest_n(sd, rules.band - size, (0.5 + POWER / 2,))
    return max(fits, stays)


def repeats_for_margin(sd: float, margin: float, confidence: float, power: float = POWER) -> int:
    """Runs per side that put the interval past a boundary ``margin`` away with chance ``power``.

    The usual sample-size rule, with t quantiles: the smallest n with
    (t(1 - a/2, 2n - 2) + t(power, 2n - 2)) * sd * sqrt(2/n) <= margin, ``sd`` on the log scale.
    """
    return _smallest_n(sd, margin, (0.5 + confidence / 2, power))


def _smallest_n(sd: float, margin: float, levels: tuple[float, ...]) -> int:
    """Smallest n >= 2 with sum of t(level, 2n - 2) * sd * sqrt(2/n) <= margin (capped)."""
    if sd == 0:
        return 2
    if margin <= 0:
        return MAX_REPEATS
    z = sum(statistics.NormalDist().inv_cdf(level) for level in levels)
    ratio = z * sd / margin
    if ratio > math.sqrt(MAX_REPEATS / 2):  # beyond the cap already (and squaring may overflow)
        return MAX_REPEATS
    n = max(2, math.ceil(2 * ratio**2))  # t > z, so never more than needed

    def reach(k: int) -> float:
        t = sum(student_t_quantile(level, 2 * k - 2) for level in levels)
        return t * sd * math.sqrt(2 / k)

    while n < MAX_REPEATS and reach(n) > margin:
        n += 1
    return min(n, MAX_REPEATS)


def _signed(x: float) -> str:
    return f"{x:+.1%}"


def _explain(verdict: ComparisonVerdict, p_value: float, needed: int | None, rules: _Rules) -> str:
    if verdict in (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED):
        better = "higher" if rules.higher_is_better else "lower"
        return f"beyond the {rules.threshold:.0%} threshold, {better} is better"
    if verdict is ComparisonVerdict.WITHIN_NOISE:
        small = ", a significant but negligible change" if p_value < 1 - rules.confidence else ""
        return (
            f"inside the {rules.threshold:.0%} threshold{small}; "
            f"changes beyond {rules.resolution:.0%} are ruled out"
        )
    if needed is not None and needed >= MAX_REPEATS:
        return "inconclusive; the estimate sits too close to the threshold to resolve"
    return f"inconclusive; about {needed} runs per side would decide it"
