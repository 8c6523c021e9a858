"""Change points in ordered series of run-level values, on synthetic series with fixed seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgbenchlab.analysis.changepoints import change_points, smallest_p_value
from pgbenchlab.analysis.comparison import ComparisonVerdict

Series = list[tuple[str, list[float]]]


def _series(
    rng: np.random.Generator, points: int, runs: int, cv: float, steps: dict[int, float]
) -> Series:
    """Points v0, v1, ... whose level is multiplied by steps[i] from point i on."""
    sigma = math.sqrt(math.log1p(cv * cv))
    level, out = 20_000.0, []
    for i in range(points):
        level *= steps.get(i, 1.0)
        out.append((f"v{i}", (level * np.exp(rng.normal(0, sigma, runs))).tolist()))
    return out


def test_a_step_is_found_where_it_happened() -> None:
    series = _series(np.random.default_rng(3), 8, 3, 0.06, {5: 1.2})
    (point,) = change_points(series, higher_is_better=True)
    assert (point.index, point.label, point.previous_label) == (5, "v5", "v4")
    assert point.verdict is ComparisonVerdict.IMPROVED
    assert point.ci_low < 0.2 < point.ci_high
    assert point.relative_step == pytest.approx(point.after / point.before - 1)
    assert point.p_value < 0.01


def test_latency_going_up_is_a_regression() -> None:
    series = _series(np.random.default_rng(4), 6, 4, 0.06, {2: 1.3})
    (point,) = change_points(series, higher_is_better=False)
    assert point.index == 2 and point.relative_step > 0
    assert point.verdict is ComparisonVerdict.REGRESSED


def test_a_regression_and_its_fix_are_both_found() -> None:
    series = _series(np.random.default_rng(5), 12, 3, 0.06, {4: 0.75, 8: 1 / 0.75})
    points = change_points(series, higher_is_better=True)
    assert [(p.index, p.verdict) for p in points] == [
        (4, ComparisonVerdict.REGRESSED),
        (8, ComparisonVerdict.IMPROVED),
    ]


def test_flat_noisy_series_rarely_show_a_step() -> None:
    rng = np.random.default_rng(6)
    shapes = [(8, 3, 0.06), (8, 3, 0.14), (20, 1, 0.06), (12, 5, 0.14)]
    for points, runs, cv in shapes:
        alarms = sum(
            bool(change_points(_series(rng, points, runs, cv, {}), higher_is_better=True, seed=i))
            for i in range(300)
        )
        assert alarms / 300 <= 0.05, (points, runs, cv)


def test_known_steps_are_located_with_the_right_sign() -> None:
    rng = np.random.default_rng(8)
    for step, at in [(1.15, 5), (1 / 1.15, 3)]:
        hits = 0
        for i in range(200):
            series = _series(rng, 8, 3, 0.06, {at: step})
            found = change_points(series, higher_is_better=True, seed=i)
            hits += any(p.index == at and (p.relative_step > 0) == (step > 1) for p in found)
        assert hits / 200 >= 0.80, step


def test_every_step_reported_clears_the_band() -> None:
    # Weak steps around a regression and its fix: the kind a later split used to leave behind.
    rng = np.random.default_rng(10)
    band = math.log1p(0.02)
    for i in range(100):
        series = _series(rng, 12, 3, 0.06, {4: 0.9, 8: 1 / 0.9})
        for p in change_points(series, higher_is_better=True, seed=i):
            assert math.log1p(p.ci_low) > band or math.log1p(p.ci_high) < -band, p


def test_nothing_to_split() -> None:
    assert change_points([], higher_is_better=True) == []
    assert change_points([("only", [1.0, 2.0, 3.0])], higher_is_better=True) == []
    assert change_points([("a", [5.0]), ("b", [5.0]), ("c", [5.0])], higher_is_better=True) == []
    with pytest.raises(ValueError):
        change_points([("a", [1.0]), ("b", [])], higher_is_better=True)


def test_the_smallest_p_value_bounds_what_a_series_can_show() -> None:
    # Two points of 3 runs: 2 of the 20 splits separate them (docs/statistics.md, §4.1).
    assert smallest_p_value([3, 3]) == pytest.approx((1 + 999 * 2 / 20) / 1000)
    assert smallest_p_value([3, 3, 3]) > 0.01 > smallest_p_value([4, 4, 4])
    assert smallest_p_value([5]) == smallest_p_value([1, 1]) == 1.0
    # A step with no noise at all: found exactly where the bound allows it.
    clear = [("a", [100.0, 101.0, 99.0, 100.5]), ("b", [10.0, 10.1, 9.9, 10.05])]
    assert change_points([*clear, ("c", [10.0, 10.2, 9.8, 10.1])], higher_is_better=True)
    shorter = [(label, runs[:3]) for label, runs in [*clear, ("c", [10.0, 10.2, 9.8])]]
    assert change_points(shorter, higher_is_better=True) == []


def test_same_seed_same_answer() -> None:
    series = _series(np.random.default_rng(9), 10, 2, 0.14, {6: 1.4})
    assert change_points(series, higher_is_better=True, seed=1) == change_points(
        series, higher_is_better=True, seed=1
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(1e-3, 1e3), st.sampled_from([0.7, 1.0, 1.3]))
def test_units_do_not_matter(seed: int, factor: float, step: float) -> None:
    series = _series(np.random.default_rng(seed), 7, 3, 0.06, {3: step})
    scaled = [(label, [v * factor for v in values]) for label, values in series]
    plain = change_points(series, higher_is_better=True)
    other = change_points(scaled, higher_is_better=True)
    assert [p.index for p in plain] == [p.index for p in other]
    for a, b in zip(plain, other, strict=True):
        assert b.relative_step == pytest.approx(a.relative_step, rel=1e-6, abs=1e-9)
        assert b.after == pytest.approx(a.after * factor, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_reversing_the_series_mirrors_the_steps(seed: int) -> None:
    series = _series(np.random.default_rng(seed), 8, 3, 0.06, {5: 1.25})
    forward = change_points(series, higher_is_better=True)
    backward = change_points(series[::-1], higher_is_better=True)
    # The permutations differ, so only clear steps are compared; a step's size is measured
    # between its neighbouring change points, so it mirrors exactly only when they all do.
    clear = [p for p in forward if p.p_value <= 0.002]
    mirrored = {len(series) - p.index: p for p in backward}
    same_points = set(mirrored) == {p.index for p in forward}
    for p in clear:
        if p.index in mirrored:
            q = mirrored[p.index]
            assert q.verdict is not p.verdict and (q.relative_step < 0) != (p.relative_step < 0)
            if same_points:
                assert math.log1p(q.relative_step) == pytest.approx(-math.log1p(p.relative_step))
