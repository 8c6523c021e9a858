"""`run --check`: everything a plan needs verified without running it, every problem at once;
and custom scripts parsed by the campaign's pgbench before anything starts (by `run`, its dry
run and the check alike)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pgbenchlab.cli import main
from pgbenchlab.invocation.scripts import aborted_at, command_lines, parse_problem
from support import require_installs
from test_faults import CLI, alive, postmaster_pid, wait_for

BROKEN = "\\set aid random(1, \nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
FINE = "\\set aid random(1, 100000 * :scale)\nSELECT :aid;\n"
PLAN = """
[build.b]
source = "dir:{tree}"
[[server]]
name = "pg"
install = "15"
settings = {{ shared_buffers = "{buffers}" }}
[[server]]
name = "built"
install = {{ build = "b" }}
[matrix]
clients = [1]
workload = [{{ script = "{script}" }}, "select-only"]
"""


def plan_file(tmp_path: Path, script: str, buffers: str = "32MB") -> Path:
    tree = tmp_path / "src"
    tree.mkdir(exist_ok=True)
    (tree / "configure").write_text("PACKAGE_VERSION='15.99'\n")  # a tree never built here
    (tmp_path / "script.sql").write_text(script)
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(tree=tree, buffers=buffers, script=tmp_path / "script.sql"))
    return path


@pytest.fixture(autouse=True)
def own_build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PGBENCHLAB_BUILD_CACHE", str(cache))
    return cache


@pytest.mark.parametrize("command", [["run"], ["run", "--dry-run"], ["run", "--check"]])
def test_a_script_pgbench_cannot_parse_is_refused_before_anything_starts(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    plan = plan_file(tmp_path, BROKEN)
    assert main([command[0], str(plan), *command[1:], "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert f"script {tmp_path / 'script.sql'}: pgbench cannot parse it: line 1: syntax error" in err
    assert 'in command "set"' in err and "connect" not in err
    assert not results.exists()


def test_the_check_judges_what_it_can_and_leaves_the_unmade_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], own_build_cache: Path
) -> None:
    results = tmp_path / "results"
    plan = plan_file(tmp_path, FINE, buffers="32 bananas")
    assert main(["run", str(plan), "--check", "--results", str(results)]) == 2
    captured = capsys.readouterr()
    assert "server pg: setting shared_buffers = '32 bananas': invalid value" in captured.err
    out = captured.out
    assert out.startswith("checks before the campaign starts:")
    assert "build b (not made yet)" in out
    assert "scripts" in out and "passed" in out.split("scripts", 1)[1].splitlines()[0]
    assert not results.exists()
    assert not any(own_build_cache.glob("builds/*")), "the check builds nothing"

    plan = plan_file(tmp_path, FINE)
    assert main(["run", str(plan), "--check", "--json", "--results", str(results)]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["server settings"]["outcome"] == "passed"  # judged by the real postgres 15
    assert checks["server settings"]["later"] == [
        "server built: its settings (build b (not made yet)) are judged when the campaign starts"
    ]
    assert checks["scripts"]["outcome"] == "passed"
    assert not results.exists()


def test_only_what_pgbench_says_before_connecting_is_a_problem() -> None:
    said = (
        'pgbench: error: /x/script.sql:1: syntax error in command "set"\n\\set a random(1,\n'
        "                 ^ error found here\n"
    )
    assert parse_problem(said).startswith('/x/script.sql:1: syntax error in command "set"')
    refused = 'pgbench: error: connection to server on socket "/x/.s.PGSQL.1" failed: No such'
    assert parse_problem(refused + "\npgbench: error: could not create connection") == ""
    old = 'connection to database "x" failed:\ncould not connect to server: No such file'
    assert parse_problem(old) == ""


MISSING_COLUMN = """\\set aid random(1, 100000 * :scale)
BEGIN;
-- the balance, then a column no pgbench table has
SELECT abalance
  FROM pgbench_accounts WHERE aid = :aid \\gset
