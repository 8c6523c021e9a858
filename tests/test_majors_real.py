"""Every major from 9.6 on managed for real: a managed server of each (prebuilt binaries of 9.6,
10, 11 and 12, the installed 15, the embedded 18) runs a short real campaign with the newest
pgbench; the run is ok, its commits agree with the server's, the settings the plan asked for
were read back, and each telemetry source is present where the major has it and stated
unavailable, with its reason, where it does not; 9.6 and 12 over TLS too. The other majors (13,
14, 16, 17, prebuilt) run every telemetry query on a real server of their own."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import ci_guard
from pgbenchlab import installs, plan
from pgbenchlab.builds import prebuilt
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli.common import open_store
from pgbenchlab.errors import InstallError
from pgbenchlab.report.render.run_text import as_text
from pgbenchlab.report.views import run as run_view
from pgbenchlab.report.views.load import load_servers
from pgbenchlab.results import RunStatus
from pgbenchlab.server import ManagedServer
from pgbenchlab.telemetry import pgstats
from pgbenchlab.telemetry.crosscheck import check_commits
from pgbenchlab.telemetry.pgstats import major_text
from support import QuietReporter, managed_server, require_installs

# install value, server_version_num floor of that major
MAJORS = {
    "9.6": ('{ binaries = "9.6" }', 90600),
    "10": ('{ binaries = "10" }', 100000),
    "11": ('{ binaries = "11" }', 110000),
    "12": ('{ binaries = "12" }', 120000),
    "15": ('"15"', 150000),
    "18": ('"embedded"', 180000),
}
# source → the first major that has it
SINCE = {"pg_stat_wal": 140000, "pg_stat_io": 160000, "pg_stat_checkpointer": 170000}


def plan_text(install: str) -> str:
    return f"""
[campaign]
name = "major"
[defaults]
duration = "1s"
warmup = "0s"
connection = "tcp"
[[server]]
name = "pg"
install = {install}
settings = {{ shared_buffers = "48MB", shared_preload_libraries = "pg_stat_statements", \
track_io_timing = "on" }}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [2]
"""


@pytest.mark.server
@pytest.mark.parametrize("major", list(MAJORS))
def test_a_managed_server_of_every_major_runs_and_reports(
    major: str, build_cache: Path, tmp_path: Path, results_dir: Path
) -> None:
    install, floor = MAJORS[major]
    if "binaries" in install:
        ci_guard.require_server_mark()
        try:
            prebuilt.ensure(major)
        except InstallError as exc:
            pytest.skip(f"prebuilt {major} cannot be had here ({exc}): real-server test NOT run")
    else:
        require_installs(install.strip('"'))
    the_plan = plan.parse(plan_text(install), "major.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    [result] = outcome.results
    assert result.status is RunStatus.OK, result.error
    assert result.spec.connection == "tcp"  # with the password pg_hba.conf asks for
    tel = result.telemetry
    assert tel is not None and tel.server_version_num is not None
    assert floor <= tel.server_version_num < floor + 10000
    assert not tel.errors, tel.errors
    check = check_commits(
        result.transactions, tel, clients=2, connect_each=False, builtin_only=True
    )
    assert check is not None and check.agrees, check
    assert not [w for w in result.warnings if w.code == "commits_disagree"]
    for source in ("pg_stat_database", "pg_stat_activity", "pg_stat_statements"):
        assert tel.available(source), (source, tel.unavailable_because(source))
    assert tel.total("pg_stat_database", "xact_commit")
    assert tel.waits, "no pg_stat_activity sample saw a pgbench backend"
    assert tel.statements, "pg_stat_statements gave no statement"
    for source, since in SINCE.items():
        if tel.server_version_num >= since:
            assert tel.available(source), (source, tel.unavailable_because(source))
        else:
            assert not tel.available(source)
            assert f"has no {source}" in str(tel.unavailable_because(source))
    checkpoints = "pg_stat_checkpointer" if floor >= 170000 else "pg_stat_bgwriter"
    assert tel.available(checkpoints)
    assert tel.server_settings.get("track_io_timing") == "on"
    with sqlite3.connect(results_dir / RESULTS_DB) as db:
        [(settings, install_name, build, data_dir)] = db.execute(
            "SELECT settings_json, install, build_json, data_dir FROM servers"
        ).fetchall()
    # pgbench logged in over TCP with a password: SCRAM from 10, md5 before, nothing weaker
    method = "scram-sha-256" if floor >= 100000 else "md5"
    hba = (Path(data_dir) / "pg_hba.conf").read_text().splitlines()
    assert [line.split()[-1] for line in hba if line.startswith("host ")] == [method]
    assert json.loads(settings)["shared_buffers"] == "48MB"  # read back from the server
    if "binaries" in install:
        assert install_name.startswith(f"binaries-{major}.")
        assert json.loads(build)["source"]["kind"] == "binaries"
    stated_gaps(results_dir, tel.server_version_num)


@pytest.mark.server
@pytest.mark.parametrize("major", ["9.6", "12"])
def test_tls_on_the_oldest_majors(
    major: str, build_cache: Path, tmp_path: Path, results_dir: Path
) -> None:
    """The prebuilt binaries carry their own OpenSSL 1.1: pgbench (the installed 15's, whose
    libpq has TLS) reaches 9.6 and 12 over TLS, verifying the server's certificate."""
    require_installs("15")
    ci_guard.require_server_mark()
    try:
        prebuilt.ensure(major)
    except InstallError as exc:
        pytest.skip(f"prebuilt {major} cannot be had here ({exc}): real-server test NOT run")
    text = plan_text(MAJORS[major][0]).replace('connection = "tcp"', 'connection = "tls"')
    the_plan = plan.parse(text + '[pgbench]\ninstall = "15"\n', "tls.toml", base=tmp_path)
    [result] = run_campaign(the_plan, results_dir, QuietReporter()).results
    assert result.status is RunStatus.OK, result.error
    with sqlite3.connect(results_dir / RESULTS_DB) as db:
        [(protocol, cipher)] = db.execute("SELECT tls_protocol, tls_cipher FROM runs").fetchall()
    assert str(protocol).startswith("TLSv1.") and cipher, (protocol, cipher)


