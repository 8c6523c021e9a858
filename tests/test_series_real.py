"""A patch series against PostgreSQL's own source, Debian's 13.16 (the tarball the build tests
fetch into the session's build cache), applied without compiling: three small patches from a
directory of v1-000N files in order (the second needs the first), the first two from an mbox,
and a series whose second patch fails refused before the build it would have followed starts,
in one line naming that patch, its file and its hunk, with nothing left in the cache.

The patches are tests/patches/series-13/: `git format-patch -v1 --cover-letter` of three commits
on 13.16's files.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from pgbenchlab import builds, plan
from pgbenchlab.builds import cache, sources
from pgbenchlab.builds.builder import identified, patch_files
from pgbenchlab.builds.compile import BuildLog, apply_patches
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST
from test_builds_real import FAST

pytestmark = pytest.mark.server

SERIES = Path(__file__).parent / "patches" / "series-13"
GUC = "src/backend/utils/misc/guc.c"
MANUAL = "src/include/pg_config_manual.h"


@pytest.fixture(scope="module")
def pg13_files(build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the series touches, as Debian's 13 source has them (its tarball fetched into
    the build cache once)."""
    tarball = sources.debian_tarball("postgresql-13", build_cache)
    tree = tmp_path_factory.mktemp("pg13-files")
    wanted = [f"*/{name}" for name in (GUC, MANUAL)]
    unpack = ["tar", "-xf", str(tarball), "-C", str(tree), "--strip-components=1", "--wildcards"]
    subprocess.run([*unpack, *wanted], check=True)
    return tree


def recipes(series: Path, tmp_path: Path, extra: str = "") -> dict[str, builds.BuildRecipe]:
    text = f"""
[build.pg13]
source = "debian:postgresql-13"
configure = {FAST}
[build.series]
from = "pg13"
series = "{series}"
{extra}"""
    return {b.name: b for b in plan.parse(text, "b.toml", base=tmp_path).builds}


def applied(recipe: builds.BuildRecipe, pg13_files: Path, tmp_path: Path) -> Path:
    """A copy of the touched files with the recipe's patches applied, as a build applies them."""
    tree = tmp_path / "tree"
    shutil.copytree(pg13_files, tree)
    log = BuildLog(tmp_path / "patch.log", None)
    try:
        apply_patches(tree, patch_files(recipe), log)
    finally:
        log.close()
    return tree


def test_a_series_of_three_applies_in_order(pg13_files: Path, tmp_path: Path) -> None:
    found = recipes(SERIES, tmp_path, "prefixes = true")
    tree = applied(found["series"], pg13_files, tmp_path)
    manual, guc = (tree / MANUAL).read_text(), (tree / GUC).read_text()
    assert "series test: patches 1 and 2" in manual and "series test: patch 1 */" not in manual
    assert "series test: patch 3" in guc
    first = applied(found["series-p1"], pg13_files, tmp_path / "p1")
    assert "series test: patch 1 */" in (first / MANUAL).read_text()
    assert "series test" not in (first / GUC).read_text()


def test_an_mbox_of_two_applies_in_order(pg13_files: Path, tmp_path: Path) -> None:
    """`git format-patch --stdout` of the first two commits: one mbox, two messages."""
    mbox = tmp_path / "thread.mbox"
    mbox.write_text("".join(p.read_text() for p in sorted(SERIES.glob("v1-000[12]-*.patch"))))
    recipe = recipes(mbox, tmp_path)["series"]
    assert [p.name for p in patch_files(recipe)] == [
        "[PATCH v1 1/3] Series test: a comment after NAMEDATALEN",
        "[PATCH v1 2/3] Series test: the comment edited, and one at PG_SOMAXCONN",
    ]  # the subject as sent (folded over two lines), each message its patch
    manual = (applied(recipe, pg13_files, tmp_path) / MANUAL).read_text()
    assert "series test: patches 1 and 2" in manual


def test_a_series_whose_second_patch_fails_is_refused_before_any_build(
    build_cache: Path, tmp_path: Path
) -> None:
    """The builds in order: another PostgreSQL 13 never built (its own options), then the
    series. The series is tried first: the line names its second patch, the file and the hunk,
    and neither build is made or left half made."""
    broken = tmp_path / "v1"
    shutil.copytree(SERIES, broken)
    second = next(broken.glob("v1-0002-*.patch"))
    text = second.read_text()
    assert text.count(BROKEN_LINE[0]) == 1
    second.write_text(text.replace(*BROKEN_LINE))
    token = f'"CFLAGS=-O2 -DPGBENCHLAB_SERIES_TRIAL={uuid.uuid4().hex}"'
    other = f'[build.other]\nsource = "debian:postgresql-13"\nconfigure = {FAST[:-1]}, {token}]\n'
    found = recipes(broken, tmp_path, other)
    with pytest.raises(BuildError) as refusal:
        builds.ensure_all([found["other"], found["series"]])
    assert str(refusal.value) == REFUSAL.format(name=second.name)
    assert builds.cached(found["other"]) is None, "the other build never started"
    key = identified(found["series"], build_cache, LOCAL_HOST)[3]
    assert not cache.is_complete(cache.build_dir(build_cache, key))
    assert not [p for p in (build_cache / "tmp").iterdir() if p.name.startswith(key)]


# The second patch's second hunk made to expect a line 13.16 does not have.
BROKEN_LINE = ("-#define PG_SOMAXCONN\t10000\n", "-#define PG_SOMAXCONN\t9999\n")
REFUSAL = (
    f"patch {{name}} (2 of 3) does not apply: patch failed: {MANUAL}:107 (hunk #2 of {MANUAL}: "
    "@@ -107,7 +107,7 @@)"
)
