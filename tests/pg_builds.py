"""The suite's shared PostgreSQL builds (their session fixtures are in conftest.py): where the
build cache is kept between sessions, and PostgreSQL 18 built by meson from a git tree made of
Debian's 18 source (a fixed commit, so the cache keeps its build). That 18 is built with
OpenSSL: the suite's TLS-capable 18, server and pgbench (the embedded 18 has no TLS).

The cache is PGBENCHLAB_TEST_BUILD_CACHE, or /var/cache/pgbenchlab/test-builds as root (the
server account must reach the binaries), or a session temporary directory.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgbenchlab import builds, plan
from pgbenchlab.builds import sources
from pgbenchlab.installs import Installation


def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("PGBENCHLAB_TEST_BUILD_CACHE")
    if configured:
        return Path(configured)
    if os.geteuid() == 0:
        return Path("/var/cache/pgbenchlab/test-builds")
    return tmp_path_factory.mktemp("build-cache")


# The options that make meson's build of 18 fast: no readline, ICU, zlib, procedural languages
# or NLS, -O0 without -g. It still builds contrib and the test modules (meson's default target).
# OpenSSL is on: TLS costs the build little and the connection tests need an 18 with it.
MESON_FAST = (
    '["-Dreadline=disabled", "-Dicu=disabled", "-Dzlib=disabled", "-Dnls=disabled", '
    '"-Dplperl=disabled", "-Dplpython=disabled", "-Dpltcl=disabled", "-Dtap_tests=disabled", '
    '"-Ddebug=false", "-Doptimization=0", "-Dssl=openssl"]'
)
FIXED_COMMIT = {
    "GIT_AUTHOR_NAME": "pgbenchlab tests",
    "GIT_AUTHOR_EMAIL": "tests@pgbenchlab.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "pgbenchlab tests",
    "GIT_COMMITTER_EMAIL": "tests@pgbenchlab.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["git", "-C", str(repo), "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"]
    env = {**os.environ, **FIXED_COMMIT}
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, check=True)


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """An exclusive lock on a file beside what is made once: the suite's second worker waits
    for the first, then finds it made."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        yield


def git_repo_of_tarball(tarball: Path, repo: Path) -> str:
    """A git repository whose one commit (tagged "release") is the unpacked tarball, made once
    (the same tarball always gives the same commit). Returns the commit."""
    with held(repo.with_name(f".{repo.name}.lock")):
        if not (repo / ".git").is_dir():
            staging = repo.with_name(f".{repo.name}.{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            unpack = ["tar", "-xf", str(tarball), "-C", str(staging), "--strip-components=1"]
            subprocess.run(unpack, check=True)
            for args in (
                ["init", "-q"],
                ["add", "-A"],
                ["commit", "-qm", "release"],
                ["tag", "release"],
            ):
                git(staging, *args)
            staging.rename(repo)
    return git(repo, "rev-parse", "release").stdout.strip()


@dataclass(frozen=True)
class Pg18Build:
    """The built 18, and the [build.pg18] table a plan names it by (`{ build = "pg18" }`)."""

    install: Installation
    recipe: str
    repo: Path
    commit: str
    seconds: float  # what making it (or finding it in the cache) took


def pg18_with_tls(cache: Path) -> Pg18Build:
    tarball = sources.debian_tarball("postgresql-18", cache)
    repo = cache / "test-repos" / "postgresql-18"  # kept: a warm run reuses it
    commit = git_repo_of_tarball(tarball, repo)
    recipe = (
        f'[build.pg18]\nsource = "git:{repo}"\nref = "release"\nbuild_system = "meson"\n'
        f"configure = {MESON_FAST}\n"
    )
    started = time.monotonic()
    recipes = plan.parse(recipe, "b.toml", base=Path("/")).builds
    (install,) = builds.ensure_all(recipes, root=cache)
    return Pg18Build(install, recipe, repo, commit, time.monotonic() - started)
