"""Statistics as pure functions.

Percentiles use one definition everywhere in pgbenchlab: the *nearest-rank* method. For ``n``
sorted samples the p-th percentile is the sample at 1-based rank ``ceil(p/100 * n)`` (at least
1). The rank is computed with exact rational arithmetic, because ``99.9/100`` in binary floating
point shifts the rank by one for some ``n``.

Besides percentiles: summaries of run-level values (one value per run), a warning when runs vary
too much, and Student's t distribution for the intervals and tests in ``comparison`` and
``changepoints``. docs/statistics.md describes every method.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

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
# Student's t distribution (no SciPy): tail probability through the regularized incomplete beta
# function, quantile by safeguarded Newton iteration. Welch's test needs non-integer degrees of
# freedom, so tables will not do.

_LENTZ_FLOOR = 1e-300
_LENTZ_EPS = 1e-15
_LENTZ_MAX_STEPS = 10_000
_NORMAL_DF = 1e7  # beyond this the t distribution is the normal one to double precision


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` > 0 degrees of freedom."""
    if df <= 0 or math.isnan(t):
        raise ValueError(f"need df > 0 and a number, got t={t}, df={df}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    if df > _NORMAL_DF:
        return 1.0 - statistics.NormalDist().cdf(t)
    square = t * t
    # 0.5 * I_x(df/2, 1/2) with x = df / (df + t^2) is the two-sided tail split in half.
    half_tail = 0.5 * _regularized_beta(df / 2, 0.5, df / (df + square), square / (df + square))
    return half_tail if t >= 0 else 1.0 - half_tail


def student_t_pdf(t: float, df: float) -> float:
    """Density of Student's t with ``df`` degrees of freedom."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)  # planning repeats asks for the same integer df repeatedly
def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for 0 < p < 1 and ``df`` > 0."""
    if not 0 < p < 1 or df <= 0:
        raise ValueError(f"need 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    z = statistics.NormalDist().inv_cdf(p)
    if df > _NORMAL_DF:
        return z
    return _solve_upper_tail(1.0 - p, df, _cornish_fisher(z, df))


def _cornish_fisher(z: float, df: float) -> float:
    """A first guess of the t quantile from the normal one (good for df >= 3)."""
    z3, z5 = z**3, z**5
    return z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df * df)


def _solve_upper_tail(tail: float, df: float, guess: float) -> float:
    """The t > 0 with P(T > t) = tail: Newton steps kept inside a shrinking bracket."""
    low, high = 0.0, max(guess, 1.0)
    while student_t_sf(high, df) > tail:
        low, high = high, high * 2
    t = min(max(guess, low), high)
    for _ in range(200):
        excess = student_t_sf(t, df) - tail  # positive while t is below the answer
        if excess > 0:
            low = t
        else:
            high = t
        step = excess / student_t_pdf(t, df)
        candidate = t + step
        if not low < candidate < high:
            candidate = (low + high) / 2
        if abs(candidate - t) <= 1e-13 * max(1.0, t):
            return candidate
        t = candidate
    return t


def _regularized_beta(a: float, b: float, x: float, y: float) -> float:
    """I_x(a, b) with y = 1 - x passed separately so that neither loses precision."""
    if x <= 0:
        return 0.0
    if y <= 0:
        return 1.0
    # The continued fraction converges fast only below the mean of the beta distribution;
    # above it use the symmetry I_x(a, b) = 1 - I_y(b, a).
    if x < (a + 1) / (a + b + 2):
        return _beta_prefactor(a, b, x, y) * _beta_fraction(a, b, x) / a
    return 1.0 - _beta_prefactor(b, a, y, x) * _beta_fraction(b, a, y) / b


def _beta_prefactor(a: float, b: float, x: float, y: float) -> float:
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return math.exp(a * math.log(x) + b * math.log(y) - log_beta)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function, by the modified Lentz method.

    The fraction is 1 / (1 + d1 / (1 + d2 / (1 + ...))) with
    d(2m) = m (b - m) x / ((a + 2m - 1)(a + 2m)) and
    d(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    """
    floor = _LENTZ_FLOOR
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > floor else floor)
    value = d
    for m in range(1, _LENTZ_MAX_STEPS):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for term in (even, odd):
            d = 1.0 + term * d
            d = 1.0 / (d if abs(d) > floor else floor)
            c = 1.0 + term / c
            c = c if abs(c) > floor else floor
            value *= c * d
        if abs(c * d - 1.0) < _LENTZ_EPS:
            break
    return value
