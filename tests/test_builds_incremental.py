"""Persistent build trees: a new commit's files replace only what changed."""

from __future__ import annotations

import os
from pathlib import Path

from pgbenchlab.builds.incremental import MANIFEST, sync


def tree_of(top: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = top / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (1_000_000, 1_000_000))  # as git archive leaves them: the commit's time
    return top


def test_only_changed_files_are_rewritten_and_made_newer(tmp_path: Path) -> None:
    first = {"configure": "c1", "src/a.c": "a1", "src/b.c": "b1", "src/gone.c": "g"}
    kept = tmp_path / "kept"
    assert sync(kept, tree_of(tmp_path / "one", first)) == 4
    (kept / "src" / "a.o").write_text("built from a1")  # a build product
    for name in ("src/a.c", "src/b.c"):
        os.utime(kept / name, (2_000_000, 2_000_000))
    second = {"configure": "c1", "src/a.c": "a2", "src/b.c": "b1", "src/new.c": "n"}
    assert sync(kept, tree_of(tmp_path / "two", second)) == 3  # a.c, new.c, gone.c
    assert (kept / "src" / "a.c").read_text() == "a2"
    assert (kept / "src" / "a.c").stat().st_mtime > 2_000_000  # make rebuilds a.o
    assert (kept / "src" / "b.c").stat().st_mtime == 2_000_000  # untouched: b.o stays
    assert not (kept / "src" / "gone.c").exists()
    assert (kept / "src" / "a.o").read_text() == "built from a1"  # products are make's business
    assert (kept / MANIFEST).read_text().split() == sorted(second)
    assert sync(kept, tmp_path / "two") == 0
