"""Telemetry in the results database: migration 2 over an existing schema-1 database, and a
run's telemetry and diagnosis written with the run, in its transaction, readable in plain SQL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from pgbenchlab import store as store_module
from pgbenchlab.analysis.diagnosis import Bottleneck, Diagnosis
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.telemetry import (
    LogEvent,
    Point,
    RunTelemetry,
    SourceStatus,
    Statement,
    Total,
    WaitCount,
)
from pgbenchlab.report.views.load import load_servers
from pgbenchlab.results import OK, RunResult
from pgbenchlab.server import ServerFacts
from pgbenchlab.store import SCHEMA_VERSION, ServerStorage, Store
from pgbenchlab.telemetry.campaign import ServerTelemetryFacts
from pgbenchlab.telemetry.fsync import FsyncFigure

SPEC = {
    "server": "pg",
    "server_settings": {},
    "scale": 1,
    "workload": "tpcb-like",
    "clients": 2,
    "threads": 1,
    "protocol": "prepared",
    "duration_s": 2,
    "transactions": None,
    "warmup_s": 0,
    "rate": None,
    "latency_limit_ms": None,
    "connect": False,
    "vacuum": "pgbench",
    "checkpoint": True,
    "latency_log": "auto",
}
TELEMETRY = RunTelemetry(
    started_at=1000.0,
    duration_s=2.01,
    server_version_num=150004,
    activity_rounds=10,
    counter_rounds=4,
    sources=(
        SourceStatus("pg_stat_wal", True, "absent: wal_sync_time (needs track_wal_io_timing)"),
        SourceStatus("pg_stat_io", False, "PostgreSQL 15 has no pg_stat_io (it came in 16)"),
    ),
    series=(
        Point("pg_stat_wal", "wal_sync", 1, 410.0),
        Point("pg_stat_wal", "wal_sync", 2, 395.5),
        Point("cpu", "user_pct", 1, 61.0),
    ),
    totals=(Total("pg_stat_wal", "wal_sync", 806.0), Total("pg_stat_database", "deadlocks", 0.0)),
    waits=(WaitCount("IO", "WALSync", 12), WaitCount("CPU", "CPU", 3)),
    events=(LogEvent(0.7, "checkpoint_start", "checkpoint starts (time)", {"flags": ["time"]}),),
    statements=(Statement(1, -42, "UPDATE pgbench_accounts …", 900, 80.5, 900, 3000, 2, 0, 1e5),),
    pgbench_threads=1,
    host_cpus=2,
    server_settings={"wal_sync_method": "fdatasync"},
)


def schema_1_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(store_module.MIGRATIONS[1] + "\nPRAGMA user_version = 1;")
    db.close()


def test_migrations_upgrade_a_schema_1_database_and_keep_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    schema_1_database(path)
    with Store(path) as store:
        version = store.db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in store.db.execute("SELECT name FROM sqlite_master")}
    assert version == SCHEMA_VERSION
    assert {"run_telemetry_seconds", "run_wait_events", "run_events", "run_diagnosis"} <= tables
    assert {"server_facts", "run_statements", "run_telemetry_sources"} <= tables


def test_a_run_with_telemetry_and_diagnosis(tmp_path: Path) -> None:
    diagnosis = Diagnosis(Bottleneck.WAL_FLUSH_BOUND, ("waits on WAL 80 %",), {"also": []})
    result = RunResult(
        run_key="k-r1",
        cell_id="k",
        sequence=1,
        repeat=1,
        status=OK,
        spec=RunCell.from_stored(SPEC),
        argv=("pgbench",),
        started_at=1.0,
        finished_at=2.0,
        pgbench_version="pgbench (PostgreSQL) 18.1",
        tps=400.0,
        telemetry=TELEMETRY,
        diagnosis=diagnosis,
    )
    with Store(tmp_path / "results.db") as store:
        campaign = store.start_campaign("c", "c.toml", "", "d", {"pgbenchlab": "0"}, {})
        run_id = store.record_run(campaign, result)
        db = store.db
        assert (
            db.execute(
                "SELECT group_concat(value) FROM run_telemetry_seconds "
                "WHERE run_id = ? AND metric = 'wal_sync' ORDER BY t",
                (run_id,),
            ).fetchone()[0]
            == "410.0,395.5"
        )
        absent = db.execute(
            "SELECT available, note FROM run_telemetry_sources WHERE source = 'pg_stat_io'"
        ).fetchone()
        assert tuple(absent) == (0, "PostgreSQL 15 has no pg_stat_io (it came in 16)")
        assert (
            db.execute(
                "SELECT count(*) FROM run_telemetry_totals WHERE source = 'pg_stat_io'"
            ).fetchone()[0]
            == 0
        )
        waits = db.execute(
            "SELECT wait_event, samples FROM run_wait_events ORDER BY samples DESC"
        ).fetchall()
        assert [tuple(w) for w in waits] == [("WALSync", 12), ("CPU", 3)]
        event = db.execute("SELECT t, kind, detail, detail_json FROM run_events").fetchone()
        assert tuple(event)[:3] == (0.7, "checkpoint_start", "checkpoint starts (time)")
        assert json.loads(event["detail_json"]) == {"flags": ["time"]}
        row = db.execute("SELECT verdict, evidence_json FROM run_diagnosis").fetchone()
        assert row["verdict"] == "wal_flush_bound"
        assert json.loads(row["evidence_json"]) == ["waits on WAL 80 %"]
        statement = db.execute("SELECT queryid, calls, wal_bytes FROM run_statements").fetchone()
        assert tuple(statement) == (-42, 900, 1e5)
        settings = db.execute("SELECT server_settings_json FROM run_telemetry").fetchone()[0]
        assert json.loads(settings) == {"wal_sync_method": "fdatasync"}


def test_server_facts_and_a_stored_fsync_figure_for_a_resumed_campaign(tmp_path: Path) -> None:
    figure = FsyncFigure("254:0", {"fdatasync": 812.5, "open_sync": 700.0}, "report")
    storage = {
        "device": "254:0",
        "fs_type": "ext4",
        "mount_options": "rw,relatime",
        "super_options": "rw",
    }
    facts = ServerTelemetryFacts("pg", storage, {"CONFIGURE": "'--with-lz4'"}, figure)
    with Store(tmp_path / "results.db") as store:
        campaign = store.start_campaign("c", "c.toml", "", "d", {"pgbenchlab": "0"}, {})
        store.record_server_facts(campaign, facts)
        store.record_server_facts(campaign, facts)  # recorded again on resume: replaced
        row = store.db.execute("SELECT * FROM server_facts").fetchone()
        assert (row["fs_type"], row["device"], row["fsync_ops_per_s"]) == ("ext4", "254:0", 812.5)
        assert row["mount_options"] == "rw,relatime (rw)"
        assert json.loads(row["pg_config_json"]) == {"CONFIGURE": "'--with-lz4'"}
        assert store.fsync_figure(campaign, "254:0") == figure
        assert store.fsync_figure(campaign, "8:1") is None
        # The report's servers table says which file system each data directory is on.
        store.record_server(
            campaign, ServerFacts("pg", "managed", "18", 180000, {}, {}, None, None), {}
        )
        assert store.server_storage(campaign) == {"pg": ServerStorage("ext4", "rw,relatime (rw)")}
        assert [s.storage for s in load_servers(store, campaign)] == ["ext4, rw,relatime (rw)"]
