"""Builds without compiling: the plan's [build.NAME] tables, recipes, cache keys, the flags
old majors get, and the refusals that come before any compiler runs (bad ref, missing source,
a patch that does not apply, an unknown compiler): exit 2, one line, nothing built."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cli_process import run_cli
from pgbenchlab import builds, installs, plan
from pgbenchlab.builds import cache, sources
from pgbenchlab.builds.incremental import persistent_tree
from pgbenchlab.builds.recipe import (
    Compiler,
    PatchFile,
    SourceIdentity,
    cache_key,
    pgbench_dir,
    version_flags,
    version_key,
)
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli import main
from pgbenchlab.errors import BuildError, PlanError
from pgbenchlab.hosts import LocalHost
from pgbenchlab.records.version import parse_version
from pgbenchlab.store import Store

PATCHES = Path(__file__).parent / "patches"
BUILDS_PLAN = """
[build.base]
source = "debian:postgresql-13"
configure = ["--without-readline"]

[build.patched]
from = "base"
patches = ["p/0001.patch"]

[[server]]
name = "base"
install = { build = "base" }
[[server]]
name = "patched"
install = { build = "patched" }
[[server]]
name = "pg18"
install = "embedded"
"""


def parse(text: str, base: Path) -> plan.Plan:
    return plan.parse(text, "p.toml", base=base)


def test_builds_parse_with_from_resolved(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "0001.patch").write_text("one\n")
    the_plan = parse(BUILDS_PLAN, tmp_path)
    base, patched = the_plan.builds
    assert (base.name, base.source, base.configure, base.compiler) == (
        "base",
        "debian:postgresql-13",
        ("--without-readline",),
        "gcc",
    )
    assert patched.source == base.source and patched.configure == base.configure
    assert patched.patches == (str(tmp_path / "p" / "0001.patch"),)
    assert patched.based_on == "base"
    assert [s.install for s in the_plan.servers] == ["build:base", "build:patched", "embedded"]
    assert [b.name for b in the_plan.needed_builds] == ["base", "patched"]
    digest = the_plan.digest
    (tmp_path / "p" / "0001.patch").write_text("two\n")
    assert the_plan.digest != digest, "an edited patch is a changed plan"


def test_unused_builds_are_not_needed_and_paths_resolve(tmp_path: Path) -> None:
    text = '[build.x]\nsource = "git:src/pg"\nref = "REL_17_STABLE"\ncompiler = "tools/cc"\n'
    the_plan = parse(text, tmp_path)
    (x,) = the_plan.builds
    assert x.source == f"git:{tmp_path / 'src' / 'pg'}" and x.ref == "REL_17_STABLE"
    assert x.compiler == str(tmp_path / "tools" / "cc")
    assert the_plan.needed_builds == ()
    chosen = parse(text + '[pgbench]\ninstall = { build = "x" }\n', tmp_path)
    assert chosen.pgbench_install == "build:x" and chosen.needed_builds == (x,)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ('[build.a]\nsource = "debian:postgresql-13"\nsauce = 1', "build.a.sauce", "unknown key"),
        ('[build.a]\nfrom = "nope"', "build.a.from", "no build 'nope'"),
        ('[build.a]\nfrom = "b"\n[build.b]\nfrom = "a"', "build.", "cycle: "),
        ('[build.a]\nconfigure = ["--x"]', "build.a", 'needs a "source"'),
        ('[build.a]\nsource = "svn:/x"', "build.a.source", "is not one of debian:PACKAGE"),
        ('[build.a]\nsource = "debian:Bad Name"', "build.a.source", "not a Debian source"),
        ('[build.a]\nsource = "tar:/x"\nref = "v1"', "build.a.ref", "git: source only"),
        ('[build.a]\nsource = "tar:/x"\nconfigure = "--x"', "build.a.configure", "list of"),
        ('[build.a]\nsource = "tar:/x"\npatches = ["no.patch"]', "build.a.patches", "no patch"),
        (
            '[build.a]\nsource = "tar:/x"\n[build.b]\nfrom = "a"\nconfigure = []',
            "build.b.configure",
            "may only add patches",
        ),
        (
            '[build.a]\nsource = "tar:/x"\n[[server]]\nname = "s"\ninstall = { build = "b" }',
            "server[0].install.build",
            "no [build.b] in the plan",
        ),
        (
            '[[server]]\nname = "s"\ninstall = { tag = "b" }',
            "server[0].install",
            '{ build = "NAME" }',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nbuild_system = "cmake"',
            "build.a.build_system",
            'must be "autoconf" or "meson"',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nconfigure = ["--prefix=/"]',
            "build.a.configure",
            '"--prefix=/": pgbenchlab sets the installation directories',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nconfigure = ["--with-openssl", "--bindir=/usr/bin"]',
            "build.a.configure",
            '"--bindir=/usr/bin": pgbenchlab sets the installation directories',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nconfigure = ["CC=clang"]',
            "build.a.configure",
            '"CC=clang": pgbenchlab sets CC from the build\'s compiler',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nbuild_system = "meson"\nconfigure = ["-Dprefix=/"]',
            "build.a.configure",
            '"-Dprefix=/": pgbenchlab sets the installation directories',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nbuild_system = "meson"\nconfigure = ["--prefix", "/"]',
            "build.a.configure",
            '"--prefix": pgbenchlab sets the installation directories',
        ),
        (
            '[build.a]\nsource = "tar:/x"\nbuild_system = "meson"\nconfigure = ["-D", "libdir=x"]',
            "build.a.configure",
            '"-D libdir=x": pgbenchlab sets the installation directories',
        ),
    ],
)
def test_build_plan_mistakes_are_one_line(text: str, where: str, message: str) -> None:
    with pytest.raises(PlanError) as raised:
        parse(text, Path("/tmp"))
    text_of = str(raised.value)
    assert f"p.toml: {where}" in text_of and message in text_of
    assert "\n" not in text_of


def test_cycle_names_the_chain() -> None:
    with pytest.raises(PlanError, match="a → b → a"):
        parse('[build.a]\nfrom = "b"\n[build.b]\nfrom = "a"', Path("/tmp"))


def identity(digest: str = "d1") -> SourceIdentity:
    return SourceIdentity("tar", "/x.tar.bz2", digest, "13.16")


def test_cache_key_follows_contents_not_paths() -> None:
    gcc = Compiler("/usr/bin/gcc", "gcc (Debian 12.2.0-14) 12.2.0")
    patch = PatchFile("a.patch", "/p/a.patch", "s1")
    key = cache_key(identity(), (patch,), ("--x",), gcc)
    moved = SourceIdentity("tar", "/elsewhere/x.tar.bz2", "d1", "13.16")
    assert cache_key(moved, (PatchFile("b.patch", "/q/b.patch", "s1"),), ("--x",), gcc) == key
    assert cache_key(identity("d2"), (patch,), ("--x",), gcc) != key
    assert cache_key(identity(), (), ("--x",), gcc) != key
    assert cache_key(identity(), (patch,), ("--y",), gcc) != key
    clang = Compiler("/usr/bin/clang", "Debian clang version 14.0.6")
    assert cache_key(identity(), (patch,), ("--x",), clang) != key


def test_meson_is_asked_for_inherited_and_part_of_the_key(tmp_path: Path) -> None:
    text = (
        '[build.m]\nsource = "tar:/x.tar.bz2"\nbuild_system = "meson"\n'
        'configure = ["-Dreadline=disabled"]\n[build.p]\nfrom = "m"\n'
        '[build.a]\nsource = "tar:/x.tar.bz2"\n'
    )
    meson, patched, autoconf = parse(text, tmp_path).builds
    assert (meson.build_system, patched.build_system, autoconf.build_system) == (
        "meson",
        "meson",
        "autoconf",
    )
    gcc = Compiler("/usr/bin/gcc", "gcc 12")
    key = cache_key(identity(), (), (), gcc)
    assert cache_key(identity(), (), (), gcc, "autoconf") == key, "autoconf keys did not move"
    assert cache_key(identity(), (), (), gcc, "meson") != key


def test_old_majors_get_their_flags_recorded() -> None:
    assert version_key("9.6.24") == (9, 6) and version_key("18devel") == (18, 0)
    assert version_flags("13.16", ("--x",)) == (("--x",), [])
    options, reasons = version_flags("9.4.26", ("--x", "CFLAGS=-O1"))
    assert options[0] == "--x" and options[1].startswith("CFLAGS=-O1 ")
    assert "-std=gnu99" in options[1] and "-fno-strict-aliasing" in options[1]
    assert len(reasons) == 2
    options, reasons = version_flags("11.22", ())
    assert options == ("CFLAGS=-O2 " + options[0].removeprefix("CFLAGS=-O2 "),)
    assert "-std=gnu99" not in options[0] and len(reasons) == 1
    assert pgbench_dir("9.4.26") == "contrib/pgbench" and pgbench_dir("13.16") == "src/bin/pgbench"
    assert pgbench_dir("") == "src/bin/pgbench"


def test_a_builds_time_reads_as_every_other_duration() -> None:
    """The build time `show` and the report give is written as the terminal writes durations
    (`durations.duration_text`)."""
    facts = {"name": "pg13", "source": {"kind": "tarball"}, "build_seconds": 95.4}
    assert ("build time", "1 min 35 s") in builds.describe(facts)
    assert ("build time", "-") in builds.describe({"source": {"kind": "tarball"}})


def test_builds_resolve_only_by_their_name() -> None:
    version = parse_version("postgres (PostgreSQL) 13.16")
    built = installs.Installation("build", Path("/c/bin"), version, True, True, build="base")
    debian = installs.Installation("debian", Path("/d/bin"), version, True, True)
    assert built.name == "build-base"
    assert installs.resolve("build:base", [debian, built]) is built
    assert installs.resolve("13", [built, debian]) is debian
    assert installs.newest_pgbench([built, debian]) is debian


# -- refusals before anything is compiled ------------------------------------------------------


@pytest.fixture
def build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PGBENCHLAB_BUILD_CACHE", str(root))
    return root


def fake_tree(path: Path) -> Path:
    """A directory that looks like a source tree to `identify` (its configure never runs)."""
    (path / "src").mkdir(parents=True)
    (path / "configure").write_text("#!/bin/sh\nPACKAGE_VERSION='13.16'\nexit 1\n")
    (path / "src" / "guc.c").write_text("one\ntwo\nthree\n")
    return path


def refused(tmp_path: Path, build_table: str, capsys: pytest.CaptureFixture[str]) -> str:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(f'{build_table}\n[[server]]\nname = "s"\ninstall = {{ build = "b" }}\n')
    assert main(["build", "-q", str(plan_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def assert_nothing_built(root: Path) -> None:
    assert cache.cached_builds(root) == []
    assert not (root / "tmp").exists() or not any((root / "tmp").iterdir())


def test_missing_source_is_refused(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(tmp_path, '[build.b]\nsource = "dir:no/such/tree"', capsys)
    assert "does not exist" in err and "no/such/tree" in err
    assert_nothing_built(build_cache)


def test_bad_ref_is_refused(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = fake_tree(tmp_path / "repo")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    err = refused(tmp_path, '[build.b]\nsource = "git:repo"\nref = "REL_99_STABLE"', capsys)
    assert 'ref "REL_99_STABLE" is not a commit, tag or branch' in err
    assert_nothing_built(build_cache)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    recipe = builds.BuildRecipe("b", f"git:{repo}", "HEAD")
    found = sources.identify(recipe, build_cache)
    assert found.identity == head.stdout.strip() and found.version == "13.16"


def test_patch_that_does_not_apply_names_patch_and_hunk(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = fake_tree(tmp_path / "tree")
    (tmp_path / "bad.patch").write_text(
        "--- a/src/guc.c\n+++ b/src/guc.c\n@@ -1,3 +1,3 @@\n one\n-zwei\n+deux\n three\n"
    )
    before = (tree / "src" / "guc.c").read_text()
    err = refused(tmp_path, f'[build.b]\nsource = "dir:{tree}"\npatches = ["bad.patch"]', capsys)
    assert "patch bad.patch does not apply: patch failed: src/guc.c:1" in err
    assert (tree / "src" / "guc.c").read_text() == before  # the source is never modified
    assert_nothing_built(build_cache)


def test_unknown_compiler_is_refused(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = fake_tree(tmp_path / "tree")
    err = refused(tmp_path, f'[build.b]\nsource = "dir:{tree}"\ncompiler = "no-such-cc"', capsys)
    assert 'compiler "no-such-cc" not found' in err
    assert_nothing_built(build_cache)


def test_a_failed_configure_leaves_its_log_and_no_build(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = fake_tree(tmp_path / "tree")
    (tree / "configure").write_text("#!/bin/sh\necho 'configure: error: no luck here'\nexit 1\n")
    (tree / "configure").chmod(0o755)
    err = refused(tmp_path, f'[build.b]\nsource = "dir:{tree}"', capsys)
    assert "configure failed: configure: error: no luck here (log: " in err
    assert_nothing_built(build_cache)
    (log,) = (build_cache / "logs").iterdir()
    assert "no luck here" in log.read_text()


HELP_ONLY = """#!/bin/sh
PACKAGE_VERSION='9.6.24'
ac_unique_file="src/backend/x.c"
test -f src/backend/x.c || { echo "configure: error: cannot find sources" >&2; exit 1; }
cat <<'END'
  --with-openssl          build with OpenSSL support
  --without-readline      do not use GNU Readline
  --enable-debug          build with debugging symbols (-g)
