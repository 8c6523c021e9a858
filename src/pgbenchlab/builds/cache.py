"""The build cache on disk: where it is, one directory per key, its lock, what it holds and
pruning.

Layout under the cache root::

    builds/KEY/         a complete build: bin, lib, share, include, provenance.json, build.log
    logs/KEY.log        the log of a build that failed (or is running)
    locks/KEY.lock      held while KEY is being built
    locks/KEY.use       held shared by every process that uses KEY (`in_use`); prune takes it
                        exclusively, so a build in use is never pruned
    tmp/KEY.PID/        a build in progress: its source tree and its staged installation
    sources/, apt/      downloaded Debian sources and our own apt configuration

A build is complete when its directory exists: it is staged elsewhere, its provenance written
last, then renamed into place in one step.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgbenchlab.builds.compile import Progress
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST, Host

ROOT_CACHE = Path("/var/cache/pgbenchlab/builds")
PROVENANCE = "provenance.json"
BUILD_LOG = "build.log"
LOCK_POLL_S = 1.0


def cache_root() -> Path:
    """PGBENCHLAB_BUILD_CACHE, or a directory every account can read when we are root (the
    server account runs the binaries), or the user's cache directory."""
    if configured := os.environ.get("PGBENCHLAB_BUILD_CACHE"):
        return Path(configured).expanduser().absolute()
    if os.geteuid() == 0:
        return ROOT_CACHE
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgbenchlab" / "builds"


def prepare_root(root: Path) -> None:
    """The root and its fixed subdirectories, traversable by every account."""
    for path in (root, root / "builds", root / "logs", root / "locks", root / "tmp"):
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o755)
    if os.geteuid() == 0 and root.is_relative_to(ROOT_CACHE.parent):
        ROOT_CACHE.parent.chmod(0o755)  # the server account reaches the binaries through it


def build_dir(root: Path, key: str) -> Path:
    return root / "builds" / key


def is_complete(path: Path) -> bool:
    return (path / PROVENANCE).is_file() and (path / "bin" / "postgres").is_file()


@contextmanager
def build_lock(
    root: Path, key: str, progress: Progress | None, host: Host = LOCAL_HOST
) -> Iterator[None]:
    """Held while key is built: a second campaign waits, then finds the build done."""
    path = root / "locks" / f"{key}.lock"
    started = time.monotonic()
    told = False
    while True:
        try:
            held = host.lock(path)
            break
        except BlockingIOError:  # held by another build of the same key
            if progress and not told:
                progress("waiting for another build of the same key", 0.0)
                told = True
            time.sleep(LOCK_POLL_S)
            if time.monotonic() - started > 6 * 3600:
                raise BuildError(f"the build {key} stayed locked for 6 h ({path})") from None
        except OSError as failed:  # not a held lock: waiting would never end
            raise BuildError(f"cannot lock {path}: {failed.strerror}") from None
    try:
        yield
    finally:
        held.release()


def remove_abandoned_staging(root: Path, host: Host = LOCAL_HOST) -> None:
    """Remove what builds killed outright (kill -9) left in tmp/: a staging directory
    KEY.PID whose key no build holds locked; a live build's is never touched."""
    for entry in sorted((root / "tmp").iterdir()):
        key = entry.name.rpartition(".")[0]
        try:
            held = host.lock(root / "locks" / f"{key}.lock")
        except OSError:  # being built now (or not ours to lock): left alone
            continue
        try:
            shutil.rmtree(entry, ignore_errors=True)
        finally:
            held.release()


class BuildsInUse:
    """Shared locks on the builds and build trees a command uses, held until it ends."""

    def __init__(self) -> None:
        self._held: dict[Path, int] = {}

    def hold(self, path: Path) -> None:
        if path not in self._held:
            self._held[path] = _shared_lock(path)

    def release(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()


_USING: ContextVar[BuildsInUse | None] = ContextVar("builds_in_use", default=None)


@contextmanager
def using() -> Iterator[None]:
    """Every build (and build tree) `in_use` within the block stays held until it ends: a
    command that builds, then runs campaigns on its builds, holds them all along. Within an
    enclosing block, that one holds them (until its own end)."""
    if _USING.get() is not None:
        yield
        return
    held = BuildsInUse()
    token = _USING.set(held)
    try:
        yield
    finally:
        _USING.reset(token)
        held.release()


@contextmanager
def in_use(root: Path, name: str) -> Iterator[None]:
    """A shared lock on the build (or tree) name for the block, and beyond it to the end of
    the enclosing `using` block; waits while a prune is deleting it."""
    path = _use_lock_path(root, name)
    holder = _USING.get()
    if holder is not None:
        holder.hold(path)
        yield
        return
    fd = _shared_lock(path)
    try:
        yield
    finally:
        os.close(fd)


@contextmanager
def unused(root: Path, name: str) -> Iterator[bool]:
    """The build (or tree) name locked exclusively without waiting: True inside when nothing
    uses it, False when some process holds it `in_use`."""
    fd = os.open(_use_lock_path(root, name), os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _use_lock_path(root: Path, name: str) -> Path:
    (root / "locks").mkdir(exist_ok=True)
    return root / "locks" / f"{name}.use"


def _shared_lock(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as failed:
        raise BuildError(f"cannot lock {path}: {failed.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_provenance(prefix: Path, provenance: dict[str, Any]) -> None:
    (prefix / PROVENANCE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")


def read_provenance(prefix: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((prefix / PROVENANCE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def tree_size(path: Path) -> int:
    total = 0
    for directory, _, names in os.walk(path):
        for name in names:
            file = Path(directory, name)
            if not file.is_symlink():
                total += file.stat().st_size
    return total


@dataclass(frozen=True)
class CachedBuild:
    key: str
    path: Path
    provenance: dict[str, Any]
    modified: float

    @property
    def size(self) -> int:
        return int(self.provenance.get("size_bytes") or 0)


def cached_builds(root: Path) -> list[CachedBuild]:
    """The complete builds in the cache, newest first."""
    folder = root / "builds"
    found: list[CachedBuild] = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        provenance = read_provenance(path)
        if provenance is not None and is_complete(path):
            found.append(
                CachedBuild(path.name, path, provenance, (path / PROVENANCE).stat().st_mtime)
            )
    return sorted(found, key=lambda b: b.modified, reverse=True)


@dataclass
class Pruned:
    removed: list[CachedBuild] = field(default_factory=list)
    in_use: list[CachedBuild] = field(default_factory=list)  # used by a running process


def prune(root: Path, keep: set[str]) -> Pruned:
    """Delete the complete builds whose key is not in keep, except those a process is using
    (each taken exclusively first, without waiting: never one a campaign runs)."""
    pruned = Pruned()
    for build in cached_builds(root):
        if build.key in keep:
            continue
        with unused(root, build.key) as free:
            if not free:
                pruned.in_use.append(build)
                continue
            doomed = build.path.with_name(f".{build.key}.deleting")
            build.path.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        (root / "logs" / f"{build.key}.log").unlink(missing_ok=True)
        pruned.removed.append(build)
    return pruned
