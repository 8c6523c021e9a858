"""The dataset's tablespaces ([dataset] tablespace, index_tablespace, temp_tablespaces) and a
server's one-off preparation ([[server]] prepare): refused where they cannot work, part of the
dataset's identity, made for real in a managed cluster and removed with it."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import remove_clusters, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError
from pgbenchlab.plan.dataset import tablespace_name
from pgbenchlab.report import write_report
from pgbenchlab.report.render import run_text
from pgbenchlab.report.views import run as runview
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.setup import setup_facts
from pgbenchlab.results import RunStatus
from pgbenchlab.server.tablespaces import MARKER, Tablespace
from pgbenchlab.store import MIGRATIONS, SCHEMA_VERSION, Store
from pgbenchlab.store.server_setup import (
    Preparation,
    preparations,
    record_preparation,
    record_tablespaces,
    tablespaces,
)
from support import QuietReporter, require_installs

# Fails (division by zero) unless every pgbench table lies in the tables' tablespace, the
# accounts' key in the indexes' one (both under the plan's directories), and a temporary table
# in the temporary files' one: a run that is ok proves all three, as the server sees them.
CHECK = r"""
SELECT count(*) AS tables_in FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace
  WHERE c.relname IN ('pgbench_accounts', 'pgbench_branches', 'pgbench_tellers',
                      'pgbench_history')
    AND t.spcname = '{tables}' AND pg_tablespace_location(t.oid) LIKE '{tables_dir}/%' \gset
SELECT count(*) AS indexes_in FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace
  WHERE c.relname = 'pgbench_accounts_pkey' AND t.spcname = '{indexes}'
    AND pg_tablespace_location(t.oid) LIKE '{indexes_dir}/%' \gset
CREATE TEMP TABLE IF NOT EXISTS lab_scratch (i int);
SELECT count(*) AS temp_in FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace
  WHERE c.relname = 'lab_scratch' AND c.relnamespace = pg_my_temp_schema()
    AND t.spcname = '{temp}' \gset
\if :tables_in != 4
SELECT 1 / 0;
\endif
\if :indexes_in != 1
SELECT 1 / 0;
\endif
\if :temp_in != 1
SELECT 1 / 0;
\endif
"""


def plan_text(dataset: str, server: str = 'install = "embedded"') -> str:
    return f"""
