"""A followed branch's pure parts: which commits a call selects, the follow records as stored,
and the change points over simulated histories shaped like real ones (noise, outliers, drift),
with fixed seeds: flat histories rarely show a change, a step of twice the noise is found at
its commit."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pgbenchlab.analysis.changepoints import change_points
from pgbenchlab.builds.history import BranchCommit, Commit
from pgbenchlab.errors import UserError
from pgbenchlab.follow.selection import Selection, select
from pgbenchlab.store import FollowCommit, Store


def _line(days: list[int]) -> list[BranchCommit]:
    """A first-parent line whose commit i was authored on January days[i], 2026."""
    return [
        BranchCommit(
            Commit(f"{i:040x}", f"change {i}", f"2026-01-{day:02d}T12:{i % 60:02d}:00+00:00"),
            None if i == 0 else f"{i - 1:040x}",
            i,
        )
        for i, day in enumerate(days)
    ]


def _positions(line: list[BranchCommit], selection: Selection) -> list[int]:
    return [c.position for c in select(line, selection)]


def test_every_nth_counts_from_the_root_so_a_longer_branch_keeps_the_choice() -> None:
    line = _line([1] * 12)
    assert _positions(line, Selection(every=5, order="oldest")) == [0, 5, 10]
    longer = _line([1] * 17)
    assert _positions(longer, Selection(every=5)) == [15, 10, 5, 0]  # newest first by default


def test_daily_since_and_range() -> None:
    line = _line([1, 1, 2, 2, 2, 4, 5])
    assert _positions(line, Selection(daily=True, order="oldest")) == [1, 4, 5, 6]
    since = Selection(since=__import__("datetime").date(2026, 1, 2), order="oldest")
    assert _positions(line, since) == [2, 3, 4, 5, 6]
    window = Selection(range=(line[2].commit.hash, line[5].commit.hash), every=2, order="oldest")
    assert _positions(line, window) == [2, 4]  # both ends included, then every 2nd


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ({"every": 0}, "--every"),
        ({"every": 2, "daily": True}, "not both"),
        ({"order": "random"}, "--order"),
    ],
)
def test_a_selection_that_cannot_be_is_refused(selection: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UserError, match=message):
        Selection(**selection)


def test_follow_commits_are_stored_per_commit_and_read_along_the_branch(tmp_path: Path) -> None:
    def record(position: int, status: str) -> FollowCommit:
        return FollowCommit(
            "nightly", f"{position:040x}", None, position, f"change {position}",
            "2026-01-01T00:00:00+00:00", "git:/src", "main", f"nightly.{position:012x}",
            status, "", None, 1.0,
        )  # fmt: skip

    with Store(tmp_path / "results.db") as store:
        for position in (9, 3, 6):
            store.save_follow_commit(record(position, "running"))
        store.save_follow_commit(record(6, "measured"))  # the same commit, updated
        found = store.follow_commits("nightly")
        assert [(c.position, c.status) for c in found] == [
            (3, "running"), (6, "measured"), (9, "running"),
        ]  # fmt: skip
        assert store.follow_names() == ["nightly"] and store.follow_commits("other") == ()


# -- change points on simulated histories ------------------------------------------------------

COMMITS, RUNS, CV = 20, 4, 0.05  # a history of 20 measured commits, 4 runs each
SERIES = 100  # flat histories per shape
STEPPED = 300  # histories with a step per shape: its share known to about ±2 %
SHAPES = {
    "noise": {},
    "outliers": {"outliers": 0.05},  # 5 % of runs 20-50 % low (a hiccup of the machine)
    "drift": {"drift": 0.03},  # the machine 3 % faster from the first commit to the last
}


def history(
    rng: np.random.Generator,
    *,
    step: float = 1.0,
    at: int = COMMITS // 2,
    outliers: float = 0.0,
    drift: float = 0.0,
) -> list[tuple[str, list[float]]]:
    sigma = math.sqrt(math.log1p(CV * CV))
    out = []
    for i in range(COMMITS):
        level = 1000.0 * (1 + drift * i / (COMMITS - 1)) * (step if i >= at else 1.0)
        values = level * np.exp(rng.normal(0, sigma, RUNS))
        hit = rng.random(RUNS) < outliers
        values[hit] *= rng.uniform(0.5, 0.8, int(hit.sum()))
        out.append((f"c{i}", values.tolist()))
    return out


def noise(shape: dict[str, float]) -> float:
    """The spread of a flat history's runs (sd of their logs, outliers included)."""
    rng = np.random.default_rng(0)
    logs = [math.log(v) for _ in range(200) for _, vs in history(rng, **shape) for v in vs]
    centred = np.array(logs) - np.mean(logs)
    return float(np.std(centred))