END
"""


def test_configure_options_are_judged_by_the_source_s_own_help(
    tmp_path: Path, build_cache: Path
) -> None:
    """The options a tree's `configure --help` lists pass (with or without, enable or disable,
    _ for -); the others are refused together, naming the major; a Debian package not fetched
    yet is left to configure itself, and nothing is fetched for it."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "configure").write_text(HELP_ONLY)
    fine = ("--with-openssl", "--with-readline", "--with_openssl", "--disable-debug", "CFLAGS=-O0")
    assert builds.check_configure_options(
        builds.BuildRecipe("a", f"dir:{tree}", configure=fine), build_cache
    )
    bad = builds.BuildRecipe("b", f"dir:{tree}", configure=("--with-ssl=openssl", "--enable-nls"))
    with pytest.raises(BuildError) as refused:
        builds.check_configure_options(bad, build_cache)
    assert str(refused.value).startswith(
        "build b: configure of PostgreSQL 9.6 (9.6.24) does not know --with-ssl, --enable-nls: "
        "remove them from [build.b] configure"
    )
    unfetched = builds.BuildRecipe("c", "debian:postgresql-99", configure=("--with-openssl",))
    assert not builds.check_configure_options(unfetched, build_cache)
    assert not (build_cache / "sources").exists()


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGBENCHLAB_BUILD_CACHE", "/somewhere/builds")
    assert cache.cache_root() == Path("/somewhere/builds")
    monkeypatch.delenv("PGBENCHLAB_BUILD_CACHE")
    expected = cache.ROOT_CACHE if os.geteuid() == 0 else Path.home()
    assert cache.cache_root().is_relative_to(expected)


