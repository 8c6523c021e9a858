"""A suite that cannot pass by skipping (a pytest plugin loaded by conftest.py).

- Under CI (`CI=true`), a skipped test fails: a real-server, browser or root-only test that
  could not run must not let broken work land. Its line names what was missing.
- A test that starts a real PostgreSQL (it calls `support.require_installs`) must carry the
  `server` mark, so the count below and `-m "not server"` can be trusted.
- The summary prints how many real-server tests ran and passed.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

SERVER_MARK = "server"
# Shared fixtures that start real servers: their users are marked without saying so.
SERVER_FIXTURES = {"real_campaign"}
_current: list[pytest.Item] = []
_real_server_passed: set[str] = set()


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def current_item() -> pytest.Item | None:
    """The test being set up or run now (fixtures run inside its setup)."""
    return _current[-1] if _current else None


def require_server_mark() -> None:
    """Called where a test is about to start a real server: it must be marked `server`."""
    item = current_item()
    if item is not None and item.get_closest_marker(SERVER_MARK) is None:
        pytest.fail(f"{item.nodeid} starts a real PostgreSQL but is not marked `server`")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(SERVER_MARK)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and under_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which must run every test: {reason}"
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Counted where reports are gathered: in the one process, or in xdist's controller."""
    if report.when == "call" and report.passed and SERVER_MARK in report.keywords:
        _real_server_passed.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(f"real-server tests executed: {len(_real_server_passed)} passed")
