"""A followed branch's history as series: per cell and metric, the run-level values of each
measured commit along the branch, and the change points over them (`analysis.changepoints`,
each commit a point of the series). Read from the results database alone, so `follow` and the
site see the same changes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.changepoints import ChangePoint, change_points
from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.results import RunStatus
from pgbenchlab.store import FollowCommit, RunRecord, Store
from pgbenchlab.store.metrics import METRICS

# The metrics every followed branch keeps a history of (changes found and bisected along
# them; instructions per transaction only where the suite counts them); `follow --metric` adds
# any other stored metric, kept with the follow (`Store.follow_metrics`).
FOLLOWED = ("tps", "p99", "instructions_per_tx")

DEFAULT_THRESHOLD = 0.02  # as `compare` and the report's change points
MEASURED = "measured"


@dataclass(frozen=True)
class CommitValues:
    commit: FollowCommit
    values: tuple[float, ...]  # the commit's successful runs


@dataclass(frozen=True)
class Series:
    """One cell's figures for one metric along the commits measured, oldest first."""

    cell_id: str
    cell: str  # its label
    metric: str
    points: tuple[CommitValues, ...]

    @property
    def key(self) -> str:
        return f"{self.cell_id}-{self.metric}"


@dataclass(frozen=True)
class Change:
    """A change point of a series: between two measured commits, with its size and interval."""

    series: Series
    found: ChangePoint
    before: FollowCommit  # the last commit measured before it
    after: FollowCommit  # the first measured after it

    @property
    def untested(self) -> int:
        """Commits of the branch between the two, not measured: a bisection's range."""
        return self.after.position - self.before.position - 1

    @property
    def regressed(self) -> bool:
        return self.found.verdict == ComparisonVerdict.REGRESSED

    @property
    def key(self) -> str:
        return f"{self.series.key}-{self.before.short}-{self.after.short}"


@dataclass(frozen=True)
class History:
    follow: str
    commits: tuple[FollowCommit, ...]  # every selected commit, oldest first
    series: tuple[Series, ...]
    changes: tuple[Change, ...]


def bisection_name(follow: str, change: Change) -> str:
    """The bisection of a change's range (one per cell and range, whichever metric found it)."""
    digest = hashlib.sha256(change.series.cell_id.encode()).hexdigest()[:6]
    return f"{follow}.bisect-{digest}-{change.before.short}-{change.after.short}"


def followed_metrics(store: Store, follow: str) -> tuple[str, ...]:
    """The defaults, then the metrics calls of this follow added."""
    return tuple(dict.fromkeys((*FOLLOWED, *store.follow_metrics(follow))))


def load_history(store: Store, follow: str, threshold: float = DEFAULT_THRESHOLD) -> History:
    commits = store.follow_commits(follow)
    runs: dict[str, list[tuple[FollowCommit, RunRecord]]] = {}
    labels: dict[str, str] = {}
    for commit in commits:
        found = store.find_campaign(commit.campaign) if commit.status == MEASURED else None
        for record in () if found is None else store.run_records(found.id):
            if record.status == RunStatus.OK:
                cell_id = record.cell_id
                runs.setdefault(cell_id, []).append((commit, record))
                labels.setdefault(cell_id, cell_label(record))
    metrics = followed_metrics(store, follow)
    series = tuple(
        _series(cell_id, labels[cell_id], metric, runs[cell_id])
        for cell_id in sorted(runs, key=labels.__getitem__)
        for metric in metrics
    )
    changes = tuple(c for s in series for c in series_changes(s, threshold))
    return History(follow, commits, tuple(s for s in series if s.points), changes)


def cell_label(record: RunRecord) -> str:
    cell = record.spec
    settings = "".join(f" {k}={v}" for k, v in cell.server_settings)
    return f"{cell.workload}, scale {cell.scale}, {cell.clients} clients{settings}"


def _series(
    cell_id: str, label: str, metric: str, runs: Sequence[tuple[FollowCommit, RunRecord]]
) -> Series:
    column = METRICS[metric].column
    values: dict[str, list[float]] = {}
    commits: dict[str, FollowCommit] = {}
    for commit, record in runs:
        value = record[column]
        if isinstance(value, int | float) and value > 0:
            values.setdefault(commit.commit_hash, []).append(float(value))
            commits[commit.commit_hash] = commit
    ordered = sorted(commits.values(), key=lambda c: c.position)
    points = tuple(CommitValues(c, tuple(values[c.commit_hash])) for c in ordered)
    return Series(cell_id, label, metric, points)


def series_changes(series: Series, threshold: float = DEFAULT_THRESHOLD) -> list[Change]:
    """The change points of a series (none with fewer than 3 commits measured)."""
    if len(series.points) < 3:
        return []
    found = change_points(
        [(p.commit.commit_hash, p.values) for p in series.points],
        higher_is_better=METRICS[series.metric].higher_is_better,
        threshold=threshold,
    )
    return [
        Change(
            series, point, series.points[point.index - 1].commit, series.points[point.index].commit
        )
        for point in found
    ]
