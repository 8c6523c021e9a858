from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgbenchlab.analysis.stats import percentile_of_sorted, percentile_rank


def test_rank_is_exact_where_floating_point_is_not() -> None:
    # 99.9/100 * 1000 is 999.0000000000001 in binary floating point: ceil gives 1000, not 999.
    assert percentile_rank(1000, "99.9") == 999
    assert percentile_rank(1000, "50") == 500
    assert percentile_rank(1, "99.9") == 1
    assert percentile_rank(3, "50") == 2


def test_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile_rank(0, "50")
    with pytest.raises(ValueError):
        percentile_rank(10, "0")
    with pytest.raises(ValueError):
        percentile_rank(10, "100.1")


@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=500),
    st.sampled_from(["50", "90", "99", "99.9", "100"]),
)
def test_nearest_rank_definition(values: list[int], p: str) -> None:
    ordered = sorted(values)
    result = percentile_of_sorted(ordered, p)
    share = Fraction(p) / 100
    # At least p % of samples are <= the result, and fewer than p % are strictly below it.
    assert sum(v <= result for v in ordered) >= share * len(ordered)
    assert sum(v < result for v in ordered) < share * len(ordered)
