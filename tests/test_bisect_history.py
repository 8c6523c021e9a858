"""The first-parent range a bisection walks, and its refusals, on real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pgbenchlab.builds.history import first_parent_range
from pgbenchlab.errors import BuildError


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
        "PATH": "/usr/bin:/bin", "HOME": str(repo),
    }  # fmt: skip
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", f"change {name}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    for name in ("a", "b", "c"):
        commit(tmp_path, name)
    git(tmp_path, "tag", "good")
    # a side branch merged back: its commits are not on main's first-parent line
    git(tmp_path, "checkout", "-q", "-b", "side")
    commit(tmp_path, "side1")
    git(tmp_path, "checkout", "-q", "main")
    commit(tmp_path, "d")
    git(tmp_path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    commit(tmp_path, "e")
    git(tmp_path, "tag", "bad")
    return tmp_path


def test_the_range_is_the_first_parent_line_from_good_to_bad(repo: Path) -> None:
    commits = first_parent_range(repo, "good", "bad")
    assert [c.subject for c in commits] == ["change c", "change d", "merge side", "change e"]
    assert commits[0].hash == git(repo, "rev-parse", "good")
    assert commits[-1].hash == git(repo, "rev-parse", "bad")
    assert all(len(c.hash) == 40 and c.author_date[:2] == "20" for c in commits)


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        ("nosuch", "bad", 'ref "nosuch" is not a commit'),
        ("bad", "good", 'is not an ancestor of --bad "good"'),
        ("side", "main~2", "their common ancestor is"),
        ("good", "good", "are the same commit"),
    ],
)
def test_refs_that_cannot_be_bisected_are_refused(
    repo: Path, good: str, bad: str, message: str
) -> None:
    with pytest.raises(BuildError, match=message):
        first_parent_range(repo, good, bad)


def test_a_dirty_or_missing_checkout_is_refused(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (repo / "a").write_text("edited")
    with pytest.raises(BuildError, match="uncommitted changes"):
        first_parent_range(repo, "good", "bad")
    with pytest.raises(BuildError, match="no such directory"):
        first_parent_range(elsewhere / "missing", "good", "bad")
    with pytest.raises(BuildError, match="not a git checkout"):
        first_parent_range(elsewhere, "good", "bad")
