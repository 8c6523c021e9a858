"""A performance bisection's decisions: which commit to measure next, what a measured commit
is like, and the answer. Pure: commits are positions 0 … n-1 along the first-parent history,
0 the good end and n-1 the bad end; measuring them is someone else's job.

A commit is classified by two comparisons made in the same interleaved rounds: against the
good end and against the bad end. Each places the commit's figure on the line from good (0) to
bad (1), log scale, with an interval; "like good" is both intervals below the middle, "like
bad" both above it. Saying "same as good" outright would need an equivalence interval within
the threshold, many more runs for what a bisection only has to tell: which side. A commit
changed beyond the threshold against both ends lies between them or elsewhere ("neither"): it
is reported, and the search goes on in the part of the range that holds the larger share of the
change, i.e. as if it were like the end it is nearer to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from pgbenchlab.analysis.comparison import ComparisonVerdict


class Judged(Protocol):
    """A comparison's outcome as classify reads it (candidate / baseline - 1, its interval)."""

    @property
    def verdict(self) -> ComparisonVerdict: ...

    @property
    def relative_change(self) -> float: ...

    @property
    def ci_low(self) -> float | None: ...

    @property
    def ci_high(self) -> float | None: ...


class CommitOutcome(StrEnum):
    """What a measured commit turned out to be."""

    GOOD = "like good"
    BAD = "like bad"
    NEITHER = "neither"
    SKIPPED = "skipped"  # did not build or start: no figure
    UNDECIDED = "undecided"  # more runs are needed


@dataclass(frozen=True)
class CommitProbe:
    """One measured (or skipped) commit: its position and what it was like.

    ``position`` places its figure on the line from good (0) to bad (1), on the log scale; it
    decides which side a "neither" counts for.
    """

    index: int
    outcome: CommitOutcome
    position: float | None = None


@dataclass(frozen=True)
class Bracket:
    """The change lies after ``good`` and at or before ``bad`` (positions)."""

    good: int
    bad: int


@dataclass(frozen=True)
class BisectionAnswer:
    """The search's end: the first bad commit when the bracket closed to one step, otherwise
    the positions that could not be split because every commit inside was skipped."""

    bracket: Bracket
    unsplit: tuple[int, ...]

    @property
    def first_bad(self) -> int | None:
        return self.bracket.bad if self.bracket.bad == self.bracket.good + 1 else None


_CHANGED = (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED)


def classify(against_good: Judged, against_bad: Judged) -> CommitProbe:
    """What a commit is like, from its comparisons with both ends (index left 0: the caller's)."""
    span = math.log1p(against_good.relative_change) - math.log1p(against_bad.relative_change)
    if span == 0:
        return CommitProbe(0, CommitOutcome.UNDECIDED)
    position = math.log1p(against_good.relative_change) / span
    sides = {_side(against_good, span, 0.0), _side(against_bad, span, 1.0)}
    if against_good.verdict in _CHANGED and against_bad.verdict in _CHANGED:
        return CommitProbe(0, CommitOutcome.NEITHER, position)
    if sides == {"good"}:
        return CommitProbe(0, CommitOutcome.GOOD, position)
    if sides == {"bad"}:
        return CommitProbe(0, CommitOutcome.BAD, position)
    return CommitProbe(0, CommitOutcome.UNDECIDED, position)


def _side(judged: Judged, span: float, origin: float) -> str | None:
    """Which half of the good-to-bad line the comparison's interval puts the commit in; None
    while the interval straddles the middle. origin: where the baseline end sits (0 or 1)."""
    if judged.ci_low is None or judged.ci_high is None:
        return None
    ends = [origin + _log_ratio(judged.ci_low) / span, origin + _log_ratio(judged.ci_high) / span]
    if max(ends) < 0.5:
        return "good"
    if min(ends) > 0.5:
        return "bad"
    return None


def _log_ratio(relative: float) -> float:
    """log(1 + relative); -inf for a bound of -100 %: the bound of an interval so wide (two or
    three rounds of a large change) that exp of its log bound underflows to 0."""
    return math.log1p(relative) if relative > -1 else -math.inf


def leans_bad(probe: CommitProbe) -> bool:
    """Whether a probe moves the bracket's bad end (True) or its good end (False)."""
    if probe.outcome == CommitOutcome.NEITHER:
        return probe.position is not None and probe.position >= 0.5
    return probe.outcome == CommitOutcome.BAD


def bracket(count: int, probes: Sequence[CommitProbe]) -> Bracket:
    """The bracket after the probes, taken in the order they were made."""
    good, bad = 0, count - 1
    for probe in probes:
        if (
            probe.outcome in (CommitOutcome.SKIPPED, CommitOutcome.UNDECIDED)
            or not good < probe.index < bad
        ):
            continue
        if leans_bad(probe):
            bad = probe.index
        else:
            good = probe.index
    return Bracket(good, bad)


def next_probe(count: int, probes: Sequence[CommitProbe]) -> int | BisectionAnswer:
    """The next position to measure, or the answer when none is left."""
    if count < 2:
        raise ValueError("a bisection needs two ends")
    edges = bracket(count, probes)
    skipped = {p.index for p in probes if p.outcome == CommitOutcome.SKIPPED}
    inside = [i for i in range(edges.good + 1, edges.bad) if i not in skipped]
    if not inside:
        unsplit = tuple(range(edges.good + 1, edges.bad + 1)) if edges.bad > edges.good + 1 else ()
        return BisectionAnswer(edges, unsplit)
    middle = (edges.good + edges.bad) / 2
    return min(inside, key=lambda i: (abs(i - middle), i))


def steps_needed(count: int) -> int:
    """Commits measured by a bisection of count positions that meets no skip: ⌈log2(n-1)⌉."""
    return max(0, math.ceil(math.log2(count - 1))) if count > 1 else 0
