"""Hostile but fair input in the plan and the options: names that would leave their directory,
numbers that are not finite, an edited script, an unknown baseline, a large matrix's warnings,
and a SQL error in a script reported with its real cause."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab import files
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.errors import UserError
from support import require_installs
from test_cli import cli
from test_plan import LARGE_MATRIX


@pytest.mark.parametrize("parts", [("..",), (".",), ("a", ".."), ("a/../..",), ("",)])
def test_a_path_from_user_text_cannot_leave_its_root(
    parts: tuple[str, ...], tmp_path: Path
) -> None:
    with pytest.raises(UserError, match="would lead out of"):
        files.inside(tmp_path, *parts)
    assert files.inside(tmp_path, "a", "b-1.x") == tmp_path / "a" / "b-1.x"


@pytest.mark.parametrize("name", ["..", ".", ".hidden"])
def test_a_name_that_would_leave_its_directory_is_refused(name: str, tmp_path: Path) -> None:
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(f'[campaign]\nname = "{name}"\n')
    done = cli("run", plan_path, "--results", tmp_path / "results")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "campaign.name" in done.stderr
    assert not (tmp_path / "results").exists()


def test_printed_json_is_valid_json_with_non_finite_values(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(workloads=("select-only",), clients=(1,)))
    with sqlite3.connect(db) as connection:  # pgbench's parsed report may hold NaN
        [stored] = connection.execute("SELECT report_json FROM runs LIMIT 1").fetchone()
        report = json.loads(stored) | {"tps": "NaN!", "lag_avg_ms": "Infinity!"}
        text = json.dumps(report).replace('"NaN!"', "NaN").replace('"Infinity!"', "Infinity")
        connection.execute("UPDATE runs SET report_json = ?", (text,))

    def refuse(token: str) -> None:
        raise AssertionError(f"not JSON: {token}")

    shown = cli("show", "1", "--json", "--results", tmp_path)
    assert shown.returncode == 0, shown.stderr
    shown_report = json.loads(shown.stdout, parse_constant=refuse)["report"]
    assert (shown_report["tps"], shown_report["lag_avg_ms"]) == (None, None)
    exported = cli("export", "--results", tmp_path, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout, parse_constant=refuse)


def test_an_unknown_baseline_is_refused_with_one_server_too(tmp_path: Path) -> None:
    one = SyntheticPlan(servers=(FakeServer("only", "18.1", 1.0, {}),), clients=(1,))
    write_synthetic(tmp_path, one)
    done = cli("report", "--results", tmp_path, "--baseline", "nope")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no server 'nope'" in done.stderr


def test_the_dry_run_groups_its_warnings_and_q_silences_them(tmp_path: Path) -> None:
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(LARGE_MATRIX)
    loud = cli("run", plan_path, "--dry-run")
    assert loud.returncode == 0, loud.stderr
    assert loud.stderr.count("warning:") == 2
    quiet = cli("run", plan_path, "--dry-run", "-q")
    assert quiet.returncode == 0 and "warning:" not in quiet.stderr


@pytest.mark.server
def test_an_edited_script_is_a_changed_plan(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    script = tmp_path / "mine.sql"
    script.write_text("SELECT 1;\n")
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(
        '[campaign]\nname = "edited"\n[defaults]\nduration = "1s"\nwarmup = "0s"\n'
        '[[server]]\nname = "pg"\ninstall = "embedded"\n'
        '[matrix]\nscale = [1]\nclients = [1]\nworkload = [{ script = "mine.sql" }]\n'
    )
    assert cli("run", plan_path, "--results", results_dir, "-q").returncode == 0
    script.write_text("SELECT 2;\n")
    again = cli("run", plan_path, "--results", results_dir, "-q")
    assert again.returncode == 2
    assert f"changed file: {script}" in again.stderr and "--fresh" in again.stderr
    fresh = cli("run", plan_path, "--results", results_dir, "-q", "--fresh")
    assert fresh.returncode == 0, fresh.stderr


@pytest.mark.server
def test_a_sql_error_is_reported_with_its_real_cause(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    (tmp_path / "nope.sql").write_text("SELECT * FROM nope;\n")
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(
        '[campaign]\nname = "cause"\n[defaults]\nduration = "1s"\nwarmup = "0s"\n'
        '[[server]]\nname = "pg"\ninstall = "embedded"\n'
        '[matrix]\nscale = [1]\nclients = [1]\nworkload = [{ script = "nope.sql" }]\n'
    )
    done = cli("run", plan_path, "--results", results_dir, "-q")
    assert done.returncode == 1
    with sqlite3.connect(results_dir / RESULTS_DB) as db:
        [(status, error)] = db.execute("SELECT status, error FROM runs").fetchall()
    assert status == "aborted"
    assert error.startswith('pgbench: error: ERROR:  relation "nope" does not exist'), error
    assert "^" not in error
