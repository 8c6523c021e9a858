"""A mergeable latency histogram with fixed, global log-linear buckets.

Values are latencies in integer microseconds (0 ≤ v < 2**63). Every histogram uses the same
buckets, so two histograms merge by adding counts, exactly, whatever runs they came from:

* values below 256 have a bucket each (exact);
* above, each power of two [2**k, 2**(k+1)) is split into 128 equal buckets, so a bucket is at
  most 1/128 (0.78 %) of its lower bound wide.

`percentile` takes the nearest rank (`stats.percentile_rank`) over the bucket counts and returns
the middle of the bucket holding that rank, clamped to the exact minimum and maximum. The error
bound: ``|percentile(p) - exact| <= exact / 256`` (0.39 %), and zero below 256 µs. The exact
minimum, maximum and sum are kept too, so `mean` is exact.

Storage is sparse (only non-empty buckets); `to_json` writes bucket numbers delta-encoded.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from pgbenchlab.analysis.stats import percentile_rank

SUB_BUCKET_BITS = 7
SUB_BUCKETS = 1 << SUB_BUCKET_BITS  # buckets per power of two
EXACT_BELOW = 2 * SUB_BUCKETS  # values below this have a bucket of their own
MAX_VALUE = (1 << 63) - 1
FORMAT = "log-linear-1"
# Relative error of `percentile` (see module docstring).
RELATIVE_ERROR_BOUND = Fraction(1, 2 * SUB_BUCKETS)

# Powers of two from EXACT_BELOW up: the number of them <= v is the bucket's shift.
_POWERS = np.array([1 << k for k in range(SUB_BUCKET_BITS + 1, 63)], dtype=np.int64)
_MAX_BUCKET = ((63 - SUB_BUCKET_BITS - 1) << SUB_BUCKET_BITS) + EXACT_BELOW - 1


def bucket_of(value: int) -> int:
    """The bucket number of a value (monotone non-decreasing in value)."""
    if not 0 <= value <= MAX_VALUE:
        raise ValueError(f"latency out of range: {value}")
    shift = max(0, value.bit_length() - SUB_BUCKET_BITS - 1)
    return (shift << SUB_BUCKET_BITS) + (value >> shift)


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """Lowest and highest value (inclusive) of a bucket."""
    if not 0 <= bucket <= _MAX_BUCKET:
        raise ValueError(f"no such bucket: {bucket}")
    shift = max(0, (bucket >> SUB_BUCKET_BITS) - 1)
    low = (bucket - (shift << SUB_BUCKET_BITS)) << shift
    return low, low + (1 << shift) - 1


def bucket_representative(bucket: int) -> int:
    """The value that stands for a bucket: its middle (rounded up)."""
    low, high = bucket_bounds(bucket)
    return low + (high - low + 1) // 2


def buckets_of(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """`bucket_of` over an int64 array (values must be >= 0)."""
    shifts = np.searchsorted(_POWERS, values, side="right").astype(np.int64)
    result: npt.NDArray[np.int64] = (shifts << SUB_BUCKET_BITS) + (values >> shifts)
    return result


@dataclass(frozen=True)
class LatencyHistogram:
    """Counts per bucket (sparse, bucket numbers ascending) plus exact min, max and sum (µs)."""

    buckets: tuple[int, ...] = ()
    counts: tuple[int, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    total: int = 0

    def __post_init__(self) -> None:
        if len(self.buckets) != len(self.counts):
            raise ValueError("buckets and counts differ in length")
        if any(b >= a for a, b in zip(self.buckets[1:], self.buckets, strict=False)):
            raise ValueError("buckets must be strictly ascending")
        if any(c <= 0 for c in self.counts):
            raise ValueError("bucket counts must be positive")
        if not self.buckets:
            if self.minimum is not None or self.maximum is not None or self.total:
                raise ValueError("an empty histogram has no minimum, maximum or total")
            return
        if self.minimum is None or self.maximum is None:
            raise ValueError("a non-empty histogram needs its minimum and maximum")
        if (
            bucket_of(self.minimum) != self.buckets[0]
            or bucket_of(self.maximum) != self.buckets[-1]
        ):
            raise ValueError("minimum/maximum do not fall in the first/last bucket")
        if not self.minimum * self.count <= self.total <= self.maximum * self.count:
            raise ValueError("total is not between count × minimum and count × maximum")

    # Constructors -----------------------------------------------------------------------------

    @classmethod
    def from_values(cls, values: Iterable[int]) -> LatencyHistogram:
        """From individual latencies."""
        return cls.from_arrays(_int64_array(values), None)

    @classmethod
    def from_counts(cls, pairs: Iterable[tuple[int, int]]) -> LatencyHistogram:
        """From exact (value, count) pairs; values may repeat, zero counts are ignored."""
        items = list(pairs)
        values, counts = _int64_array(v for v, _ in items), _int64_array(c for _, c in items)
        return cls.from_arrays(values, counts)

    @classmethod
    def from_arrays(
        cls, values: npt.NDArray[np.int64], counts: npt.NDArray[np.int64] | None
    ) -> LatencyHistogram:
        """From a value array and the matching counts (None: each value once)."""
        values = np.asarray(values, dtype=np.int64)
        counts = np.ones_like(values) if counts is None else np.asarray(counts, dtype=np.int64)
        if values.shape != counts.shape or values.ndim != 1:
            raise ValueError("values and counts must be 1-d arrays of the same length")
        if (counts < 0).any():
            raise ValueError("negative count")
        keep = counts > 0
        values, counts = values[keep], counts[keep]
        if values.size == 0:
            return cls()
        if int(values.min()) < 0:
            raise ValueError(f"latency out of range: {int(values.min())}")
        buckets, inverse = np.unique(buckets_of(values), return_inverse=True)
        per_bucket = np.zeros(buckets.size, dtype=np.int64)
        np.add.at(per_bucket, inverse, counts)
        return cls(
            tuple(buckets.tolist()),
            tuple(per_bucket.tolist()),
            int(values.min()),
            int(values.max()),
            _exact_sum(values, counts),
        )

    # Combination ------------------------------------------------------------------------------

    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        """The histogram of both samples together (exact)."""
        merged: dict[int, int] = dict(zip(self.buckets, self.counts, strict=True))
        for bucket, count in zip(other.buckets, other.counts, strict=True):
            merged[bucket] = merged.get(bucket, 0) + count
        keys = sorted(merged)
        return LatencyHistogram(
            tuple(keys),
            tuple(merged[k] for k in keys),
            _pick(min, self.minimum, other.minimum),
            _pick(max, self.maximum, other.maximum),
            self.total + other.total,
        )

    @classmethod
    def merge_all(cls, histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
        result = cls()
        for histogram in histograms:
            result = result.merge(histogram)
        return result

    # Queries ----------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def mean(self) -> float:
        """Exact mean in µs (from the exact sum)."""
        if not self.counts:
            raise ValueError("mean of an empty histogram")
        return self.total / self.count

    def percentile(self, p: str | int | Fraction) -> int:
        """Nearest-rank p-th percentile in µs, within `RELATIVE_ERROR_BOUND` of the exact one."""
        return self.value_at_rank(percentile_rank(self.count, p))

    def value_at_rank(self, rank: int) -> int:
        """The value (µs) at a 1-based rank of the ascending sample, within
        `RELATIVE_ERROR_BOUND` of the exact one."""
        if not 1 <= rank <= self.count:
            raise ValueError(f"rank {rank} outside 1..{self.count}")
        index = bisect_left(list(accumulate(self.counts)), rank)
        value = bucket_representative(self.buckets[index])
        assert self.minimum is not None and self.maximum is not None
        return min(max(value, self.minimum), self.maximum)

    def bins(self) -> Iterator[tuple[int, int, int]]:
        """(lowest value, highest value, count) of each non-empty bucket, ascending."""
        for bucket, count in zip(self.buckets, self.counts, strict=True):
            low, high = bucket_bounds(bucket)
            yield low, high, count

    # Serialization ----------------------------------------------------------------------------

    def to_json(self) -> str:
        """Compact JSON: bucket numbers as deltas, counts, exact min/max/sum."""
        deltas = [b - a for a, b in zip((0, *self.buckets), self.buckets, strict=False)]
        document = {
            "format": FORMAT,
            "b": deltas,
            "c": list(self.counts),
            "min": self.minimum,
            "max": self.maximum,
            "sum": self.total,
        }
        return json.dumps(document, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> LatencyHistogram:
        """Inverse of `to_json`; ValueError for anything else."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"histogram JSON: {error}") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} histogram")
        deltas = _int_list(document.get("b"))
        buckets = tuple(accumulate(deltas))
        if buckets and not 0 <= buckets[-1] <= _MAX_BUCKET:
            raise ValueError("bucket number out of range")
        return cls(
            buckets,
            tuple(_int_list(document.get("c"))),
            _optional_int(document.get("min")),
            _optional_int(document.get("max")),
            _int(document.get("sum")),
        )


def _int64_array(values: Iterable[int]) -> npt.NDArray[np.int64]:
    try:
        return np.fromiter(values, dtype=np.int64)
    except OverflowError:
        raise ValueError("latency or count beyond 2**63 - 1") from None


def _exact_sum(values: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> int:
    if int(values.max()) * int(counts.sum()) < 1 << 63:  # int64 cannot overflow
        return int(np.dot(values, counts))
    return sum(v * c for v, c in zip(values.tolist(), counts.tolist(), strict=True))


def _pick(choose: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return choose(a, b)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _optional_int(value: object) -> int | None:
    return None if value is None else _int(value)


def _int_list(value: object) -> list[int]:
    if not isinstance(value, list):
        raise ValueError("expected a list of integers")
    return [_int(v) for v in value]