[campaign]
name = "tablespaces"
[defaults]
duration = "1s"
warmup = "0s"
{dataset}
[[server]]
name = "pg"
{server}
settings = {{ shared_buffers = "32MB" }}
[matrix]
scale = [1]
workload = [{{ script = "check.sql" }}]
clients = [1, 2]
"""


def in_tablespaces(places: dict[str, Path], tmp_path: Path) -> str:
    """The [dataset] table putting tables, indexes and temporary files in the places named, and
    check.sql beside the plan, which fails a run unless they lie there as the server sees
    them."""
    names = {k: tablespace_name(str(v)) for k, v in places.items()}
    (tmp_path / "check.sql").write_text(
        CHECK.format(
            tables=names["tables"],
            tables_dir=places["tables"],
            indexes=names["indexes"],
            indexes_dir=places["indexes"],
            temp=names["temp"],
        )
    )
    return (
        f'[dataset]\ntablespace = "{places["tables"]}"\n'
        f'index_tablespace = "{places["indexes"]}"\ntemp_tablespaces = "{places["temp"]}"\n'
    )


def parsed(tmp_path: Path, dataset: str, server: str = 'install = "embedded"') -> plan.Plan:
    (tmp_path / "check.sql").write_text("SELECT 1;\n")
    return plan.parse(plan_text(dataset, server), str(tmp_path / "p.toml"), base=tmp_path)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the server account reaches (tmp_path's parents are the test user's)."""
    made = Path(tempfile.mkdtemp(prefix="pgbl-tablespaces-", dir="/var/tmp"))
    made.chmod(0o777)  # the server account makes the tablespace directories inside
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.mark.parametrize(
    ("dataset", "server", "says"),
    [
        ('tablespace = "ts"', 'install = "embedded"', "dataset.tablespace: must be an absolute"),
        ("index_tablespace = 3", 'install = "embedded"', "must be an absolute directory path"),
        (
            'temp_tablespaces = "/t"',
            'dsn = "host=/tmp dbname=x"\ninit = true',
            "made in managed servers; server pg is external",
        ),
        (  # made on the host, in its directories
            'tablespace = "/t"\n[[host]]\nname = "db1"\nssh = "db1"',
            'install = "15"\nhost = "db1"',
            None,
        ),
        (
            'tablespace = "/t"',
            'install = "15"\nsettings.temp_tablespaces = "x"',  # no temp directory: allowed
            None,
        ),
        (
            'temp_tablespaces = "/t"',
            'install = "15"\nsettings.temp_tablespaces = "x"',
            "is set by \\[dataset\\] temp_tablespaces",
        ),
        (
            'temp_tablespaces = "/t"',
            'install = "15"\nsetting.temp_tablespaces = ["x", "y"]',
            "server pg: setting.temp_tablespaces: is set by \\[dataset\\] temp_tablespaces",
        ),
        (
            'temp_tablespaces = "/t"',
            'install = "15"\n[matrix.setting]\ntemp_tablespaces = ["x", "y"]\n'
            '[[server]]\nname = "b"',
            "matrix.setting.temp_tablespaces: is set by \\[dataset\\] temp_tablespaces",
        ),
    ],
)
def test_tablespaces_the_plan_cannot_have_are_refused(
    tmp_path: Path, dataset: str, server: str, says: str | None
) -> None:
    text = plan_text(f"[dataset]\n{dataset}", server).replace(
        'settings = { shared_buffers = "32MB" }', ""
    )
    (tmp_path / "check.sql").write_text("SELECT 1;\n")
    if says is None:
        plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
        return
    with pytest.raises(PlanError, match=says):
        plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_the_tablespaces_are_the_datasets_identity_the_temporary_files_not(tmp_path: Path) -> None:
    options = "[dataset]\nfillfactor = 90\n"
    before = parsed(tmp_path, options).dataset
    # a dataset made before tablespaces existed keeps its digest (and its database)
    fields = {
        "partitions": None,
        "partition_method": None,
        "fillfactor": 90,
        "unlogged_tables": False,
        "foreign_keys": False,
        "init_steps": None,
        "setup_sql": None,
        "setup_text": "",
    }
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]
    assert before.identity == digest
    placed = parsed(tmp_path, options + 'tablespace = "/fast/ts/"\n').dataset
    assert placed.tablespace == "/fast/ts" and placed.identity not in ("", digest)
    moved = parsed(tmp_path, options + 'tablespace = "/slow/ts"\n').dataset
    assert moved.identity != placed.identity  # another directory: another dataset
    temp = parsed(tmp_path, options + 'temp_tablespaces = "/tmpfs"\n')
    assert temp.dataset.identity == digest
    assert parsed(tmp_path, '[dataset]\ntemp_tablespaces = "/t"\n').dataset.identity == ""
    # the temporary files' tablespace is a setting of the server
    name = tablespace_name("/tmpfs")
    assert ("temp_tablespaces", name) in temp.servers[0].settings
    both = parsed(tmp_path, '[dataset]\ntablespace = "/a"\nindex_tablespace = "/a"\n').dataset
    assert both.init_arguments() == [
        f"--tablespace={tablespace_name('/a')}",
        f"--index-tablespace={tablespace_name('/a')}",
    ]
    assert both.tablespaces == {"/a": ("tables", "indexes")}  # one tablespace for both


@pytest.mark.parametrize(
    ("prepare", "says"),
    [
        ('{ workload = "select-only" }', "must be a table with a duration"),
        ('{ duration = "0s" }', "prepare.duration: must be > 0 seconds"),
        ('{ duration = "5s", workload = "mine.sql" }', "prepare.workload: must be a builtin"),
        ('{ duration = "5s", clients = 0 }', "prepare.clients: must be a whole number"),
        ('{ duration = "5s", rate = 10 }', "prepare.rate: unknown key"),
    ],
)
def test_mistakes_in_a_preparation_are_refused(tmp_path: Path, prepare: str, says: str) -> None:
    with pytest.raises(PlanError, match=says):
        parsed(tmp_path, "", f'install = "embedded"\nprepare = {prepare}')
    wanted = parsed(tmp_path, "", 'install = "embedded"\nprepare = { duration = "5min" }')
    assert wanted.servers[0].prepare == plan.PreparePlan(300, "select-only", 1)


