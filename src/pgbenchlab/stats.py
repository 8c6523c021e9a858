"""Statistics as pure functions.

Percentiles use one definition everywhere in pgbenchlab: the *nearest-rank* method. For ``n``
sorted samples the p-th percentile is the sample at 1-based rank ``ceil(p/100 * n)`` (at least
1). The rank is computed with exact rational arithmetic, because ``99.9/100`` in binary floating
point shifts the rank by one for some ``n``.
"""

from __future__ import annotations

from collections.abc import Sequence
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
