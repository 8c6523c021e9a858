"""A git checkout's first-parent history between two refs, as a bisection walks it, and a
branch's whole first-parent line, as `follow` selects from it.

Every refusal is a `BuildError` (one line, exit 2) raised before anything is built: a missing
or dirty checkout, a ref that names nothing, good not an ancestor of bad.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.builds.sources import resolve_ref
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST, Finished, Host

_FIELDS = "%H%x1f%s%x1f%aI"


@dataclass(frozen=True)
class Commit:
    hash: str
    subject: str
    author_date: str  # ISO 8601, as git prints it

    @property
    def short(self) -> str:
        return self.hash[:10]


def first_parent_range(repo: Path, good: str, bad: str, host: Host = LOCAL_HOST) -> list[Commit]:
    """good, then every first-parent commit after it up to bad (both ends included)."""
    _check_checkout(repo, host)
    good_hash, bad_hash = resolve_ref(repo, good, host), resolve_ref(repo, bad, host)
    if good_hash == bad_hash:
        raise BuildError(f'--good "{good}" and --bad "{bad}" are the same commit')
    if not _succeeds(host, repo, "merge-base", "--is-ancestor", good_hash, bad_hash):
        base = _run(host, repo, "merge-base", good_hash, bad_hash).stdout.strip()
        hint = f" (their common ancestor is {base[:12]}: use it as --good)" if base else ""
        raise BuildError(f'--good "{good}" is not an ancestor of --bad "{bad}"{hint}')
    listed = _git(
        host, repo, "log", "--first-parent", "--ancestry-path", "--reverse",
        f"--format={_FIELDS}", f"{good_hash}..{bad_hash}",
    )  # fmt: skip
    later = [Commit(*line.split("\x1f")) for line in listed.splitlines() if line]
    return [_commit(host, repo, good_hash), *later]


@dataclass(frozen=True)
class BranchCommit:
    """A commit of a branch's first-parent line: position 0 is the line's root."""

    commit: Commit
    parent: str | None  # the first parent; None for the root
    position: int


def branch_line(repo: Path, branch: str, host: Host = LOCAL_HOST) -> list[BranchCommit]:
    """Every commit of the branch's first-parent line, oldest first."""
    _check_checkout(repo, host)
    tip = resolve_ref(repo, branch, host)
    listed = _run(
        host, repo, "log", "--first-parent", "--reverse", f"--format={_FIELDS}%x1f%P", tip
    )
    if listed.returncode != 0:
        raise BuildError(f"git log in {repo} failed: {listed.stderr.strip()[:200]}")
    line = []
    for position, text in enumerate(listed.stdout.splitlines()):  # unstripped: %P may be empty
        *fields, parents = text.split("\x1f")
        first = parents.split()[0] if parents.split() else None
        line.append(BranchCommit(Commit(*fields), first, position))
    return line


def _check_checkout(repo: Path, host: Host) -> None:
    if host.run(["test", "-d", str(repo)], timeout=30).returncode != 0:
        raise BuildError(f"source git:{repo}: no such directory")
    if _run(host, repo, "rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        raise BuildError(f"source git:{repo}: not a git checkout")
    dirty = _git(host, repo, "status", "--porcelain", "--untracked-files=no")
    if dirty:
        first = dirty.splitlines()[0].strip()
        raise BuildError(
            f"source git:{repo}: the checkout has uncommitted changes ({first} …): "
            "commit or stash them, a bisection measures commits"
        )


def _commit(host: Host, repo: Path, commit: str) -> Commit:
    shown = _git(host, repo, "log", "-1", f"--format={_FIELDS}", commit)
    return Commit(*shown.split("\x1f"))


def _run(host: Host, repo: Path, *args: str) -> Finished:
    return host.run(["git", "-C", str(repo), *args], timeout=120)


def _succeeds(host: Host, repo: Path, *args: str) -> bool:
    return _run(host, repo, *args).returncode == 0


def _git(host: Host, repo: Path, *args: str) -> str:
    """git's output, stripped; BuildError when git fails."""
    done = _run(host, repo, *args)
    if done.returncode != 0:
        raise BuildError(f"git {args[0]} in {repo} failed: {done.stderr.strip()[:200]}")
    return done.stdout.strip()
