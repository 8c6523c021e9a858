"""Followed branches as the site shows them: per cell and metric, each measured commit's figure
(geometric mean of its runs, with a 95 % interval) along the branch, the change points found
over them (`follow.history`, the same `follow` acts on) and the culprit each change's bisection
named. Read from the results database alone."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pgbenchlab.analysis.stats import sample_variance, student_t_quantile
from pgbenchlab.follow.history import Change, CommitValues, Series, bisection_name, load_history
from pgbenchlab.report.views.bisection import BisectionView, bisection_view
from pgbenchlab.store import FollowCommit, Store

CONFIDENCE = 0.95


@dataclass(frozen=True)
class CommitFigure:
    commit: FollowCommit
    figure: float  # geometric mean of its runs
    low: float  # its interval (the figure itself for a single run)
    high: float
    runs: int


@dataclass(frozen=True)
class FollowChangeView:
    change: Change
    bisection: BisectionView | None  # its range's bisection, when one was made

    @property
    def culprit(self) -> str | None:
        """The commit that made the change: its bisection's answer, or the later of two
        neighbouring commits (nothing to bisect between them)."""
        if self.change.untested == 0:
            return self.change.after.commit_hash
        first = self.bisection.first_bad if self.bisection else None
        return None if first is None else first.commit

    @property
    def culprit_subject(self) -> str:
        if self.change.untested == 0:
            return self.change.after.subject
        first = self.bisection.first_bad if self.bisection else None
        return "" if first is None else first.subject

    @property
    def culprit_position(self) -> int | None:
        """Its place on the branch's first-parent line."""
        if self.change.untested == 0:
            return self.change.after.position
        first = self.bisection.first_bad if self.bisection else None
        return None if first is None else self.change.before.position + first.position

    @property
    def key(self) -> str:
        return self.change.key


@dataclass(frozen=True)
class Timeline:
    series: Series
    figures: tuple[CommitFigure, ...]
    changes: tuple[FollowChangeView, ...]


@dataclass(frozen=True)
class FollowView:
    name: str
    branch: str
    source: str
    commits: tuple[FollowCommit, ...]  # every selected commit, oldest first
    timelines: tuple[Timeline, ...]

    @property
    def changes(self) -> tuple[FollowChangeView, ...]:
        return tuple(c for t in self.timelines for c in t.changes)


def load_follows(store: Store) -> tuple[FollowView, ...]:
    return tuple(follow_view(store, name) for name in store.follow_names())


def follow_view(store: Store, name: str) -> FollowView:
    history = load_history(store, name)
    bisections = {}
    for change in history.changes:
        found = store.bisection(bisection_name(name, change))
        bisections[change.key] = None if found is None else bisection_view(found)
    timelines = tuple(
        Timeline(
            series,
            tuple(_figure(p) for p in series.points),
            tuple(
                FollowChangeView(c, bisections[c.key])
                for c in history.changes
                if c.series is series
            ),
        )
        for series in history.series
    )
    last = history.commits[-1]
    return FollowView(name, last.branch, last.source, history.commits, timelines)


def _figure(point: CommitValues) -> CommitFigure:
    logs = [math.log(v) for v in point.values]
    mean = sum(logs) / len(logs)
    half = 0.0
    if len(logs) >= 2:
        spread = math.sqrt(sample_variance(logs) / len(logs))
        half = student_t_quantile(0.5 + CONFIDENCE / 2, len(logs) - 1) * spread
    return CommitFigure(
        point.commit, math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs)
    )
