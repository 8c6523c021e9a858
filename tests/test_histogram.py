"""LatencyHistogram: fixed global buckets, exact merges, bounded percentile error, JSON."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgbenchlab.analysis.histogram import (
    MAX_VALUE,
    RELATIVE_ERROR_BOUND,
    LatencyHistogram,
    bucket_bounds,
    bucket_of,
    buckets_of,
)
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_of_sorted

# Latencies as pgbench logs them: integer µs, mostly small, sometimes huge.
latencies = st.one_of(st.integers(0, 5_000), st.integers(0, 10**10), st.integers(0, MAX_VALUE))
samples = st.lists(latencies, min_size=1, max_size=300)
percentiles = st.sampled_from([*STANDARD_PERCENTILES, "1", "25", "99.99", "100"])


@given(latencies)
def test_every_value_lies_in_its_bucket_and_buckets_are_narrow(value: int) -> None:
    low, high = bucket_bounds(bucket_of(value))
    assert low <= value <= high
    if value < 256:
        assert low == high == value
    else:
        assert Fraction(high - low + 1, low) <= Fraction(1, 128)  # ≤ 0.78 % wide


def test_buckets_tile_the_range_without_gaps() -> None:
    previous_high = -1
    for bucket in range(bucket_of(10**10) + 1):
        low, high = bucket_bounds(bucket)
        assert low == previous_high + 1
        previous_high = high
    assert bucket_of(MAX_VALUE) == bucket_of(MAX_VALUE - 1)
    with pytest.raises(ValueError):
        bucket_of(-1)
    with pytest.raises(ValueError):
        bucket_of(MAX_VALUE + 1)


@given(st.lists(latencies, max_size=200))
def test_array_and_scalar_bucket_numbers_agree(values: list[int]) -> None:
    found = buckets_of(np.array(values, dtype=np.int64)).tolist()
    assert found == [bucket_of(v) for v in values]


@given(samples, percentiles)
def test_percentile_error_is_bounded(values: list[int], p: str) -> None:
    exact = percentile_of_sorted(sorted(values), p)
    found = LatencyHistogram.from_values(values).percentile(p)
    assert abs(found - exact) <= exact * RELATIVE_ERROR_BOUND
    if exact < 256:
        assert found == exact


@given(samples)
def test_exact_extremes_and_mean(values: list[int]) -> None:
    histogram = LatencyHistogram.from_values(values)
    assert histogram.count == len(values)
    assert (histogram.minimum, histogram.maximum) == (min(values), max(values))
    assert histogram.total == sum(values)
    assert histogram.mean == sum(values) / len(values)
    assert histogram.percentile("100") <= max(values)
    assert histogram.percentile("1") >= min(values)


@given(st.lists(samples, min_size=1, max_size=4))
def test_merge_is_the_histogram_of_the_union(parts: list[list[int]]) -> None:
    merged = LatencyHistogram.merge_all(LatencyHistogram.from_values(p) for p in parts)
    assert merged == LatencyHistogram.from_values([v for p in parts for v in p])


@given(samples, samples, samples)
def test_merge_is_commutative_and_associative(a: list[int], b: list[int], c: list[int]) -> None:
    x, y, z = (LatencyHistogram.from_values(v) for v in (a, b, c))
    assert x.merge(y) == y.merge(x)
    assert x.merge(y).merge(z) == x.merge(y.merge(z))
    assert x.merge(LatencyHistogram()) == x


@given(st.lists(st.tuples(latencies, st.integers(0, 10**12)), max_size=50))
def test_value_count_pairs_equal_repeated_values(pairs: list[tuple[int, int]]) -> None:
    histogram = LatencyHistogram.from_counts(pairs)
    assert histogram.count == sum(c for _, c in pairs)
    assert histogram.total == sum(v * c for v, c in pairs)
    small = [(v, c % 5) for v, c in pairs]
    repeated = [v for v, c in small for _ in range(c)]
    assert LatencyHistogram.from_counts(small) == LatencyHistogram.from_values(repeated)


@given(st.lists(latencies, max_size=100))
def test_json_round_trip(values: list[int]) -> None:
    histogram = LatencyHistogram.from_values(values)
    text = histogram.to_json()
    assert LatencyHistogram.from_json(text) == histogram
    assert " " not in text


def test_json_is_compact_for_a_realistic_run() -> None:
    rng = np.random.default_rng(7)
    values = np.round(rng.lognormal(np.log(800), 0.6, 200_000)).astype(np.int64)
    histogram = LatencyHistogram.from_arrays(values, None)
    assert histogram.count == 200_000
    assert len(histogram.to_json()) < 6_000  # a few hundred buckets


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"format":"other"}',
        '{"format":"log-linear-1","b":[1],"c":[1,2],"min":1,"max":1,"sum":1}',
        '{"format":"log-linear-1","b":[1],"c":[0],"min":1,"max":1,"sum":0}',
        '{"format":"log-linear-1","b":[5,-1],"c":[1,1],"min":5,"max":4,"sum":9}',
        '{"format":"log-linear-1","b":[1],"c":[1],"min":1,"max":1,"sum":"1"}',
        '{"format":"log-linear-1","b":[99999],"c":[1],"min":1,"max":1,"sum":1}',
        '{"format":"log-linear-1","b":[3],"c":[1],"min":1,"max":1,"sum":1}',
    ],
)
def test_from_json_rejects_what_to_json_never_writes(text: str) -> None:
    with pytest.raises(ValueError):
        LatencyHistogram.from_json(text)


def test_empty_histogram() -> None:
    empty = LatencyHistogram.from_values([])
    assert empty == LatencyHistogram() and empty.count == 0
    assert json.loads(empty.to_json())["b"] == []
    with pytest.raises(ValueError):
        empty.percentile("50")
    with pytest.raises(ValueError):
        _ = empty.mean


def test_out_of_range_inputs_are_value_errors() -> None:
    for bad in ([-1], [MAX_VALUE + 1]):
        with pytest.raises(ValueError):
            LatencyHistogram.from_values(bad)
    with pytest.raises(ValueError):
        LatencyHistogram.from_counts([(5, -1)])


def test_known_values() -> None:
    histogram = LatencyHistogram.from_counts([(100, 50), (1000, 45), (250_000, 5)])
    assert histogram.percentile("50") == 100  # exact below 256 µs
    assert histogram.percentile("90") == 1002  # middle of the bucket [1000, 1003]
    assert histogram.percentile("99") == 250_000  # clamped to the exact maximum
    assert [count for _, _, count in histogram.bins()] == [50, 45, 5]
