"""The suite cannot pass by skipping: under CI a missing installation fails the run with a line
naming it, a real-server test must be marked, and the summary counts real-server tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cli_process import run_forked

INNER = """
import pytest
from support import require_installs

@pytest.mark.server
def test_needs_a_missing_installation():
    require_installs("embedded", "99")

def test_starts_a_server_unmarked():
    require_installs("embedded")

@pytest.mark.server
def test_marked_and_passing():
    pass

def test_skips_for_its_own_reason():
    pytest.skip("chromium not installed: browser test NOT run")
"""


def inner_pytest(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest`` on the tests above, in a process of its own (`run_forked`)."""
    (tmp_path / "test_inner.py").write_text(INNER)
    tests_dir = Path(__file__).parent
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(tests_dir)}
    argv = ["-p", "ci_guard", "-rA", "-p", "no:cacheprovider"]
    argv += ["-o", "markers=server", str(tmp_path / "test_inner.py")]
    return run_forked("pytest:console_main", *argv, cwd=tmp_path, env=env, timeout=120)


def test_under_ci_a_missing_installation_fails_and_names_it(tmp_path: Path) -> None:
    done = inner_pytest(tmp_path, "true")
    out = done.stdout
    assert done.returncode == 1, out
    assert "3 failed, 1 passed" in out, out
    assert "skipped under CI=true" in out and "PostgreSQL 99 is not installed here" in out
    assert "chromium not installed" in out
    assert "starts a real PostgreSQL but is not marked `server`" in out
    assert "real-server tests executed: 1 passed" in out


def test_outside_ci_missing_resources_skip_loudly(tmp_path: Path) -> None:
    done = inner_pytest(tmp_path, "")
    out = done.stdout
    assert "1 failed, 1 passed, 2 skipped" in out, out  # the unmarked server test still fails
    assert "PostgreSQL 99 is not installed here: real-server test NOT run" in out
