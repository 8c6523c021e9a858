"""Latency histograms for display: the stored buckets regrouped into coarser, exact bins.

A stored histogram (`pgbenchlab.analysis.histogram`) has 128 buckets per power of two: hundreds of
non-empty buckets per run, too many to draw or to embed a thousand times. Display bins split
each power of two into 8 equal parts (single microseconds below 8 µs). Every stored bucket lies
inside one display bin, because its width divides the display bin's and its start is a
multiple of its width: the display counts are exact sums, never estimates, and the CDF at every
display bin edge is exact.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pgbenchlab.analysis.histogram import SUB_BUCKET_BITS, LatencyHistogram
from pgbenchlab.report.views.model import HistogramView

DISPLAY_BITS = 3  # 2**3 = 8 display bins per power of two
US_PER_MS = 1000.0
Ints = npt.NDArray[np.int64]


def display_bin(value_us: int) -> tuple[int, int]:
    """The display bin [start, end) in µs holding a value."""
    if value_us < 1 << DISPLAY_BITS:
        return value_us, value_us + 1
    shift = value_us.bit_length() - 1 - DISPLAY_BITS
    start = (value_us >> shift) << shift
    return start, start + (1 << shift)


def stored_lows(buckets: Ints) -> Ints:
    """The lowest value of each stored bucket (`histogram.bucket_bounds`, for arrays)."""
    shift = np.maximum(0, (buckets >> SUB_BUCKET_BITS) - 1)
    lows: Ints = (buckets - (shift << SUB_BUCKET_BITS)) << shift
    return lows


def display_starts(values: Ints) -> tuple[Ints, Ints]:
    """`display_bin` for arrays: (starts, widths)."""
    safe = np.maximum(values, 1)
    bits = np.floor(np.log2(safe.astype(np.float64))).astype(np.int64)
    bits -= (np.left_shift(1, bits) > safe).astype(np.int64)  # float rounding near 2**k
    bits += (np.left_shift(1, bits + 1) <= safe).astype(np.int64)
    shift = np.maximum(0, bits - DISPLAY_BITS)
    starts: Ints = np.where(values < 1 << DISPLAY_BITS, values, (values >> shift) << shift)
    widths: Ints = np.where(values < 1 << DISPLAY_BITS, 1, np.left_shift(1, shift))
    return starts, widths


def display_histogram(histogram: LatencyHistogram) -> HistogramView | None:
    """The histogram on display bins, in ms; None when it is empty."""
    if not histogram.buckets:
        return None
    lows = stored_lows(np.asarray(histogram.buckets, dtype=np.int64))
    starts, widths = display_starts(lows)
    unique, first, inverse = np.unique(starts, return_index=True, return_inverse=True)
    counts = np.zeros(unique.size, dtype=np.int64)
    np.add.at(counts, inverse, np.asarray(histogram.counts, dtype=np.int64))  # exact sums
    ends = unique + widths[first]
    return HistogramView(
        tuple((unique / US_PER_MS).tolist()),
        tuple((ends / US_PER_MS).tolist()),
        tuple(counts.tolist()),
    )
