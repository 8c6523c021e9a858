"""Persistent build trees: neighbouring commits of one source built incrementally.

A bisection builds commit after commit of one history with the same options. Each of those
builds goes through a tree kept under the cache (``trees/KEY/``, KEY from the source's location,
the options and the compiler, not the commit): the commit's files replace the tree's where
their content differs (touched, so make sees them as new), files the commit no longer has are
removed, and make rebuilds only what changed. configure runs once per tree (again when the
commit changes configure itself), with ``--enable-depend`` so that a changed header rebuilds
what includes it, and with a prefix of the tree's own: PostgreSQL finds its files relative to
its binaries, so the installation is staged and moved to the build's cache directory like any
other. The installed result equals a clean build's; the build's provenance says it was
incremental.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.builds import cache
from pgbenchlab.builds.compile import Progress
from pgbenchlab.builds.recipe import RECIPE_VERSION, Compiler, SourceIdentity
from pgbenchlab.hosts import LOCAL_HOST, Host

MANIFEST = ".pgbenchlab-sources"  # the files the tree's current commit has, one per line
CONFIGURED = ".pgbenchlab-configured"  # the digest of the configure script last run
DEPEND_OPTION = "--enable-depend"


@dataclass(frozen=True)
class PersistentTree:
    """A tree held (locked) for one build."""

    path: Path  # the source and build tree
    prefix: Path  # the prefix configure was given

    def needs_configure(self) -> bool:
        configured = self.path / CONFIGURED
        return not configured.is_file() or configured.read_text() != _configure_digest(self.path)

    def configured(self) -> None:
        (self.path / CONFIGURED).write_text(_configure_digest(self.path))


def tree_key(source: SourceIdentity, configure: tuple[str, ...], compiler: Compiler) -> str:
    identity = [RECIPE_VERSION, source.kind, source.location, list(configure), compiler.version]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]


@contextmanager
def persistent_tree(
    root: Path,
    source: SourceIdentity,
    configure: tuple[str, ...],
    compiler: Compiler,
    progress: Progress | None,
    host: Host = LOCAL_HOST,
) -> Iterator[PersistentTree]:
    """The tree for these options, locked while one build uses it."""
    key = tree_key(source, configure, compiler)
    path = root / "trees" / key
    with cache.in_use(root, f"tree-{key}"), cache.build_lock(root, f"tree-{key}", progress, host):
        path.mkdir(parents=True, exist_ok=True)
        yield PersistentTree(path / "src", path / "prefix")


def sync(tree: Path, fresh: Path) -> int:
    """Make tree's source files those of fresh (a just-unpacked tree of the new commit),
    leaving build products alone; the number of files written or removed."""
    tree.mkdir(parents=True, exist_ok=True)
    manifest = tree / MANIFEST
    before = set(manifest.read_text().splitlines()) if manifest.is_file() else set()
    now = _files(fresh)
    changed = 0
    for name in sorted(before - now):
        (tree / name).unlink(missing_ok=True)
        changed += 1
    for name in sorted(now):
        target, new = tree / name, fresh / name
        if _same(target, new):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        shutil.copy2(new, target, follow_symlinks=False)
        if not target.is_symlink():
            os.utime(target)  # newer than anything built from the old content
        changed += 1
    manifest.write_text("\n".join(sorted(now)) + "\n")
    return changed


def _files(top: Path) -> set[str]:
    found = set()
    for directory, _, names in os.walk(top):
        for name in names:
            found.add(str(Path(directory, name).relative_to(top)))
    return found


def _same(target: Path, new: Path) -> bool:
    if new.is_symlink() or target.is_symlink():
        return target.is_symlink() and new.is_symlink() and os.readlink(target) == os.readlink(new)
    return target.is_file() and filecmp.cmp(target, new, shallow=False)


def _configure_digest(tree: Path) -> str:
    script = tree / "configure"
    return hashlib.sha256(script.read_bytes()).hexdigest() if script.is_file() else ""


def prune_trees(root: Path) -> tuple[int, list[str]]:
    """Delete every persistent tree no process is using (they only speed up builds); the bytes
    freed and the keys of the trees left because they are in use."""
    freed, in_use = 0, []
    folder = root / "trees"
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.name.startswith("."):
            shutil.rmtree(path, ignore_errors=True)  # a deletion cut short
            continue
        with cache.unused(root, f"tree-{path.name}") as free:
            if not free:
                in_use.append(path.name)
                continue
            freed += cache.tree_size(path)
            doomed = path.with_name(f".{path.name}.deleting")
            path.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    return freed, in_use