SELECT nonexistent FROM pgbench_accounts WHERE aid = :aid;
END;
"""
SET_UP = """[[server]]
name = "pg"
install = "15"
[dataset]
setup_sql = "setup.sql"
[matrix]
clients = [1]
workload = [{{ script = "{script}" }}]
"""


@pytest.mark.server
def test_the_check_runs_each_script_once_on_a_dataset_made_as_the_plan_makes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A column no table has is refused with the script's line, the built server (not made)
    left alone; a table the plan's setup SQL makes is there to be used."""
    require_installs("15")
    results = tmp_path / "results"
    plan = plan_file(tmp_path, MISSING_COLUMN)
    assert main(["run", str(plan), "--check", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        f"pgbenchlab: error: script {tmp_path / 'script.sql'}, line 6: ERROR: column "
        '"nonexistent" does not exist (on a scale-1 dataset of debian-15, PostgreSQL 15.'
    ), err
    assert not results.exists()

    (tmp_path / "setup.sql").write_text("CREATE TABLE extra (n int); INSERT INTO extra VALUES (1);")
    (tmp_path / "script.sql").write_text("SELECT n FROM extra;\n")
    plan.write_text(SET_UP.format(script=tmp_path / "script.sql"))
    assert main(["run", str(plan), "--check", "--json", "--results", str(results)]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["scripts on a dataset"]["outcome"] == "passed"
    assert not results.exists()


def test_a_failed_command_is_found_at_its_line_as_pgbench_counts_commands() -> None:
    assert command_lines(MISSING_COLUMN) == [1, 2, 4, 6, 7]
    script = (
        "\\set a 1\n/* a comment; with a semicolon */\nSELECT ';' \\; SELECT $$x;$$;"
        ' SELECT "a;b" FROM t;\n\\sleep \\\n  1 ms\n\n-- done\nINSERT INTO t VALUES (:a)'
    )
    assert command_lines(script) == [1, 3, 3, 4, 8]
    new = (
        "pgbench: error: client 0 script 0 aborted in command 3 query 0: ERROR:  column "
        '"nonexistent" does not exist\nLINE 1: SELECT nonexistent FROM pgbench_accounts\n'
    )
    said = 'line 6: ERROR: column "nonexistent" does not exist'
    assert aborted_at(MISSING_COLUMN, new) == said
    old = (
        "client 0 aborted in command 3 (SQL) of script 0; ERROR:  column "
        '"nonexistent" does not exist\n'
    )
    assert aborted_at(MISSING_COLUMN, old) == said
    assert aborted_at(MISSING_COLUMN, "pgbench: error: could not connect") is None


@pytest.mark.server
def test_a_killed_checks_trial_is_stopped_by_clean(tmp_path: Path) -> None:
    """kill -9 while the trial's cluster runs: its postmaster stays, and `clean` (of any
    results directory, as the next check would) stops it and removes its directory."""
    require_installs("15")
    temp = Path(tempfile.mkdtemp(prefix="pgbl-trial-", dir="/var/tmp"))
    temp.chmod(0o755)  # the server account makes its cluster inside
    env = {**os.environ, "TMPDIR": str(temp)}
    results = tmp_path / "results"
    try:
        plan = plan_file(tmp_path, "SELECT pg_sleep(50);\n")
        argv = [*CLI, "run", str(plan), "--check", "--results", str(results)]
        with subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL) as check:
            wait_for(lambda: list(temp.glob("pgbenchlab-trial-*/work/*")), timeout=120)
            check.kill()
        (data,) = temp.glob("pgbenchlab-trial-*/data")
        pid = postmaster_pid(data)
        assert pid is not None and alive(pid)
        cleaned = subprocess.run(
            [*CLI, "clean", "--results", str(results), "--json"],
            env=env, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        assert json.loads(cleaned.stdout)["removed"] == [str(data)]
        assert not alive(pid) and not list(temp.iterdir())
    finally:
        shutil.rmtree(temp, ignore_errors=True)