def scripted_tree(path: Path) -> Path:
    """A tree whose configure and Makefiles install stand-in programs that answer -V like
    PostgreSQL 13: the cache, staging, provenance and pruning without a compiler."""
    tree = fake_tree(path)
    (tree / "configure").write_text(
        "#!/bin/sh\nPACKAGE_VERSION='13.16'\necho \"$@\" > configured\n"
    )
    (tree / "configure").chmod(0o755)
    program = "#!/bin/sh\\necho 'postgres (PostgreSQL) 13.16'\\n"
    install = "\n".join(
        f'\tmkdir -p $(DESTDIR)$(PREFIX)/bin && printf "{program}" > $(DESTDIR)$(PREFIX)/bin/{p}'
        f" && chmod 755 $(DESTDIR)$(PREFIX)/bin/{p}"
        for p in ("postgres", "initdb", "pgbench")
    )
    (tree / "Makefile").write_text(
        "PREFIX := $(shell sed 's/.*--prefix=\\([^ ]*\\).*/\\1/' configured)\n"
        f"all:\n\techo compiled\ninstall:\n{install}\n"
    )
    statements = tree / "contrib" / "pg_stat_statements"
    statements.mkdir(parents=True)
    (statements / "Makefile").write_text("all:\n\ttrue\ninstall:\n\ttrue\n")
    return tree


