"""Statistics as pure functions.

Percentiles use one definition everywhere in pgbenchlab: the *nearest-rank* method. For ``n``
sorted samples the p-th percentile is the sample at 1-based rank ``ceil(p/100 * n)`` (at least
1). The rank is computed with exact rational arithmetic, because ``99.9/100`` in binary floating
point shifts the rank by one for some ``n``.

Besides percentiles: summaries of run-level values (one value per run), a warning when runs vary
too much, and Student's t distribution (SciPy's) for the intervals and tests in
``comparison`` and ``changepoints``. docs/statistics.md describes every method.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from scipy import stats as scipy_stats

# The percentiles stored for every run, as exact decimal strings.
STANDARD_PERCENTILES: tuple[str, ...] = ("50", "90", "95", "99", "99.9")


def percentile_rank(n: int, p: str | int | Fraction) -> int:
    """1-based nearest rank of the p-th percentile among n samples (n >= 1, 0 < p <= 100)."""
    if n < 1:
        raise ValueError("percentile of an empty sample")
    fraction = Fraction(p) if not isinstance(p, Fraction) else p
    if not 0 < fraction <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {p}")
    numerator = fraction.numerator * n
    denominator = fraction.denominator * 100
    rank = -(-numerator // denominator)  # ceiling division on integers
    return max(1, rank)


def percentile_of_sorted(values: Sequence[float], p: str | int | Fraction) -> float:
    """The p-th percentile (nearest rank) of values already sorted ascending."""
    return values[percentile_rank(len(values), p) - 1]


# ---------------------------------------------------------------------------------------------
# Run-level summaries. The unit of evidence is the run (per-second samples are autocorrelated),
# so these functions take one value per run: a run's TPS, mean latency, or one of its percentiles.


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of run-level values.

    ``stddev`` is the sample standard deviation (n - 1); it and ``cv`` are None for a single run.
    ``geomean`` is None when a value is not positive. ``median`` is the usual midpoint (the mean
    of the two middle runs for even n); it is a summary of a few runs, not a latency percentile.
    """

    n: int
    mean: float
    median: float
    stddev: float | None
    cv: float | None
    geomean: float | None
    min: float
    max: float


def summarize(values: Sequence[float]) -> Summary:
    """Summary of run-level values (at least one, all finite)."""
    data = _finite(values)
    n = len(data)
    mean = math.fsum(data) / n
    stddev = math.sqrt(sample_variance(data)) if n >= 2 else None
    cv = stddev / abs(mean) if stddev is not None and mean != 0 else None
    positive = all(v > 0 for v in data)
    geomean = math.exp(math.fsum(math.log(v) for v in data) / n) if positive else None
    return Summary(n, mean, statistics.median(data), stddev, cv, geomean, min(data), max(data))


def sample_variance(values: Sequence[float]) -> float:
    """Unbiased sample variance (n - 1) in floating point, for two or more values."""
    if len(values) < 2:
        raise ValueError("variance needs at least two values")
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _finite(values: Sequence[float]) -> list[float]:
    data = [float(v) for v in values]
    if not data:
        raise ValueError("no values to summarize")
    if not all(math.isfinite(v) for v in data):
        raise ValueError("values must be finite numbers")
    return data


# Between-run CV measured here is about 6 % (read-write) and 14 % (select-only); above 10 % a
# few repeats cannot resolve changes of a few per cent, which the user should hear about.
DEFAULT_CV_LIMIT = 0.10


@dataclass(frozen=True)
class VariationWarning:
    """Runs of one configuration vary more than ``limit``; ``message`` says what to do."""

    n: int
    cv: float
    limit: float
    message: str


def high_variation_warning(
    values: Sequence[float], limit: float = DEFAULT_CV_LIMIT
) -> VariationWarning | None:
    """A warning when the coefficient of variation between runs exceeds ``limit``."""
    summary = summarize(values)
    if summary.cv is None or summary.cv <= limit:
        return None
    message = (
        f"high variation between runs: CV {summary.cv:.1%} over {summary.n} runs exceeds "
        f"{limit:.0%}; add repeats, interleave configurations, or quieten the host"
    )
    return VariationWarning(summary.n, summary.cv, limit, message)


# ---------------------------------------------------------------------------------------------
# Student's t distribution, from SciPy. Welch's test needs non-integer degrees of freedom, so
# tables will not do.


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` > 0 degrees of freedom."""
    if df <= 0 or math.isnan(t):
        raise ValueError(f"need df > 0 and a number, got t={t}, df={df}")
    return float(scipy_stats.t.sf(t, df))


@functools.lru_cache(maxsize=4096)  # planning repeats asks for the same integer df repeatedly
def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for 0 < p < 1 and ``df`` > 0."""
    if not 0 < p < 1 or df <= 0:
        raise ValueError(f"need 0 < p < 1 and df > 0, got p={p}, df={df}")
    return float(scipy_stats.t.ppf(p, df))
