"""A git history for real bisections: PostgreSQL's source as the first commit, then small
commits of which one slows every message a backend reads and one does not compile."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

SLOW_LOOP = """
	/* a slowdown every message from the client passes through, whatever the protocol */
	{
		volatile unsigned long spin;

		for (spin = 0; spin < 1000000; spin++)
			;
	}
"""
ANCHOR = "\tif (whereToSendOutput == DestRemote)\n\t\tresult = SocketBackend(inBuf);\n"
POSTGRES_C = "src/backend/tcop/postgres.c"
BROKEN_C = "src/backend/utils/adt/int.c"
COMMENTED_C = (  # a "code" commit adds a comment to one of these: a recompile and a relink
    "src/backend/access/heap/heapam.c",
    "src/backend/executor/execMain.c",
    "src/backend/optimizer/path/costsize.c",
    "src/backend/storage/buffer/bufmgr.c",
    "src/backend/utils/adt/varlena.c",
)


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "bisect test", "GIT_AUTHOR_EMAIL": "test@example.org",
        "GIT_COMMITTER_NAME": "bisect test", "GIT_COMMITTER_EMAIL": "test@example.org",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        "PATH": "/usr/bin:/bin", "HOME": str(repo),
    }  # fmt: skip
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]}: {done.stderr}")
    return done.stdout.strip()


def make_history(tarball: Path, into: Path, series: list[str]) -> Path:
    """A repository at into/postgresql: the tarball's tree committed, then one commit per
    entry of series: "doc" (a README line), "code" (a comment in a backend C file), "slow" (the
    loop) or "broken" (a syntax error that the next "fix" entry removes). Identical inputs give
    identical commits."""
    with tarfile.open(tarball) as archive:
        top = archive.getmembers()[0].name.split("/")[0]
        archive.extractall(into, filter=_ours)
    repo = into / "postgresql"
    (into / top).rename(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "PostgreSQL release")
    for number, kind in enumerate(series, start=1):
        _change(repo, kind, number)
        git(repo, "commit", "-q", "-a", "-m", f"{kind} change {number}")
    return repo


def _ours(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    """Extracted as ours: git refuses a repository another account owns."""
    safe = tarfile.data_filter(member, path)
    return safe.replace(uid=os.getuid(), gid=os.getgid(), uname="", gname="")


def _change(repo: Path, kind: str, number: int) -> None:
    if kind == "doc":
        readme = repo / "README"
        readme.write_text(readme.read_text() + f"\nnote {number}\n")
    elif kind == "code":
        path = repo / COMMENTED_C[number % len(COMMENTED_C)]
        path.write_text(path.read_text() + f"\n/* note {number} */\n")
    elif kind == "slow":
        path = repo / POSTGRES_C
        text = path.read_text()
        path.write_text(text.replace(ANCHOR, SLOW_LOOP + ANCHOR, 1))
    elif kind == "broken":
        path = repo / BROKEN_C
        path.write_text(path.read_text() + "\nthis does not compile;\n")
    elif kind == "fix":
        path = repo / BROKEN_C
        path.write_text(path.read_text().replace("\nthis does not compile;\n", ""))
    else:
        raise ValueError(kind)


def kept_history(tarball: Path, where: Path, series: list[str]) -> Path:
    """make_history's repository at where, made once and kept: identical inputs give identical
    commits, so the builds and persistent trees of earlier sessions serve again."""
    repo = where / "postgresql"
    wanted = ["PostgreSQL release", *(f"{kind} change {n}" for n, kind in enumerate(series, 1))]
    if (repo / ".git").is_dir():
        subjects = git(repo, "log", "--reverse", "--format=%s").splitlines()
        if subjects == wanted and not git(repo, "status", "--porcelain"):
            return repo
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    return make_history(tarball, where, series)
