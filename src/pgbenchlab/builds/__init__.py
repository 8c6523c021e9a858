"""PostgreSQL built from source: a plan's `[build.NAME]` recipes made into installations.

Owns the build recipe record and cache key (:mod:`.recipe`), fetching and unpacking sources —
Debian source packages through an apt configuration of its own, git checkouts by export, never
modified, tarballs, directories (:mod:`.sources`), the build steps — autoconf, or meson when the
recipe asks — and their log (:mod:`.compile`), the configure options a source's `configure
--help` lists, checked before anything is built (:mod:`.configure_options`), the cache on disk
with its locks, listing and pruning, which never deletes a build a running command uses
(:mod:`.cache`) and `ensure`, which returns a finished build as an `installs.Installation`
(source "build") so the server lifecycle, the server account and the pgbench choice use it like
any other (:mod:`.builder`). Prebuilt server binaries (`install = { binaries = "9.6" }`) are
downloaded, verified and unpacked into the same cache (:mod:`.prebuilt`).

Layer 2: may import `errors`, `hosts`, `installs` and `osuser`; `plan` imports its recipe
record, the campaign and the CLI call `ensure`.
"""

from pgbenchlab.builds.builder import (
    BuildsProgress,
    cached,
    check,
    describe,
    ensure,
    ensure_all,
    find_compiler,
    installation,
)
from pgbenchlab.builds.cache import (
    CachedBuild,
    Pruned,
    cache_root,
    cached_builds,
    prune,
    read_provenance,
    using,
)
from pgbenchlab.builds.compile import Progress
from pgbenchlab.builds.configure_options import check_configure_options
from pgbenchlab.builds.incremental import prune_trees
from pgbenchlab.builds.recipe import RECIPE_VERSION, BuildRecipe, split_source
from pgbenchlab.installs import Installation


def provenance_of(install: Installation) -> dict[str, object] | None:
    """What a build-made installation was built from (with the plan's build name), or where
    prebuilt binaries came from (with the plan's spec), or None for any other installation."""
    if not (install.build or install.binaries):
        return None
    facts = read_provenance(install.bin_dir.parent)
    return None if facts is None else {**facts, "name": install.build or install.binaries}


__all__ = [
    "RECIPE_VERSION",
    "BuildRecipe",
    "BuildsProgress",
    "CachedBuild",
    "Progress",
    "Pruned",
    "cache_root",
    "cached",
    "cached_builds",
    "check",
    "check_configure_options",
    "describe",
    "ensure",
    "ensure_all",
    "find_compiler",
    "installation",
    "provenance_of",
    "prune",
    "prune_trees",
    "read_provenance",
    "split_source",
    "using",
]