def stated_gaps(results_dir: Path, version: int) -> None:
    """`pgbenchlab show` says what this major could not report, and why."""
    with open_store(results_dir) as store:
        campaign = store.campaign_id(None)
        [run_id] = [r.id for r in store.run_records(campaign)]
        text = as_text(run_view.load(store, run_id))
        [server] = load_servers(store, campaign)  # the report's "Servers side by side"
        client = store.campaign_record(campaign)
    newest = installs.newest_pgbench(installs.discover())
    assert (
        client is not None
        and client.pgbench_version == f"pgbench (PostgreSQL) {newest.version.text}"
    )
    lacks = dict(server.telemetry_gaps)
    assert {s for s, since in SINCE.items() if version < since} <= set(lacks), lacks
    assert ("pg_stat_statements" in lacks) == (version < 130000), lacks
    for source, since in SINCE.items():
        said = f"{source} (absent): PostgreSQL {major_text(version)} has no {source}"
        assert (said in text) == (version < since), text
    assert ("has no Client wait events" in text) == (version < 100000), text
    assert ("absent: wal_bytes" in text) == (version < 130000), text


# The majors the campaign above does not run, each checked query by query on a real server.
QUERY_MAJORS = {"13": 130000, "14": 140000, "16": 160000, "17": 170000}


@pytest.fixture
def managed_binaries(request: pytest.FixtureRequest, build_cache: Path) -> Iterator[ManagedServer]:
    """A started managed server of the prebuilt binaries of the test's major, removed after."""
    ci_guard.require_server_mark()
    try:
        install = prebuilt.ensure(request.param)
    except InstallError as exc:
        pytest.skip(f"prebuilt {request.param} cannot be had here ({exc}): test NOT run")
    settings = {"shared_preload_libraries": "pg_stat_statements", "track_io_timing": "on"}
    with managed_server(f"pg{request.param}", install, settings) as server:
        yield server


@pytest.mark.server
@pytest.mark.parametrize(
    "managed_binaries", list(QUERY_MAJORS), indirect=True, ids=list(QUERY_MAJORS)
)
def test_every_telemetry_query_runs_on_the_other_majors(managed_binaries: ManagedServer) -> None:
    with managed_binaries.endpoint.connect() as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        settings = pgstats.read_settings(conn)
        version = settings.version_num
        assert QUERY_MAJORS[managed_binaries.name.removeprefix("pg")] <= version
        query = pgstats.CounterQuery.build(version)
        read = query.read(conn, settings)
        for source, columns in query.columns.items():
            timed = {c for c in columns if settings.timing_setting(source, c, "")}
            kept = {c.split(".", 1)[-1] for c in read[source]}
            assert set(columns) - timed <= kept, (source, set(columns) - kept)
        for source, since in SINCE.items():
            assert (source in read) == (version >= since), source
            assert (source in query.absent) == (version < since), source
        pid = conn.info.backend_pid
        sql = pgstats.ActivityQueries.build(version)
        for text in (sql.activity, sql.bench_backends, sql.connection):
            conn.execute(text, (pid,)).fetchall()
        schema = pgstats.statements_schema(conn, settings)
        assert schema is not None
        rows = conn.execute(pgstats.statements_sql(version, schema, with_text=True), (True,))
        assert rows.fetchall()
        assert pgstats.await_collector(conn, version, 3.0)[1]
