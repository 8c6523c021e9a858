"""The README's promises, each kept by a test that fails without it: `--fresh`, `--json`, the
exit codes 1 and 130, passwords from the environment and `.pgpass`, redaction of the stored
plan, a newer results schema refused, `compare A B`, `clean`, the `reinit` modes, external
servers never initialised without `init = true`, and the README's counts of bad-input tests."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import test_cli
import test_plan
from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, Outcome, remove_clusters, run_campaign
from pgbenchlab.server import ManagedServer
from pgbenchlab.store import SCHEMA_VERSION, Store
from support import QuietReporter, embedded_server, require_installs, run_errors
from test_faults import CLI, alive, data_dir, db_rows, postmaster_pid, wait_for
from test_secrets import every_text

README = Path(__file__).parent.parent / "README.md"


def plan_text(
    name: str,
    *,
    clients: str = "[1]",
    duration: str = "1s",
    workload: str = '["select-only"]',
    server: str = 'install = "embedded"',
    defaults: str = "",
) -> str:
    return f"""
[campaign]
name = "{name}"
[defaults]
duration = "{duration}"
warmup = "0s"
{defaults}
[[server]]
name = "pg"
{server}
[matrix]
scale = [1]
workload = {workload}
clients = {clients}
"""


def write(tmp_path: Path, text: str, file: str = "plan.toml") -> Path:
    path = tmp_path / file
    path.write_text(text)
    return path


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*CLI, *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def library_run(tmp_path: Path, text: str, results: Path, *, fresh: bool = False) -> Outcome:
    the_plan = plan.parse(text, str(tmp_path / "plan.toml"), base=tmp_path)
    return run_campaign(the_plan, results, QuietReporter(), fresh=fresh)


# -- run: --fresh, --json, exit codes 1 and 130 --------------------------------------------------


@pytest.mark.server
def test_fresh_starts_a_campaign_of_the_same_name_anew(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    plan_path = write(tmp_path, plan_text("fresh"))
    assert cli("run", plan_path, "--results", results_dir, "-q").returncode == 0
    again = cli("run", plan_path, "--results", results_dir, "-q")
    assert again.returncode == 0, again.stderr
    # Without --fresh the campaign continues: its one run is stored and not repeated.
    assert len(db_rows(results_dir, "SELECT id FROM campaigns")) == 1
    assert len(db_rows(results_dir, "SELECT id FROM runs")) == 1
    # A changed plan is refused without --fresh, and starts anew with it.
    write(tmp_path, plan_text("fresh", clients="[2]"))
    refused = cli("run", plan_path, "--results", results_dir, "-q")
    assert refused.returncode == 2 and "--fresh" in refused.stderr
    fresh = cli("run", plan_path, "--results", results_dir, "-q", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    campaigns = db_rows(results_dir, "SELECT id, name, status FROM campaigns ORDER BY id")
    assert [(c["name"], c["status"]) for c in campaigns] == [("fresh", "finished")] * 2
    runs = db_rows(results_dir, "SELECT campaign_id, clients, status FROM runs ORDER BY id")
    old, new = campaigns[0]["id"], campaigns[1]["id"]
    assert [tuple(r) for r in runs] == [(old, 1, "ok"), (new, 2, "ok")]  # old results kept


@pytest.mark.server
def test_json_prints_one_event_per_line_on_stdout(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    # 3 s: a 1 s run may end before pgbench prints its first -P 1 line.
    plan_path = write(tmp_path, plan_text("json", clients="[1, 2]", duration="3s"))
    done = cli("run", plan_path, "--results", results_dir, "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON
    assert events and all(isinstance(e.get("event"), str) for e in events)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "campaign_started" and events[0]["todo"] == 2
    finished = [e for e in events if e["event"] == "run_finished"]
    started = [e["run"] for e in events if e["event"] == "run_started"]
    assert [e["status"] for e in finished] == ["ok", "ok"]
    assert [e["run"] for e in finished] == started and len(set(started)) == 2
    assert "progress" in kinds  # pgbench's -P 1 lines come through
    assert "results:" in done.stderr  # the summary stays off stdout


@pytest.mark.server
def test_some_runs_failed_exits_1(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    (tmp_path / "boom.sql").write_text("SELECT 1/0;\n")
    text = plan_text("partly", workload='["select-only", { script = "boom.sql" }]')
    done = cli("run", write(tmp_path, text), "--results", results_dir, "-q")
    assert done.returncode == 1, done.stderr
    rows = db_rows(results_dir, "SELECT workload, status, error FROM latest_runs ORDER BY workload")
    assert [r["workload"] for r in rows] == ["boom", "select-only"]
    assert rows[0]["status"] in ("failed", "aborted") and "division by zero" in rows[0]["error"]
    assert rows[1]["status"] == "ok"
    assert db_rows(results_dir, "SELECT status FROM campaigns")[0]["status"] == "finished"


def gone(pid: int | None) -> None:
    """The postmaster exits (and is reaped) moments after it removes postmaster.pid."""
    wait_for(lambda: not alive(pid), timeout=10, every=0.05)


def start_json(plan_path: Path, results: Path) -> subprocess.Popen[str]:
    argv = [*CLI, "run", str(plan_path), "--results", str(results), "--json"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_event(proc: subprocess.Popen[str], event: str, **fields: Any) -> None:
    """Read JSON events until one matches (the campaign's own account of where it is)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        found = json.loads(line)
        if found["event"] == event and all(found.get(k) == v for k, v in fields.items()):
            return
    raise AssertionError(f"the campaign ended before {event} {fields}")


@pytest.mark.server
def test_sigterm_exits_130_interrupted_with_servers_stopped(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    proc = start_json(write(tmp_path, plan_text("term", duration="20s")), results_dir)
    try:
        wait_for_event(proc, "phase", phase="measuring")
        pid = postmaster_pid(data_dir(results_dir, "term"))
        assert alive(pid)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert db_rows(results_dir, "SELECT status FROM campaigns")[0]["status"] == "interrupted"
    assert [r["status"] for r in db_rows(results_dir, "SELECT status FROM runs")] == ["interrupted"]
    assert not (data_dir(results_dir, "term") / "postmaster.pid").exists()
    gone(pid)


# -- passwords -----------------------------------------------------------------------------------


@pytest.fixture
def protected() -> Iterator[tuple[ManagedServer, str]]:
    """A managed server standing in for an external one: role bench logs in over TCP with a
    password only."""
    with embedded_server("claims") as server:
        password = "pw-" + secrets.token_hex(8)
        with server.endpoint.connect() as conn:
            conn.execute(f"CREATE ROLE bench LOGIN PASSWORD '{password}'")
            conn.execute("CREATE DATABASE bench OWNER bench")
        yield server, password


def external_plan(name: str, dsn: str) -> str:
    return plan_text(name, workload='["tpcb-like"]', server=f'dsn = "{dsn}"\ninit = true')


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without libpq's variables, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return env | extra


@pytest.mark.server
@pytest.mark.parametrize("source", ["PGPASSWORD", ".pgpass"])
def test_password_from_the_environment_reaches_pgbench_and_no_file(
    source: str, protected: tuple[ManagedServer, str], tmp_path: Path, results_dir: Path
) -> None:
    server, password = protected
    dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=bench"
    if source == "PGPASSWORD":
        env = clean_env(PGPASSWORD=password)
    else:
        home = tmp_path / "home"
        home.mkdir()
        pgpass = home / ".pgpass"
        pgpass.write_text(f"127.0.0.1:{server.port}:bench:bench:{password}\n")
        pgpass.chmod(0o600)
        env = clean_env(HOME=str(home))
    done = cli("run", write(tmp_path, external_plan("env", dsn)), "--results", results_dir, env=env)
    assert done.returncode == 0, done.stderr
    # pgbench -i and the measured pgbench logged in with it: the dataset and the run exist.
    assert [r["status"] for r in db_rows(results_dir, "SELECT status FROM runs")] == ["ok"]
    assert db_rows(results_dir, "SELECT init_seconds FROM datasets")[0]["init_seconds"]
    for path, data in every_text(results_dir):
        assert password.encode() not in data, f"the password leaked into {path}"
    assert password not in done.stdout + done.stderr


@pytest.mark.server
def test_stored_plan_has_its_passwords_redacted(
    protected: tuple[ManagedServer, str], tmp_path: Path, results_dir: Path
) -> None:
    server, password = protected
    dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=bench password={password}"
    outcome = library_run(tmp_path, external_plan("redact", dsn), results_dir)
    assert outcome.failed == 0, run_errors(outcome)
    [stored] = db_rows(results_dir, "SELECT plan_text FROM campaigns")
    assert password not in stored["plan_text"]
    assert f"port={server.port} user=bench dbname=bench password=********" in stored["plan_text"]


# -- the results database ------------------------------------------------------------------------

NEWER_SCHEMA_COMMANDS = {
    "run": ["run", "{plan}"],
    "campaigns": ["campaigns"],
    "runs": ["runs"],
    "show": ["show", "1"],
    "report": ["report"],
    "export": ["export"],
    "compare": ["compare", "a", "b"],
    "series": ["compare", "--series", "clients"],
    "clean": ["clean"],
}


@pytest.mark.server  # `run` checks the plan's installation before it opens the database
@pytest.mark.parametrize("command", sorted(NEWER_SCHEMA_COMMANDS))
def test_a_newer_schema_is_refused_by_every_command(command: str, tmp_path: Path) -> None:
    require_installs("embedded")
    results = tmp_path / "results"
    database = results / RESULTS_DB
    Store(database).close()
    db = sqlite3.connect(database)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()  # the last connection folds the WAL into the file
    before = database.read_bytes()
    plan_path = write(tmp_path, plan_text("newer"))
    args = [a.replace("{plan}", str(plan_path)) for a in NEWER_SCHEMA_COMMANDS[command]]
    done = cli(*args, "--results", results)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgbenchlab: error: "), done.stderr
    assert f"schema {SCHEMA_VERSION + 1} is newer than this pgbenchlab" in lines[0]
    assert database.read_bytes() == before, "a newer database is never written"
    assert sorted(p.name for p in results.iterdir()) == [RESULTS_DB]


@pytest.mark.server
def test_compare_two_campaigns_names_their_common_cells(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    for name, clients in (("cmp-a", "[1, 2]"), ("cmp-b", "[2, 4]")):
        assert library_run(tmp_path, plan_text(name, clients=clients), results_dir).failed == 0
    done = cli("compare", "cmp-a", "cmp-b", "--results", results_dir)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.split("\n\n")[0].splitlines()
    assert header.split()[:5] == ["cell", "metric", "n", "cmp-a", "cmp-b"]
    assert {row.split()[0] for row in rows} == {"clients=2"}  # only the cell both ran
    assert len(rows) == 3  # TPS, p50, p99
    as_json = json.loads(
        cli("compare", "cmp-a", "cmp-b", "--json", "--results", results_dir).stdout
    )
    assert {(c["cell"], c["baseline_n"], c["candidate_n"]) for c in as_json["changes"]} == {
        ("clients=2", 1, 1)
    }


@pytest.mark.server
def test_clean_stops_and_deletes_clusters_and_keeps_results(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    proc = start_json(write(tmp_path, plan_text("clean", clients="[1, 2]")), results_dir)
    try:
        wait_for_event(proc, "run_finished", status="ok")
        proc.kill()  # as kill -9 would: its server is left running
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    data = data_dir(results_dir, "clean")
    pid = postmaster_pid(data)
    assert alive(pid)
    done = cli("clean", "--results", results_dir)
    assert done.returncode == 0, done.stderr
    assert f"removed cluster {data}" in done.stdout
    gone(pid)
    assert not data.exists()
    assert (results_dir / RESULTS_DB).is_file()
    listed = cli("runs", "--results", results_dir)
    assert listed.returncode == 0 and len(listed.stdout.strip().splitlines()) == 1 + 1


@pytest.mark.server
def test_clean_empties_only_the_data_directories_its_own_campaigns_made(
    tmp_path: Path, results_dir: Path
) -> None:
    """A results directory merged from another's names that one's explicit data directory in
    its servers table; `clean` there leaves the cluster alone, the campaign's own results
    directory removes it."""
    require_installs("embedded")
    data = Path(tempfile.mkdtemp(prefix="pgbl-explicit-", dir="/var/tmp"))
    data.chmod(0o777)  # the server account makes the cluster inside
    try:
        server = f'install = "embedded"\ndata_dir = "{data}/cluster"'
        made = cli(
            "run", write(tmp_path, plan_text("own", server=server)), "--results", results_dir
        )
        assert made.returncode == 0, made.stderr
        merged = tmp_path / "merged"
        assert cli("merge", "--results", merged, results_dir).returncode == 0
        assert cli("clean", "--results", merged).returncode == 0
        assert (data / "cluster" / "PG_VERSION").is_file(), "another results directory's cluster"
        done = cli("clean", "--results", results_dir)
        assert done.returncode == 0, done.stderr
        assert not (data / "cluster" / "PG_VERSION").exists()
    finally:
        remove_clusters(results_dir)
        shutil.rmtree(data, ignore_errors=True)


# -- datasets ------------------------------------------------------------------------------------


@pytest.mark.server
def test_reinit_modes_decide_when_pgbench_i_runs(tmp_path: Path, results_dir: Path) -> None:
    """Four campaigns of one name (one cluster), two runs each; the datasets table records
    each initialisation (init_seconds) or reuse (NULL)."""
    require_installs("embedded")
    inits: dict[str, list[bool]] = {}
    for label, mode, fresh in (
        ("never, new cluster", "never", False),
        ("never", "never", True),
        ("per-scale", "per-scale", True),
        ("per-run", "per-run", True),
    ):
        text = plan_text("reinit", clients="[1, 2]", defaults=f'reinit = "{mode}"')
        outcome = library_run(tmp_path, text, results_dir, fresh=fresh)
        assert outcome.failed == 0, run_errors(outcome)
        rows = db_rows(
            results_dir,
            f"SELECT init_seconds FROM datasets WHERE campaign_id = {outcome.campaign_id} "
            "ORDER BY id",
        )
        inits[label] = [r["init_seconds"] is not None for r in rows]
    assert inits == {
        "never, new cluster": [True],  # nothing to reuse yet
        "never": [False],  # the cluster's dataset reused
        "per-scale": [True],  # made again once for the scale, then reused
        "per-run": [True, True],
    }


@pytest.mark.server
def test_external_server_without_init_is_never_initialised(
    tmp_path: Path, results_dir: Path
) -> None:
    with embedded_server("noinit") as server:
        e = server.endpoint
        with e.connect() as conn:
            conn.execute("CREATE DATABASE empty")
        dsn = f"host={e.host} port={e.port} user={e.user} dbname=empty"
        text = plan_text("noinit", server=f'dsn = "{dsn}"')  # init = false: the default
        done = cli("run", write(tmp_path, text), "--results", results_dir)
        with e.with_dbname("empty").connect() as conn:
            tables = conn.execute("SELECT relname FROM pg_class WHERE relname LIKE 'pgbench%'")
            assert tables.fetchall() == [], "pgbench -i ran without init = true"
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "external server pg has no pgbench tables in empty" in lines[0]
    assert "init = true" in lines[0]
    assert not results_dir.exists(), "nothing is started or written"


# -- the README's counts -------------------------------------------------------------------------


def parametrised_cases(test: object) -> int:
    [mark] = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    return len(mark.args[1])


def test_readme_counts_the_bad_input_tests() -> None:
    found = re.search(
        r"Bad input kept as tests: (\d+) bad plans \(`tests/test_plan.py`\) and (\d+) bad "
        r"servers, directories\s+and commands \(`tests/test_cli.py`\)",
        README.read_text(),
    )
    assert found is not None, "the README's sentence counting bad-input tests"
    plans = parametrised_cases(test_plan.test_bad_plans_name_the_key_and_the_fix)
    assert plans == len(test_plan.BAD_PLANS)
    # Each case ends with exit code 2 and one line: servers (a foreign data directory among
    # them), the data directory the server account cannot reach, and commands.
    cli_cases = (
        parametrised_cases(test_cli.test_bad_servers_exit_2_with_one_line_and_write_nothing)
        + 1  # test_unreachable_data_dir_for_the_server_account
        + parametrised_cases(test_cli.test_bad_commands_exit_2)
    )
    assert callable(test_cli.test_unreachable_data_dir_for_the_server_account)
    assert (int(found[1]), int(found[2])) == (plans, cli_cases)
