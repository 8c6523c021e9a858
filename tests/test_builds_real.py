"""Real builds: Debian's PostgreSQL 13 source package built once (fast configure options) into
a cache kept between sessions, a second `build` that is a cache hit, a patched build measured
against its base in a campaign, a configure option PostgreSQL rejects, a build stopped by
SIGTERM in the middle of make, and the session's meson build of a real PostgreSQL git tree
(pg_builds.py: Debian's 18 source with a fixed commit, so that the cache keeps its build
between sessions).

The cache is the session's (`build_cache` in conftest.py, `pg_builds.cache_root`).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pg_builds import Pg18Build, git
from pgbenchlab import builds, plan
from pgbenchlab.builds import sources
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.installs import Installation
from pgbenchlab.invocation import command
from pgbenchlab.report.views import compare
from pgbenchlab.report.views import run as runview
from pgbenchlab.store import Store
from support import QuietReporter, descendants, group_members, require_installs, run_errors

pytestmark = pytest.mark.server

PATCH = Path(__file__).parent / "patches" / "0001-planner-without-index-scans.patch"
FAST = '["--without-readline", "--without-icu", "--without-zlib"]'
BUILDS = f"""
[build.pg13]
source = "debian:postgresql-13"
configure = {FAST}

[build.pg13-noindex]
from = "pg13"
patches = ["{PATCH}"]
"""
CAMPAIGN = f"""
[campaign]
name = "patch"
repeats = 3
[defaults]
duration = "1s"
warmup = "0s"
{BUILDS}
[[server]]
name = "base"
install = {{ build = "pg13" }}
settings = {{ shared_buffers = "32MB" }}
[[server]]
name = "patched"
install = {{ build = "pg13-noindex" }}
settings = {{ shared_buffers = "32MB" }}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""


@pytest.fixture(scope="session")
def pg13(build_cache: Path) -> tuple[Installation, float]:
    """PostgreSQL 13 from Debian's source package, and the seconds ensure took."""
    recipe = plan.parse(BUILDS, "b.toml", base=Path("/")).builds[0]
    started = time.monotonic()
    install = builds.ensure(recipe)
    return install, time.monotonic() - started


def test_debian_13_is_built_with_its_provenance(pg13: tuple[Installation, float]) -> None:
    install, took = pg13
    print(f"PostgreSQL 13 build (or cache hit): {took:.1f} s")
    assert install.version.text.startswith("13.") and install.has_pgbench
    assert install.source == "build" and install.build == "pg13"
    prefix = install.bin_dir.parent
    facts = builds.provenance_of(install)
    assert facts is not None
    assert facts["source"]["kind"] == "debian" and facts["version"] == install.version.text
    assert facts["configure"] == ["--without-readline", "--without-icu", "--without-zlib"]
    assert facts["compiler"]["version"] and facts["build_seconds"] > 0
    assert facts["size_bytes"] > 10_000_000 and facts["patches"] == []
    assert list(prefix.glob("lib/**/pg_stat_statements.so"))  # lib/postgresql/ here
    assert (prefix / "build.log").stat().st_size > 0
    assert stat.S_IMODE((prefix / "bin" / "postgres").stat().st_mode) & 0o005 == 0o005


