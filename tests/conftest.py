"""Shared fixtures: results directories whose clusters are cleaned up, one real campaign, and
one headless Chromium.

Tests that need real PostgreSQL or a browser skip loudly when an installation is missing, and
fail instead under CI (`ci_guard`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import ci_guard
import report_browser
from pgbenchlab import plan, runner
from pgbenchlab.telemetry.campaign import FSYNC_TEST_ENV
from support import TINY_TWO_VERSIONS, Campaign, QuietReporter, require_installs

# pg_test_fsync takes about 15 s per campaign; only the telemetry tests that need it turn it on.
os.environ.setdefault(FSYNC_TEST_ENV, "off")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ci_guard, "ci_guard")


@pytest.fixture
def results_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "results"
    yield path
    runner.remove_clusters(path)


@pytest.fixture(scope="session")
def real_campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    """A real campaign: two major versions, two scales, two workloads, three client counts, two
    repeats (48 runs of 2 s). Shared by the tests that read a results database."""
    require_installs("15", "embedded")
    base = tmp_path_factory.mktemp("campaign")
    the_plan = plan.parse(TINY_TWO_VERSIONS, str(base / "tiny.toml"), base=base)
    reporter = QuietReporter()
    results = base / "results"
    outcome = runner.run_campaign(the_plan, results, reporter)
    yield Campaign(results, the_plan, outcome, reporter)
    runner.remove_clusters(results)


@pytest.fixture(scope="session")
def browser() -> Iterator[report_browser.Browser]:
    """One headless Chromium for the session's browser tests (each page a fresh context). When
    Playwright or chromium is missing, its users skip naming it (and fail under CI)."""
    missing = report_browser.unavailable()
    if missing:
        pytest.skip(missing)
    with report_browser.Browser() as launched:
        yield launched
