"""`cli_process.run_cli` stands for ``python -m pgbenchlab.cli``: the same exit code and output,
in the call's own directory and environment; a call that runs too long is killed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cli_process import CLI, run_cli


def test_a_call_is_what_the_real_command_line_does(tmp_path: Path) -> None:
    args = ("run", "missing.toml", "--results", "r")  # relative: to the call's directory
    real = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    forked = run_cli(*args, cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert real.returncode == 2
    assert real.stderr.startswith("pgbenchlab: error: ") and "missing.toml" in real.stderr
    assert not (tmp_path / "r").exists()


def test_each_call_has_its_own_environment(tmp_path: Path) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text('[[server]]\nname = "x"\ndsn = "host=db1 dbname=bench"\n')
    args = ("run", plan, "--dry-run", "--results", tmp_path / "r")
    refused = run_cli(*args, env={"PGPORT": "not-a-port"})
    assert refused.returncode == 2
    assert "port 'not-a-port' is not a port number" in refused.stderr
    assert run_cli(*args, env={"PGPORT": "5433"}).returncode == 0


def test_a_call_past_its_timeout_is_killed(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("installs", timeout=0.001)
    assert run_cli("--version").stdout.startswith("pgbenchlab ")