def test_build_cache_stages_hits_and_prunes(tmp_path: Path, build_cache: Path) -> None:
    tree = scripted_tree(tmp_path / "tree")
    recipe = builds.BuildRecipe("s", f"dir:{tree}", configure=("--x",))
    phases: list[str] = []
    made = builds.ensure(recipe, lambda phase, _: phases.append(phase))
    assert phases == ["fetch", "configure", "make", "install", "done"]
    assert made.build == "s" and made.version.text == "13.16" and made.has_pgbench
    prefix = made.bin_dir.parent
    assert prefix.parent == build_cache / "builds"
    facts = builds.provenance_of(made)
    assert facts is not None and facts["name"] == "s" and facts["key"] == prefix.name
    assert facts["configure_applied"] == ["--x"] and facts["source"]["kind"] == "dir"
    assert "compiled" in (prefix / "build.log").read_text()
    assert not any((build_cache / "tmp").iterdir()) and not any((build_cache / "logs").iterdir())
    phases.clear()
    again = builds.ensure(recipe, lambda phase, _: phases.append(phase))
    assert again == made and phases == [], "a cache hit builds nothing"
    other = builds.ensure(builds.BuildRecipe("o", f"dir:{tree}", configure=("--y",)))
    assert other.bin_dir != made.bin_dir
    assert [b.key for b in builds.prune(build_cache, {prefix.name}).removed] == [
        other.bin_dir.parent.name
    ]
    assert [b.key for b in builds.cached_builds(build_cache)] == [prefix.name]


