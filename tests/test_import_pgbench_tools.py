"""`pgbenchlab import pgbench-tools CONNINFO` on the rows the real pgbench-tools scripts wrote
(`tests/golden/pgbench-tools/`: its `newset` and `runset` run here against PostgreSQL 15, the
rows dumped; see CAPTURED.md there), loaded into a real results database on a real server:
each test set a campaign, each test's TPS the number pgbench-tools stored, its initialisation
step listed and not imported, a re-import a no-op, and pgbench-tools' older schema (no server
column) read alike. Its per-test statistics (`tests/golden/pgbench-tools-stats/`, a capture
with every table) become each run's seconds and telemetry totals, exactly as stored, and what
does not map is listed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli import main
from pgbenchlab.errors import UserError
from pgbenchlab.importing import import_pgbench_tools
from pgbenchlab.server import ManagedServer
from pgbenchlab.store import Store
from pgbenchlab.store.telemetry import read_telemetry
from support import embedded_server

pytestmark = pytest.mark.server

GOLDEN = Path(__file__).parent / "golden"
ROWS = json.loads((GOLDEN / "pgbench-tools" / "rows.json").read_text())
STATS = json.loads((GOLDEN / "pgbench-tools-stats" / "rows.json").read_text())
RUNTIME = 3  # the config's RUNTIME of the captures


@pytest.fixture(scope="module")
def server() -> Iterator[ManagedServer]:
    with embedded_server("ptools") as started:
        yield started


def load(
    server: ManagedServer, database: str, *, drop: tuple[str, ...] = (), rows: Any = ROWS
) -> str:
    """A database holding the captured rows (without the `drop` columns); its conninfo."""
    with server.endpoint.connect() as conn:
        conn.execute(f'CREATE DATABASE "{database}"')  # type: ignore[arg-type]
    endpoint = server.endpoint.with_dbname(database)
    with endpoint.connect() as conn:
        for table, captured in rows.items():
            kept = [(i, c) for i, c in enumerate(captured["columns"]) if c[0] not in drop]
            ddl = ", ".join(f'"{name}" {kind}' for _, (name, kind) in kept)
            conn.execute(f"CREATE TABLE {table} ({ddl})")  # type: ignore[arg-type]
            marks = ", ".join(f"%s::{kind}" for _, (_, kind) in kept)
            for row in captured["rows"]:
                values = [row[i] for i, _ in kept]
                conn.execute(f"INSERT INTO {table} VALUES ({marks})", values)  # type: ignore[arg-type]
    return f"host={endpoint.host} port={endpoint.port} user={endpoint.user} dbname={database}"


def captured(table: str, rows: Any = ROWS) -> list[dict[str, Any]]:
    names = [c[0] for c in rows[table]["columns"]]
    return [dict(zip(names, row, strict=True)) for row in rows[table]["rows"]]


def test_each_test_set_becomes_a_campaign(
    server: ManagedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conninfo = load(server, "results_now")
    results = ["--results", str(tmp_path / "results")]
    command = ["import", "pgbench-tools", conninfo, "--duration", str(RUNTIME), *results]
    assert main(command) == 0
    out = capsys.readouterr().out
    sets = captured("testset")
    tests = captured("tests")
    with Store(tmp_path / "results" / RESULTS_DB) as store:
        names = [s.campaign.name for s in store.campaign_summaries()]
        assert names == [f"{s['server']}-set-{s['set']}" for s in sets]
        for testset in sets:
            campaign = store.find_campaign(f"{testset['server']}-set-{testset['set']}")
            assert campaign is not None and campaign.status == "imported"
            assert campaign.description == testset["info"]
            mine = [t for t in tests if t["set"] == testset["set"]]
            runs = {f.path: f for f in store.imported_files(campaign.id)}
            for test in mine:
                listed = runs[f"tests/{test['test']}"]
                if str(test["script"]).startswith(":"):  # pgbench -i, recorded as a test
                    assert listed.role == "unread" and "initialisation" in listed.note
                    continue
                run = store.run_record(int(listed.run or 0))
                assert run is not None
                assert Decimal(repr(run["tps"])) == Decimal(test["tps"])
                assert run["transactions"] == int(test["trans"])
                assert run["latency_avg_ms"] == float(test["avg_latency"])
                assert (run["clients"], run["threads"]) == (int(test["clients"]), 1 if
                        test["workers"] is None else int(test["workers"]))  # fmt: skip
                assert run["workload"] in ("select-only", "tpcb-like")
                assert run["duration_s"] == RUNTIME
    assert "initialisation step" in out
    assert main(command) == 0
    assert capsys.readouterr().out.count("already imported") == len(sets)


def test_the_older_schema_without_servers_is_read_alike(
    server: ManagedServer, tmp_path: Path
) -> None:
    conninfo = load(server, "results_old", drop=("server", "category", "server_version"))
    outcomes = import_pgbench_tools(tmp_path / "results", conninfo, RUNTIME)
    assert [o.campaign.name for o in outcomes] == [
        f"pgbench-tools-set-{s['set']}" for s in captured("testset")
    ]
    ok = [t for t in captured("tests") if not str(t["script"]).startswith(":")]
    assert sum(len(o.campaign.runs) for o in outcomes) == len(ok)


def test_a_database_that_is_not_pgbench_tools_is_refused(
    server: ManagedServer, tmp_path: Path
) -> None:
    endpoint = server.endpoint
    conninfo = f"host={endpoint.host} port={endpoint.port} user={endpoint.user} dbname=postgres"
    with pytest.raises(UserError, match="not a pgbench-tools results database: testset lacks"):
        import_pgbench_tools(tmp_path / "results", conninfo, RUNTIME)
    assert not (tmp_path / "results").exists()


def test_per_test_statistics_become_the_runs_seconds_and_totals(
    server: ManagedServer, tmp_path: Path
) -> None:
    conninfo = load(server, "results_stats", rows=STATS)
    outcomes = import_pgbench_tools(tmp_path / "results", conninfo, RUNTIME)
    runs = [t for t in captured("tests", STATS) if float(t["tps"] or 0) > 0]
    metrics = captured("test_metrics_data", STATS)
    bgwriter = {r["test"]: r for r in captured("test_bgwriter", STATS)}
    database = {r["test"]: r for r in captured("test_stat_database", STATS)}
    statements = captured("test_statements", STATS)
    ids = {o.campaign.name: o.campaign_id for o in outcomes}
    assert runs and bgwriter and database and metrics
    with Store(tmp_path / "results" / RESULTS_DB) as store:
        for test in runs:
            campaign = ids[f"{test['server']}-set-{test['set']}"]
            files = {f.path: f for f in store.imported_files(int(campaign or 0))}
            run_id = int(files[f"tests/{test['test']}"].run or 0)
            mine = [m for m in metrics if m["test"] == test["test"]]
            rate = sorted(
                (m["collected"], float(m["value"])) for m in mine if m["metric"] == "rate"
            )
            seconds = store.seconds_by_run([run_id])[run_id]
            first = datetime.fromisoformat(rate[0][0])
            assert [(s.t, s.tps) for s in seconds] == [
                (round((datetime.fromisoformat(at) - first).total_seconds()) + 1, value)
                for at, value in rate
            ]
            for metric, field in (("avg_latency", "latency_mean_ms"),
                                  ("max_latency", "latency_max_ms")):  # fmt: skip
                by_second = dict(sorted((m["collected"], float(m["value"]))
                                        for m in mine if m["metric"] == metric))  # fmt: skip
                assert [getattr(s, field) for s in seconds] == list(by_second.values())
            lagged = [s.lag_ms for s in seconds]
            assert all(lag is not None for lag in lagged) == (test["rate_limit"] is not None)
            telemetry = read_telemetry(store.db, run_id)
            assert telemetry is not None
            totals = {(t.source, t.metric): t.value for t in telemetry.totals}
            counters = bgwriter[test["test"]]
            for column in ("checkpoints_timed", "checkpoints_req", "buffers_checkpoint",
                           "buffers_clean", "buffers_backend", "buffers_alloc"):  # fmt: skip
                assert totals[("pg_stat_bgwriter", column)] == float(counters[column])
            for column in ("xact_commit", "blks_hit", "tup_updated"):
                assert totals[("pg_stat_database", column)] == float(database[test["test"]][column])
            assert files[f"test_bgwriter/{test['test']}"].role == "statistics"
            # its statements over the test are the run's top statements, by execution time
            ran = sorted((r for r in statements if r["test"] == test["test"]),
                         key=lambda r: -float(r["total_exec_time"]))  # fmt: skip
            assert [(st.queryid, st.calls, st.total_time_ms, st.shared_blks_hit, st.wal_bytes)
                    for st in telemetry.statements] == [
                (int(r["queryid"]), int(r["calls"]), float(r["total_exec_time"]),
                 int(r["shared_blks_hit"]), float(r["wal_bytes"]))
                for r in ran
            ]  # fmt: skip
            pgbench_query = next(st for st in telemetry.statements if "pgbench_" in st.query)
            assert pgbench_query.calls == int(test["trans"]) or test["script"] != "select"
            status = {x.source: x for x in telemetry.sources}["pg_stat_statements"]
            assert status.available and "test_statements" in status.note
            # its WAL written is the run's WAL cost; its size and cleanup time are listed
            (run,) = [r for r in store.run_records(int(campaign or 0)) if r.id == run_id]
            wal = float(test["wal_written"]) / int(test["trans"])
            assert run["wal_bytes_per_tx"] == pytest.approx(wal)
            assert run["server_cpu_us_per_tx"] is None
            listing = files[f"tests/{test['test']}"].note
            assert f"size after the test: {int(test['dbsize']):,} bytes" in listing
            hours, minutes, seconds = test["cleanup"].split(":")
            took = (int(hours) * 60 + int(minutes)) * 60 + float(seconds)
            assert f"its cleanup after the test took {took:.2f} s" in listing
        unread = {f.path: f.note for o in outcomes for f in o.files if f.role == "unread"}
    assert "max_dirty" in " ".join(unread) and "test_bgwriter: max_dirty" in unread
    assert "pg_clients_active" in unread["test_metrics_data: other metrics"]
    assert "not measured" in unread["test_metrics_data: schedule lag"]
    assert "(test(s) 5)" in unread["test_metrics_data: least and largest schedule lag"]
    assert "test_statio: every row" in unread and "test_statements: every row" not in unread
