"""A performance bisection's decisions: which commit to measure next, what a measured commit
is like, and the answer. Pure: commits are positions 0 … n-1 along the first-parent history,
0 the good end and n-1 the bad end; measuring them is someone else's job.

A commit is classified by two comparisons made in the same interleaved rounds: against the
good end and against the bad end. "Like good" is within noise of good and changed against bad,
"like bad" the reverse. A commit changed against both lies between the ends or elsewhere
("neither"): it is reported, and the search goes on in the part of the range that holds the
larger share of the change, i.e. as if it were like the end it is nearer to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pgbenchlab.analysis.comparison import Comparison, ComparisonVerdict

_CHANGED = (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED)


class Outcome(StrEnum):
    """What a measured commit turned out to be."""

    GOOD = "like good"
    BAD = "like bad"
    NEITHER = "neither"
    SKIPPED = "skipped"  # did not build or start: no figure
    UNDECIDED = "undecided"  # more runs are needed


@dataclass(frozen=True)
class Probe:
    """One measured (or skipped) commit: its position and what it was like.

    ``position`` places its figure on the line from good (0) to bad (1), on the log scale; it
    decides which side a "neither" counts for.
    """

    index: int
    outcome: Outcome
    position: float | None = None


@dataclass(frozen=True)
class Bracket:
    """The change lies after ``good`` and at or before ``bad`` (positions)."""

    good: int
    bad: int


@dataclass(frozen=True)
class Answer:
    """The search's end: the first bad commit when the bracket closed to one step, otherwise
    the positions that could not be split because every commit inside was skipped."""

    bracket: Bracket
    unsplit: tuple[int, ...]

    @property
    def first_bad(self) -> int | None:
        return self.bracket.bad if self.bracket.bad == self.bracket.good + 1 else None


def classify(against_good: Comparison, against_bad: Comparison) -> Probe:
    """What a commit is like, from its comparisons with both ends (index left 0: the caller's)."""
    position = log_position(against_good, against_bad)
    verdicts = (against_good.verdict, against_bad.verdict)
    if ComparisonVerdict.NOT_ENOUGH_DATA in verdicts:
        return Probe(0, Outcome.UNDECIDED, position)
    near_good = against_good.verdict == ComparisonVerdict.WITHIN_NOISE
    near_bad = against_bad.verdict == ComparisonVerdict.WITHIN_NOISE
    if near_good and not near_bad:
        return Probe(0, Outcome.GOOD, position)
    if near_bad and not near_good:
        return Probe(0, Outcome.BAD, position)
    return Probe(0, Outcome.NEITHER, position)


def log_position(against_good: Comparison, against_bad: Comparison) -> float | None:
    """Where the commit's figure lies from good (0) to bad (1), on the log scale."""
    from_good = math.log1p(against_good.relative_change)
    to_bad = -math.log1p(against_bad.relative_change)
    span = from_good + to_bad
    return None if span == 0 else from_good / span


def leans_bad(probe: Probe) -> bool:
    """Whether a probe moves the bracket's bad end (True) or its good end (False)."""
    if probe.outcome == Outcome.NEITHER:
        return probe.position is not None and probe.position >= 0.5
    return probe.outcome == Outcome.BAD


def bracket(count: int, probes: Sequence[Probe]) -> Bracket:
    """The bracket after the probes, taken in the order they were made."""
    good, bad = 0, count - 1
    for probe in probes:
        if probe.outcome in (Outcome.SKIPPED, Outcome.UNDECIDED) or not good < probe.index < bad:
            continue
        if leans_bad(probe):
            bad = probe.index
        else:
            good = probe.index
    return Bracket(good, bad)


def next_probe(count: int, probes: Sequence[Probe]) -> int | Answer:
    """The next position to measure, or the answer when none is left."""
    if count < 2:
        raise ValueError("a bisection needs two ends")
    edges = bracket(count, probes)
    skipped = {p.index for p in probes if p.outcome == Outcome.SKIPPED}
    inside = [i for i in range(edges.good + 1, edges.bad) if i not in skipped]
    if not inside:
        unsplit = tuple(range(edges.good + 1, edges.bad + 1)) if edges.bad > edges.good + 1 else ()
        return Answer(edges, unsplit)
    middle = (edges.good + edges.bad) / 2
    return min(inside, key=lambda i: (abs(i - middle), i))


def steps_needed(count: int) -> int:
    """Commits measured by a bisection of count positions that meets no skip: ⌈log2(n-1)⌉."""
    return max(0, math.ceil(math.log2(count - 1))) if count > 1 else 0