@pytest.mark.alone
def test_a_second_build_is_a_cache_hit(
    pg13: tuple[Installation, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(BUILDS + '[[server]]\nname = "s"\ninstall = { build = "pg13" }\n')
    started = time.monotonic()
    assert main(["build", str(plan_file)]) == 0
    took = time.monotonic() - started
    print(f"cache hit: {took:.2f} s")
    assert took < 2.0
    out = capsys.readouterr().out
    assert out.startswith("pg13: PostgreSQL 13.")
    assert main(["builds", "--json"]) == 0
    listed = capsys.readouterr().out
    assert builds.provenance_of(pg13[0])["key"] in listed  # type: ignore[index]


def test_patched_build_regresses_against_its_base(
    pg13: tuple[Installation, float],
    tmp_path: Path,
    results_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_installs("embedded")
    the_plan = plan.parse(CAMPAIGN, "patch.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        changes = compare.within_campaign(store, "patch", "base", "patched", threshold=0.02)
        servers = {s.name: s.build for s in store.server_records(outcome.campaign_id)}
        keys = store.build_keys()
        shown = runview.run_detail(store, 1)["server_build"]
    tps = {c.metric: c for c in changes}["tps"]
    assert tps.relative_change < -0.5 and tps.verdict == "regressed", tps
    base, patched = servers["base"], servers["patched"]
    assert base and patched and base["source"] == patched["source"]
    assert [p["name"] for p in patched["patches"]] == [PATCH.name] and base["patches"] == []
    assert keys == {base["key"], patched["key"]} and shown is not None
    html = tmp_path / "report.html"
    assert main(["report", "--results", str(results_dir), "-o", str(html)]) == 0
    page = html.read_text()
    assert "build patches" in page and PATCH.name in page
    # A build no campaign refers to is pruned; the two this campaign ran are kept. Pruned in a
    # cache of stand-ins: the shared test cache keeps the other tests' builds.
    stand_ins = tmp_path / "prune-cache"
    for key in [*keys, "0000stray"]:
        (stand_ins / "builds" / key / "bin").mkdir(parents=True)
        (stand_ins / "builds" / key / "bin" / "postgres").write_text("")
        (stand_ins / "builds" / key / "provenance.json").write_text('{"size_bytes": 0}')
    monkeypatch.setenv("PGBENCHLAB_BUILD_CACHE", str(stand_ins))
    assert main(["builds", "--prune", "--results", str(results_dir)]) == 0
    assert {p.name for p in (stand_ins / "builds").iterdir()} == keys


@pytest.mark.alone
def test_configure_option_rejected(
    pg13: tuple[Installation, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        '[build.bad]\nsource = "debian:postgresql-13"\nconfigure = ["--enable-nonsense"]\n'
        '[[server]]\nname = "s"\ninstall = { build = "bad" }\n'
    )
    before = {b.key for b in builds.cached_builds(builds.cache_root())}
    assert main(["build", "-q", str(plan_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "pgbenchlab: error: configure does not know the option(s) --enable-nonsense"
    assert {b.key for b in builds.cached_builds(builds.cache_root())} == before


@pytest.mark.alone
def test_a_configure_option_the_major_does_not_know_is_refused_at_plan_check(
    build_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """13's configure --help is read once (cached by the tarball's digest): an option it does
    not list (a made-up one; 14's --with-ssl) is refused by the plan check, every one at once,
    naming the option and the major, before anything is built; the options it lists pass."""
    sources.debian_tarball("postgresql-13", build_cache)  # the suite's, fetched once
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        f'[build.made-up]\nsource = "debian:postgresql-13"\nconfigure = {FAST[:-1]}, '
        '"--with-nonexistent"]\n'
        '[build.newer]\nsource = "debian:postgresql-13"\nconfigure = ["--with-ssl=openssl"]\n'
        f'[build.fine]\nsource = "debian:postgresql-13"\nconfigure = {FAST[:-1]}, '
        '"--enable-debug", "--disable-spinlocks", "--with-openssl"]\n'
        '[[server]]\nname = "a"\ninstall = { build = "made-up" }\n'
        '[[server]]\nname = "b"\ninstall = { build = "newer" }\n'
        '[[server]]\nname = "c"\ninstall = { build = "fine" }\n'
    )
    before = {b.key for b in builds.cached_builds(builds.cache_root())}
    assert main(["run", "--dry-run", "-q", str(plan_file)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-2:] == [
        "  - builds: build made-up: configure of PostgreSQL 13 (13.16) does not know "
        "--with-nonexistent: remove it from [build.made-up] configure (its `configure --help` "
        "lists the options that major takes)",
        "  - builds: build newer: configure of PostgreSQL 13 (13.16) does not know --with-ssl: "
        "remove it from [build.newer] configure (its `configure --help` lists the options that "
        "major takes)",
    ]
    assert {b.key for b in builds.cached_builds(builds.cache_root())} == before
    fine = plan.load(plan_file).builds[2]
    assert builds.check_configure_options(fine, builds.cache_root())


@pytest.mark.timeout(1800)  # cold: a whole meson build on 2 cores, with other work around
def test_meson_build_of_a_postgresql_git_tree(
    pg18_build: Pg18Build, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        f'{pg18_build.recipe}[[server]]\nname = "s"\ninstall = {{ build = "pg18" }}\n'
    )
    assert main(["build", str(plan_file)]) == 0  # the session's build, from the cache
    assert capsys.readouterr().out.startswith("pg18: PostgreSQL 18.")
    print(f"meson build of the git tree (or cache hit): {pg18_build.seconds:.1f} s")
    made = pg18_build.install
    facts = builds.provenance_of(made)
    assert facts is not None and facts["build_system"] == "meson"
    assert facts["source"]["kind"] == "git" and facts["source"]["identity"] == pg18_build.commit
    assert facts["source"]["ref"] == "release" and facts["version"] == "18.6"
    assert "-Dssl=openssl" in facts["configure"]
    assert made.version.text.startswith("18.") and made.has_pgbench
    assert command.supports_tls(made.binary("pgbench"))
    prefix = made.bin_dir.parent
    assert list(prefix.glob("lib/**/pg_stat_statements.so"))
    assert list(prefix.glob("share/**/pg_stat_statements.control"))
    status = git(pg18_build.repo, "status", "--porcelain").stdout
    assert status == "", "the checkout is never modified"


def running_make(pid: int, timeout: float) -> int:
    """The pid of `make -jN` (the build's, not configure's probes) below pid, once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in descendants(pid):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0] == b"make" and len(argv) > 1 and argv[1].startswith(b"-j"):
                return child
        time.sleep(0.2)
    raise AssertionError(f"no make -jN below {pid} within {timeout:.0f} s")


@pytest.mark.timeout(900)
def test_sigterm_stops_a_build_in_the_middle_of_make(build_cache: Path, tmp_path: Path) -> None:
    """A real build of 13 from its tarball, in a cache of its own (so nothing is cached), is
    sent SIGTERM a few seconds into make: one line, exit 130, make and its compilers gone, the
    staging directory removed, nothing in the cache that looks built."""
    tarball = sources.debian_tarball("postgresql-13", build_cache)  # the suite's, fetched once
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        f'[build.pg13]\nsource = "tar:{tarball}"\nconfigure = {FAST}\n'
        '[[server]]\nname = "s"\ninstall = { build = "pg13" }\n'
    )
    private = tmp_path / "cache"
    env = {**os.environ, "PGBENCHLAB_BUILD_CACHE": str(private)}
    argv = [sys.executable, "-m", "pgbenchlab.cli", "build", str(plan_file)]
    with subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True) as build:
        try:
            make = running_make(build.pid, timeout=600)
            time.sleep(3)  # compiling by now
            group = os.getpgid(make)
            assert any(p != make for p in group_members(group)), "make has started compilers"
            build.send_signal(signal.SIGTERM)
            _, err = build.communicate(timeout=60)
        finally:
            build.kill()
    assert build.returncode == 130, err
    assert err.splitlines()[-1] == (
        "pgbenchlab: interrupted: build pg13 stopped during make: its processes were ended and "
        "its staging directory removed"
    )
    deadline = time.monotonic() + 5  # killed: at most a moment to finish dying
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(group) == [], "make and its compilers are gone"
    assert list((private / "tmp").iterdir()) == []
    assert builds.cached_builds(private) == []
