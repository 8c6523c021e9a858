"""Shared fixtures: results directories whose clusters are cleaned up, one real campaign, one
headless Chromium, and the build cache with the suite's TLS-capable PostgreSQL 18.

Tests that need real PostgreSQL or a browser skip loudly when an installation is missing, and
fail instead under CI (`ci_guard`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import ci_guard
import netns_hosts
import pg_builds
import report_browser
from pgbenchlab import plan
from pgbenchlab.campaign import remove_clusters, run_campaign
from pgbenchlab.stopsignals import restore_interrupt
from pgbenchlab.telemetry.campaign import FSYNC_TEST_ENV
from support import TINY_TWO_VERSIONS, Campaign, QuietReporter, require_installs

# pg_test_fsync takes about 15 s per campaign; only the telemetry tests that need it turn it on.
os.environ.setdefault(FSYNC_TEST_ENV, "off")

# Property tests explore new examples on every local run, which is how they find bugs; under CI
# they draw the same examples every time, so the suite cannot fail by chance. A bug found
# locally is kept as an explicit @example.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if ci_guard.under_ci():
    settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ci_guard, "ci_guard")
    # A suite started in the background has SIGINT ignored, and every process a test starts
    # would inherit that: the tests that interrupt their processes would wait forever.
    restore_interrupt()


@pytest.fixture
def results_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "results"
    yield path
    remove_clusters(path)


@pytest.fixture(scope="session")
def real_campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    """A real campaign: two major versions, two scales, two workloads, two client counts, two
    repeats (32 runs of 2 s). Shared by the tests that read a results database."""
    require_installs("15", "embedded")
    base = tmp_path_factory.mktemp("campaign")
    the_plan = plan.parse(TINY_TWO_VERSIONS, str(base / "tiny.toml"), base=base)
    reporter = QuietReporter()
    results = base / "results"
    outcome = run_campaign(the_plan, results, reporter)
    yield Campaign(results, the_plan, outcome, reporter)
    remove_clusters(results)


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The build cache the session's builds share (`pg_builds.cache_root`), for every command."""
    root = pg_builds.cache_root(tmp_path_factory)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PGBENCHLAB_BUILD_CACHE", str(root))
        yield root


@pytest.fixture(scope="session")
def pg18_build(build_cache: Path) -> pg_builds.Pg18Build:
    """PostgreSQL 18 with OpenSSL, built by meson from a git tree once per cache (minutes cold:
    its users carry a long timeout), then found in it."""
    return pg_builds.pg18_with_tls(build_cache)


@pytest.fixture(scope="session")
def browser() -> Iterator[report_browser.Browser]:
    """One headless Chromium for the session's browser tests (each page a fresh context). When
    Playwright or chromium is missing, its users skip naming it (and fail under CI)."""
    missing = report_browser.unavailable()
    if missing:
        pytest.skip(missing)
    with report_browser.Browser() as launched:
        yield launched


@pytest.fixture(scope="module")
def test_hosts() -> Iterator[netns_hosts.TestHosts]:
    """Test hosts for one module (each module adds the ones it needs): network namespaces with
    their own sshd, removed afterwards. Root only; skipped (failed under CI) otherwise."""
    missing = netns_hosts.unavailable()
    if missing:
        pytest.skip(missing)
    hosts = netns_hosts.TestHosts()
    try:
        yield hosts
    finally:
        hosts.close()