def test_a_database_of_schema_29_gets_the_setup_tables(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, 30)))
    db.execute("PRAGMA user_version = 29")
    db.close()
    spaces = (
        Tablespace("pgbenchlab_a", "/fast/pg-1", ("tables", "indexes")),
        Tablespace("pgbenchlab_b", "/tmpfs/pg-1", ("temporary files",)),
    )
    done = Preparation("pg", 1.0, "select-only", 4, 10, 300, 300.2, 41234.5)
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        campaign = store.start_campaign("c", "p.toml", "", "d", {"pgbenchlab": "x"}, {})
        assert tablespaces(store, campaign) == {} and preparations(store, campaign) == ()
        record_tablespaces(store, campaign, "pg", spaces)
        record_tablespaces(store, campaign, "pg", spaces)  # a server met again: once
        record_preparation(store, campaign, done)
        assert tablespaces(store, campaign) == {"pg": spaces}
        assert preparations(store, campaign) == (done,)
        assert dict(setup_facts(store, campaign)["pg"]) == {
            "tablespace for tables and indexes": "/fast/pg-1 (pgbenchlab_a)",
            "tablespace for temporary files": "/tmpfs/pg-1 (pgbenchlab_b)",
            "one-off preparation": "select-only, 4 clients, 5 min on scale 10: 41,234 TPS "
            "(took 5 min)",
        }


@pytest.mark.server
def test_the_check_refuses_a_directory_inside_the_cluster_or_out_of_reach(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_installs("embedded")
    locked = shared_dir / "locked"
    locked.mkdir(mode=0o555)
    data_dir = shared_dir / "data"
    dataset = f'[dataset]\ntablespace = "{data_dir}/ts"\ntemp_tablespaces = "{locked}/temp"\n'
    server = f'install = "embedded"\ndata_dir = "{data_dir}"'
    (tmp_path / "check.sql").write_text("SELECT 1;\n")
    (tmp_path / "p.toml").write_text(plan_text(dataset, server))
    results = tmp_path / "results"
    assert main(["run", str(tmp_path / "p.toml"), "--check", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert f"[dataset] tablespace {data_dir}/ts lies inside server pg's data directory" in err
    assert f"[dataset] temp_tablespaces {locked}/temp: the server account" in err
    assert not results.exists() and not data_dir.exists() and not list(locked.iterdir())


@pytest.mark.server
def test_a_campaign_in_tablespaces_with_a_preparation(
    tmp_path: Path, shared_dir: Path, results_dir: Path
) -> None:
    """Tables, indexes and temporary files each in a tablespace of their own (the script
    checks them as the server sees them, the files lie there on disk); one preparation for the
    server's one start, before its two runs; `clean` removes the tablespaces with the cluster."""
    require_installs("embedded")
    places = {k: shared_dir / k for k in ("tables", "indexes", "temp")}
    dataset = in_tablespaces(places, tmp_path)
    server = 'install = "embedded"\nprepare = { duration = "1s", clients = 2 }'
    the_plan = plan.parse(plan_text(dataset, server), str(tmp_path / "p.toml"), base=tmp_path)
    try:
        outcome = run_campaign(the_plan, results_dir, QuietReporter())
        assert [r.status for r in outcome.results] == [RunStatus.OK] * 2, [
            r.error for r in outcome.results
        ]
        with Store(results_dir / "results.db") as store:
            made = tablespaces(store, outcome.campaign_id)["pg"]
            prepared = preparations(store, outcome.campaign_id)
            first_run = store.run_records(outcome.campaign_id)[0].id
            shown = run_text.as_text(runview.load(store, first_run))
            servers = load_view(store, outcome.campaign_id).servers
        page = write_report(results_dir / "results.db", output=tmp_path / "report.html")
        assert isinstance(page, Path)
        html = page.read_text(encoding="utf-8")  # the servers table, readable without scripts
        assert "tablespace for indexes" in html and "one-off preparation" in html
        # the cluster's own directory under each, with the server's files in it
        located = {s.roles: Path(s.location) for s in made}
        assert set(located) == {("tables",), ("indexes",), ("temporary files",)}
        for roles, key in ((("tables",), "tables"), (("indexes",), "indexes")):
            assert located[roles].parent == places[key]
            assert list(located[roles].glob("PG_*/*/*")), f"no files in the {key} tablespace"
        assert len(prepared) == 1, prepared  # one start, two runs: prepared once
        assert prepared[0].workload == "select-only" and prepared[0].clients == 2
        assert prepared[0].tps is not None and prepared[0].tps > 0
        assert prepared[0].seconds >= 1
        assert f"tablespace for tables: {located[('tables',)]}" in shown
        assert "one-off preparation: select-only, 2 clients, 1 s on scale 1" in shown
        assert "tablespace for temporary files" in dict(servers[0].setup)
    finally:
        remove_clusters(results_dir)
    for key, place in places.items():
        assert place.is_dir(), f"the plan's {key} directory is kept"
        assert not any(p for p in place.iterdir() if (p / MARKER).exists()), key