def test_prune_leaves_what_a_running_command_uses(tmp_path: Path, build_cache: Path) -> None:
    """A command holds the builds and build trees it uses until it ends (`builds.using`, as
    `main` does for every command): `builds --prune` in another process skips and names them,
    and deletes them once the command is over."""
    tree = scripted_tree(tmp_path / "tree")
    results = tmp_path / "other-results"
    results.mkdir()
    with Store(results / RESULTS_DB):
        pass  # a results database no campaign of which ran these builds
    prune = ("builds", "--prune", "--results", results)
    with builds.using():
        key = builds.ensure(builds.BuildRecipe("s", f"dir:{tree}")).bin_dir.parent.name
        with persistent_tree(build_cache, identity(), (), Compiler("gcc", "gcc 12"), None) as t:
            t.path.mkdir(parents=True)
        (tree_key,) = [p.name for p in (build_cache / "trees").iterdir()]
        done = run_cli(*prune)
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip() == (
            "pruned 0 build(s), 0 MB; kept 0 that campaigns ran; incremental build trees: 0 MB; "
            f"left in use by a running command: {key}, tree {tree_key}"
        )
        assert [b.key for b in builds.cached_builds(build_cache)] == [key]
        assert (build_cache / "trees" / tree_key).is_dir()
    done = run_cli(*prune)
    assert done.returncode == 0 and "pruned 1 build(s)" in done.stderr, done.stderr
    assert "in use" not in done.stderr
    assert builds.cached_builds(build_cache) == [] and not any((build_cache / "trees").iterdir())


