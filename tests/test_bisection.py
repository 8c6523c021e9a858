"""The bisection's decisions against oracles whose first bad commit is known."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgbenchlab.analysis.bisection import (
    BisectionAnswer,
    CommitOutcome,
    CommitProbe,
    classify,
    next_probe,
    steps_needed,
)
from pgbenchlab.analysis.comparison import ComparisonVerdict, compare

Oracle = Callable[[int], CommitProbe]


def search(count: int, oracle: Oracle) -> tuple[BisectionAnswer, list[CommitProbe]]:
    probes: list[CommitProbe] = []
    while not isinstance(step := next_probe(count, probes), BisectionAnswer):
        assert all(p.index != step for p in probes), "a position measured twice"
        probes.append(oracle(step))
    return step, probes


def step_at(first_bad: int) -> Oracle:
    return lambda i: CommitProbe(i, CommitOutcome.BAD if i >= first_bad else CommitOutcome.GOOD)


@given(st.integers(2, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))))
def test_finds_the_first_bad_commit_in_log2_steps(case: tuple[int, int]) -> None:
    count, first_bad = case
    answer, probes = search(count, step_at(first_bad))
    assert answer.first_bad == first_bad
    assert answer.unsplit == ()
    assert len(probes) <= steps_needed(count)


@given(
    st.integers(4, 60).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(1, n - 1), st.sets(st.integers(1, n - 2)))
    )
)
def test_skipped_commits_leave_the_range_that_could_not_be_split(
    case: tuple[int, int, set[int]],
) -> None:
    count, first_bad, broken = case

    def oracle(i: int) -> CommitProbe:
        return CommitProbe(i, CommitOutcome.SKIPPED) if i in broken else step_at(first_bad)(i)

    answer, _ = search(count, oracle)
    assert answer.bracket.good < first_bad <= answer.bracket.bad
    if answer.first_bad is None:
        inside = answer.unsplit[:-1]
        assert inside and all(i in broken for i in inside)
        assert answer.unsplit[-1] == answer.bracket.bad
    else:
        assert answer.first_bad == first_bad


def test_a_commit_between_the_ends_counts_for_the_end_it_is_nearer_to() -> None:
    # Two changes: 30 % of the slowdown at position 3, 70 % at position 7. The search follows
    # the larger part and reports the commit in the middle as neither.
    def oracle(i: int) -> CommitProbe:
        if i < 3:
            return CommitProbe(i, CommitOutcome.GOOD, 0.0)
        if i < 7:
            return CommitProbe(i, CommitOutcome.NEITHER, 0.3)
        return CommitProbe(i, CommitOutcome.BAD, 1.0)

    answer, probes = search(11, oracle)
    assert answer.first_bad == 7
    assert any(p.outcome == CommitOutcome.NEITHER for p in probes)


def test_undecided_probes_do_not_move_the_bracket() -> None:
    assert next_probe(9, [CommitProbe(4, CommitOutcome.UNDECIDED)]) == 4


@pytest.mark.parametrize(
    ("candidate", "outcome"),
    [
        ([100, 101, 99, 100, 100], CommitOutcome.GOOD),
        ([80, 81, 79, 80, 80], CommitOutcome.BAD),
        ([90, 91, 89, 90, 90], CommitOutcome.NEITHER),
        ([100, 60, 130, 80, 110], CommitOutcome.UNDECIDED),
    ],
)
def test_a_commit_is_classified_by_both_comparisons(
    candidate: list[float], outcome: CommitOutcome
) -> None:
    good, bad = [100.0, 100.5, 99.5, 100.2, 99.8], [80.0, 80.4, 79.6, 80.2, 79.8]
    probe = classify(
        compare(good, candidate, higher_is_better=True, threshold=0.03),
        compare(bad, candidate, higher_is_better=True, threshold=0.03),
    )
    assert probe.outcome == outcome
    if outcome == CommitOutcome.NEITHER:
        assert probe.position is not None and 0.4 < probe.position < 0.6


@dataclass(frozen=True)
class Judged:
    verdict: ComparisonVerdict
    relative_change: float
    ci_low: float | None
    ci_high: float | None


def test_an_interval_reaching_minus_100_percent_places_the_commit_without_failing() -> None:
    # Two rounds of a 97 % slowdown: the interval's lower bound underflows to -100 %.
    against_good = Judged(ComparisonVerdict.NOT_ENOUGH_DATA, -0.02, -1.0, 40.0)
    against_bad = Judged(ComparisonVerdict.REGRESSED, -0.97, -1.0, -0.9)
    assert classify(against_good, against_bad).outcome == CommitOutcome.UNDECIDED
    like_bad = Judged(ComparisonVerdict.REGRESSED, -0.97, -1.0, -0.9)
    same_as_bad = Judged(ComparisonVerdict.WITHIN_NOISE, 0.0, -0.01, 0.01)
    assert classify(like_bad, same_as_bad).outcome == CommitOutcome.BAD


def test_steps_needed() -> None:
    assert [steps_needed(n) for n in (1, 2, 3, 5, 33)] == [0, 0, 1, 2, 5]