@pytest.mark.parametrize("shape", SHAPES)
def test_flat_histories_rarely_show_a_change(shape: str) -> None:
    rng = np.random.default_rng(31)
    alarms = sum(
        bool(change_points(history(rng, **SHAPES[shape]), higher_is_better=True, seed=i))
        for i in range(SERIES)
    )
    assert alarms / SERIES <= 0.05


@pytest.mark.parametrize("shape", SHAPES)
def test_a_step_of_twice_the_noise_is_found_at_its_commit(shape: str) -> None:
    rng = np.random.default_rng(32)
    step = math.exp(-2 * noise(SHAPES[shape]))  # a slowdown of twice the noise
    hits = 0
    for i in range(STEPPED):
        found = change_points(
            history(rng, step=step, **SHAPES[shape]), higher_is_better=True, seed=i
        )
        hits += any(p.index == COMMITS // 2 and p.relative_step < 0 for p in found)
    assert hits / STEPPED >= 0.90


# -- the command's refusals --------------------------------------------------------------------

SUITE = """
[campaign]
name = "nightly"
[build.pg]
configure = ["--without-readline"]
[[server]]
name = "pg"
install = { build = "pg" }
[matrix]
scale = 1
clients = [1, 2]
"""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--every", "0"], "--every must be"),
        (["--every", "2", "--daily"], "not both"),
        (["--since", "yesterday"], "--since must be a date"),
        (["--range", "v1"], "--range must be A..B"),
        (["--since", "2026-01-01", "--range", "a..b"], "--since or --range"),
        (["--threshold", "150%"], "--threshold must be"),
        ([], "source git:"),  # the plan's build has no source and none is given: not a checkout
    ],
)
def test_follow_refuses_with_one_line_and_writes_nothing(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pgbenchlab.cli import main

    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    source = [] if not options else ["--source", f"git:{tmp_path / 'nowhere'}"]
    results = tmp_path / "results"
    argv = ["follow", str(suite), *source, "--branch", "main", "--results", str(results)]
    assert main([*argv, *options]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1, error
    assert not results.exists()


def test_a_suite_follows_one_branch_of_one_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bisect_repo import git
    from pgbenchlab.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n in range(2):
        (repo / "README").write_text(f"{n}\n")
        git(repo, "add", "README")
        git(repo, "commit", "-q", "-m", f"change {n}")
    results = tmp_path / "results"
    with Store(results / "results.db") as store:
        store.save_follow_commit(
            FollowCommit("nightly", "0" * 40, None, 0, "x", "2026-01-01T00:00:00+00:00",
                         f"git:{repo}", "other", "nightly.000000000000", "measured", "", 1.0, 1.0)
        )  # fmt: skip
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    argv = ["follow", str(suite), "--source", f"git:{repo}", "--branch", "main"]
    assert main([*argv, "--results", str(results)]) == 2
    assert "follows other of git:" in capsys.readouterr().err
    with Store(results / "results.db") as store:
        assert len(store.follow_commits("nightly")) == 1  # nothing measured