def test_a_build_start_removes_staging_a_killed_build_left(
    tmp_path: Path, build_cache: Path
) -> None:
    """tmp/KEY.PID left by a build killed outright goes at the next build's start; a live
    build's (its key locked) stays."""
    cache.prepare_root(build_cache)
    abandoned, live = build_cache / "tmp" / "deadkey.4000000", build_cache / "tmp" / "livekey.1"
    for staging in (abandoned, live):
        (staging / "src").mkdir(parents=True)
    held = LocalHost().lock(build_cache / "locks" / "livekey.lock")
    try:
        builds.ensure(builds.BuildRecipe("s", f"dir:{scripted_tree(tmp_path / 'tree')}"))
        assert sorted(p.name for p in (build_cache / "tmp").iterdir()) == ["livekey.1"]
    finally:
        held.release()


def test_concurrent_campaigns_build_once(tmp_path: Path, build_cache: Path) -> None:
    tree = scripted_tree(tmp_path / "tree")
    counter = tmp_path / "makes"
    makefile = (tree / "Makefile").read_text()
    (tree / "Makefile").write_text(
        makefile.replace("echo compiled", f"echo x >> {counter}; sleep 1")
    )
    recipe = builds.BuildRecipe("s", f"dir:{tree}")
    with ThreadPoolExecutor(2) as pool:
        made = list(pool.map(lambda _: builds.ensure(recipe), range(2)))
    assert made[0] == made[1]
    assert counter.read_text() == "x\n", "the second waited for the first, then found its build"


def test_run_refuses_a_bad_build_before_any_run(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = fake_tree(tmp_path / "tree")
    (tmp_path / "bad.patch").write_text("--- a/src/nope.c\n+++ b/src/nope.c\n@@ -1 +1 @@\n-a\n+b\n")
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        f'[build.b]\nsource = "dir:{tree}"\npatches = ["bad.patch"]\n'
        '[[server]]\nname = "s"\ninstall = { build = "b" }\n'
    )
    results = tmp_path / "results"
    assert main(["run", "-q", str(plan_file), "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    refusal = "patch bad.patch does not apply: src/nope.c: No such file or directory"
    assert err == f"pgbenchlab: error: {refusal}"
    assert not results.exists()
    assert_nothing_built(build_cache)


def meson_tree(path: Path) -> Path:
    """A tiny tree real meson configures (it has PostgreSQL's readline option, nothing else)."""
    path.mkdir(parents=True)
    (path / "meson.build").write_text("project('postgresql', 'c', version: '18.6')\n")
    (path / "meson_options.txt").write_text("option('readline', type: 'feature', value: 'auto')\n")
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ('["-Dnonsense=1"]', 'meson does not know the option(s) "nonsense"'),
        ('["--without-readline"]', "meson does not know the option(s) --without-readline"),
        ('["-Dreadline=maybe"]', 'meson setup failed: meson.build:1:0: ERROR: Value "maybe"'),
    ],
)
def test_meson_refuses_options_in_one_line(
    options: str,
    message: str,
    tmp_path: Path,
    build_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree = meson_tree(tmp_path / "tree")
    table = f'[build.b]\nsource = "dir:{tree}"\nbuild_system = "meson"\nconfigure = {options}'
    err = refused(tmp_path, table, capsys)
    assert err.startswith(f"pgbenchlab: error: {message}"), err
    assert_nothing_built(build_cache)


def test_meson_needs_a_tree_that_has_it(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = fake_tree(tmp_path / "tree")
    err = refused(tmp_path, f'[build.b]\nsource = "dir:{tree}"\nbuild_system = "meson"', capsys)
    assert 'build_system = "meson" needs a tree with meson.build' in err
    assert_nothing_built(build_cache)


def test_prune_needs_no_locks_directory_and_a_bad_lock_path_fails_at_once(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    for key in ("kept", "stray"):
        (root / "builds" / key / "bin").mkdir(parents=True)
        (root / "builds" / key / "bin" / "postgres").write_text("")
        (root / "builds" / key / "provenance.json").write_text('{"size_bytes": 0}')
    assert [b.key for b in builds.prune(root, {"kept"}).removed] == ["stray"]
    with (
        pytest.raises(BuildError, match=r"cannot lock .*nowhere"),
        cache.build_lock(tmp_path / "nowhere", "k", None),
    ):
        pass
