"""The command line: bad input ends with exit 2, one line and nothing written; the reading
commands show a real campaign's results."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import polars as pl
import pytest

from cli_process import run_cli
from support import Campaign, require_installs

PLAN = """
[campaign]
name = "c"
[defaults]
duration = "2s"
warmup = "0s"
[[server]]
name = "pg"
{server}
[matrix]
scale = [1]
clients = [1]
"""


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def foreign_dir(tmp_path: Path) -> str:
    path = tmp_path / "someone-elses"
    path.mkdir()
    (path / "PG_VERSION").write_text("15\n")
    return str(path)


BAD_SERVERS = {
    "unknown install": ('install = "9.4"', 'no installation matches "9.4"'),
    "unknown setting": (
        'install = "embedded"\nsettings = { shared_bufers = "1GB" }',
        'did you mean "shared_buffers"',
    ),
    "unreachable external": (
        'dsn = "host=127.0.0.1 port={port} user=x dbname=y connect_timeout=3"',
        "cannot connect to external server pg",
    ),
    "bad connection string": ('dsn = "host=x port"', "invalid connection string"),
    "cpus the machine lacks": ('install = "embedded"\ncpus = "0,4095"', "which this machine lacks"),
    "foreign data dir": (
        'install = "embedded"\ndata_dir = "{foreign}"',
        "not created by pgbenchlab",
    ),
}


@pytest.mark.server
@pytest.mark.parametrize("case", sorted(BAD_SERVERS))
def test_bad_servers_exit_2_with_one_line_and_write_nothing(case: str, tmp_path: Path) -> None:
    require_installs("embedded")
    server, message = BAD_SERVERS[case]
    server = server.replace("{port}", str(free_port()))
    server = server.replace("{foreign}", foreign_dir(tmp_path))
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN.format(server=server))
    results = tmp_path / "results"
    done = cli("run", plan_path, "--results", results)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgbenchlab: error: "), done.stderr
    assert message in lines[0]
    assert not results.exists(), "nothing may be written for a plan that cannot run"


@pytest.mark.server
def test_unreachable_data_dir_for_the_server_account(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root switches to a server account: test NOT run")
    require_installs("embedded")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN.format(server=f'install = "embedded"\ndata_dir = "{private}/data"'))
    done = cli("run", plan_path, "--results", tmp_path / "results")
    assert done.returncode == 2
    assert "cannot create this directory" in done.stderr
    assert not (private / "data").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.toml"], "cannot read the plan file"),
        (["runs"], "no results database"),
        (["show", "1"], "no results database"),
        (["export"], "no results database"),
    ],
)
def test_bad_commands_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = cli(*args, "--results", tmp_path / "nothing", cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "nothing").exists()


def test_unknown_option_exits_2(tmp_path: Path) -> None:
    assert cli("export", "--format", "xml", "--results", tmp_path).returncode == 2
    assert cli("run").returncode == 2


def test_installs_lists_versions() -> None:
    done = cli("installs", "--json")
    assert done.returncode == 0
    found = json.loads(done.stdout)
    assert any(i["source"] == "embedded" and i["version"].startswith("18") for i in found)


def test_dry_run_shows_the_matrix_and_estimate(tmp_path: Path) -> None:
    examples = Path(__file__).parent.parent / "examples"
    done = cli("run", examples / "latency.toml", "--dry-run", "--results", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert "54 runs, order interleaved, estimated" in done.stdout
    assert not (tmp_path / "r").exists()


def test_reading_commands_on_a_real_campaign(real_campaign: Campaign, tmp_path: Path) -> None:
    results = real_campaign.results_dir
    listing = cli("runs", "--results", results)
    assert listing.returncode == 0
    assert len(listing.stdout.strip().splitlines()) == 1 + 32
    runs = json.loads(cli("runs", "--json", "--results", results).stdout)
    detail = json.loads(cli("show", str(runs[0]["id"]), "--json", "--results", results).stdout)
    assert detail["tps"] == runs[0]["tps"] and detail["seconds"]
    assert detail["diagnosis"]["verdict"] and detail["diagnosis"]["evidence"]
    assert detail["wait_events"], "pg_stat_activity was sampled during the run"
    assert cli("campaigns", "--results", results).stdout.count("tiny") == 1
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"runs.{fmt}"
        assert cli("export", "--format", fmt, "-o", out, "--results", results).returncode == 0
        frame = {"csv": pl.read_csv, "json": pl.read_json, "parquet": pl.read_parquet}[fmt](out)
        assert frame.height == 32
        assert sorted(frame["tps"].to_list()) == sorted(r["tps"] for r in runs)
    parquet_to_stdout = cli("export", "--format", "parquet", "--results", results)
    assert parquet_to_stdout.returncode == 2
