"""The results database: one SQLite file with a schema version and forward migrations.

SQLite because every finished run must be durable at once (one transaction per run, WAL mode),
readers (a report, a user's SQL) must work while a campaign writes, and it needs no server. The
heavy analysis of per-transaction logs happens before storing (polars), so the database holds
run-level figures, per-second series and histograms: small, and plain SQL for users.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgbenchlab import findings
from pgbenchlab.errors import StoreError
from pgbenchlab.redaction import redact_settings
from pgbenchlab.results import COMPLETE_STATUSES, RunResult
from pgbenchlab.server import ServerFacts
from pgbenchlab.store_faults import connect, results_os_error
from pgbenchlab.telemetry import storage as telemetry_store

if TYPE_CHECKING:
    from pgbenchlab.telemetry.campaign import ServerTelemetryFacts
    from pgbenchlab.telemetry.fsync import FsyncFigure

SCHEMA_VERSION = 3
STOPPED = "stopped"  # campaign status: the results could no longer be written (disk full, lock)

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE campaigns (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        plan_path TEXT NOT NULL,
        plan_text TEXT NOT NULL,
        plan_digest TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        status TEXT NOT NULL DEFAULT 'running',
        pgbenchlab_version TEXT NOT NULL,
        pgbench_version TEXT,
        machine_json TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE servers (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        name TEXT NOT NULL,
        variant_json TEXT NOT NULL DEFAULT '{}',
        kind TEXT NOT NULL,
        version TEXT NOT NULL,
        version_num INTEGER NOT NULL,
        install TEXT,
        data_dir TEXT,
        settings_json TEXT NOT NULL,
        requested_json TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        UNIQUE (campaign_id, name, variant_json)
    );
    CREATE TABLE datasets (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        scale INTEGER NOT NULL,
        database TEXT NOT NULL,
        initialized_at REAL NOT NULL,
        init_seconds REAL,
        reused INTEGER NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        run_key TEXT NOT NULL,
        cell_id TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        repeat INTEGER NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        server TEXT NOT NULL,
        server_settings_json TEXT NOT NULL,
        scale INTEGER NOT NULL,
        workload TEXT NOT NULL,
        clients INTEGER NOT NULL,
        threads INTEGER NOT NULL,
        protocol TEXT NOT NULL,
        duration_s INTEGER,
        transactions_per_client INTEGER,
        warmup_s INTEGER NOT NULL,
        rate REAL,
        latency_limit_ms REAL,
        connect INTEGER NOT NULL,
        vacuum TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        argv_json TEXT NOT NULL,
        pgbench_version TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL NOT NULL,
        tps REAL,
        transactions INTEGER,
        failed INTEGER,
        skipped INTEGER,
        late INTEGER,
        latency_avg_ms REAL,
        latency_stddev_ms REAL,
        lag_avg_ms REAL,
        lag_max_ms REAL,
        connection_time_ms REAL,
        p50_ms REAL, p90_ms REAL, p95_ms REAL, p99_ms REAL, p999_ms REAL,
        min_ms REAL, max_ms REAL,
        latency_source TEXT,
        latency_samples INTEGER,
        service_p50_ms REAL, service_p99_ms REAL, service_p999_ms REAL,
        warmup_tps REAL,
        client_cpu_s REAL,
        client_cpu_us_per_tx REAL,
        report_json TEXT NOT NULL,
        warnings_json TEXT NOT NULL,
        artifacts_json TEXT NOT NULL,
        result_schema INTEGER NOT NULL
    );
    CREATE INDEX runs_campaign ON runs (campaign_id, run_key);
    CREATE TABLE run_seconds (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        t INTEGER NOT NULL,
        tps REAL NOT NULL,
        latency_mean_ms REAL,
        latency_stddev_ms REAL,
        latency_min_ms REAL,
        latency_max_ms REAL,
        lag_ms REAL,
        skipped INTEGER,
        failed INTEGER,
        PRIMARY KEY (run_id, t)
    );
    CREATE TABLE run_histograms (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        kind TEXT NOT NULL,
        histogram_json TEXT NOT NULL,
        PRIMARY KEY (run_id, kind)
    );
    CREATE VIEW latest_runs AS
        SELECT r.* FROM runs r
        WHERE r.id = (SELECT max(id) FROM runs x
                      WHERE x.campaign_id = r.campaign_id AND x.run_key = r.run_key);
    """,
    # 2: telemetry. Per-second series and totals in a long format (one row per value, so a
    # new view or column needs no migration); a source a server version lacks has a
    # run_telemetry_sources row with available = 0 and no values: absent, never zero.
    2: """
    CREATE TABLE server_facts (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        fs_type TEXT,
        mount_options TEXT,
        device TEXT,
        storage_json TEXT,
        pg_config_json TEXT,
        fsync_ops_per_s REAL,
        fsync_json TEXT,
        recorded_at REAL NOT NULL,
        PRIMARY KEY (campaign_id, server)
    );
    CREATE TABLE run_telemetry (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        started_at REAL NOT NULL,
        duration_s REAL NOT NULL,
        server_version_num INTEGER,
        activity_rounds INTEGER NOT NULL,
        counter_rounds INTEGER NOT NULL,
        pgbench_threads INTEGER,
        host_cpus INTEGER,
        server_settings_json TEXT NOT NULL,
        errors_json TEXT NOT NULL
    );
    CREATE TABLE run_telemetry_sources (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        available INTEGER NOT NULL,
        note TEXT NOT NULL,
        PRIMARY KEY (run_id, source)
    );
    CREATE TABLE run_telemetry_seconds (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        metric TEXT NOT NULL,
        t INTEGER NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, source, metric, t)
    ) WITHOUT ROWID;
    CREATE TABLE run_telemetry_totals (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        metric TEXT NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, source, metric)
    ) WITHOUT ROWID;
    CREATE TABLE run_wait_events (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        wait_event_type TEXT NOT NULL,
        wait_event TEXT NOT NULL,
        samples INTEGER NOT NULL,
        PRIMARY KEY (run_id, wait_event_type, wait_event)
    );
    CREATE TABLE run_events (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        t REAL NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL,
        detail_json TEXT NOT NULL
    );
    CREATE INDEX run_events_run ON run_events (run_id, t);
    CREATE TABLE run_statements (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        rank INTEGER NOT NULL,
        queryid INTEGER NOT NULL,
        query TEXT NOT NULL,
        calls INTEGER NOT NULL,
        total_time_ms REAL NOT NULL,
        rows INTEGER NOT NULL,
        shared_blks_hit INTEGER NOT NULL,
        shared_blks_read INTEGER NOT NULL,
        shared_blks_written INTEGER NOT NULL,
        wal_bytes REAL,
        PRIMARY KEY (run_id, rank)
    );
    CREATE TABLE run_diagnosis (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        verdict TEXT NOT NULL,
        evidence_json TEXT NOT NULL,
        details_json TEXT NOT NULL
    );
    """,
    3: """
    ALTER TABLE campaigns ADD COLUMN description TEXT NOT NULL DEFAULT '';
    ALTER TABLE campaigns ADD COLUMN files_json TEXT NOT NULL DEFAULT '{}';
    """,
}
# Steps a migration needs beyond SQL: older campaigns get the description their plan gave.
BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {}

PERCENTILE_COLUMNS = {
    "50": "p50_ms",
    "90": "p90_ms",
    "95": "p95_ms",
    "99": "p99_ms",
    "99.9": "p999_ms",
}


def _fill_descriptions(db: sqlite3.Connection) -> None:
    for campaign_id, text in db.execute("SELECT id, plan_text FROM campaigns").fetchall():
        try:
            description = tomllib.loads(text).get("campaign", {}).get("description", "")
        except tomllib.TOMLDecodeError:
            continue
        if isinstance(description, str) and description:
            db.execute(
                "UPDATE campaigns SET description = ? WHERE id = ?", (description, campaign_id)
            )


BACKFILLS[3] = _fill_descriptions


class Store:
    """Read and write access to one results database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd: int | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise results_os_error(exc, running=False) from None
        self.db = connect(path)
        try:
            self.db.row_factory = sqlite3.Row
            self._refuse_foreign()  # before anything is written into the file
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.release()
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"results database schema {version} is newer than this pgbenchlab understands "
                f"({SCHEMA_VERSION}); upgrade pgbenchlab",
                where=str(self.path),
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            # executescript commits first, so the migration carries its own transaction.
            self.db.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[target]}")
            try:
                if target in BACKFILLS:
                    BACKFILLS[target](self.db)
                self.db.execute(f"PRAGMA user_version = {target}")
            except BaseException:
                self._rollback()
                raise
            self.db.execute("COMMIT")

    def _refuse_foreign(self) -> None:
        """A database with tables but no schema version is another program's: never write
        pgbenchlab's tables into it."""
        if int(self.db.execute("PRAGMA user_version").fetchone()[0]) != 0:
            return
        rows = self.db.execute(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name LIMIT 4"
        ).fetchall()
        if rows:
            names = ", ".join(str(r[0]) for r in rows[:3]) + (", …" if len(rows) > 3 else "")
            raise StoreError(
                f"not a pgbenchlab results database (it holds {names}): move it away or give "
                "--results a directory of its own",
                where=str(self.path),
            )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._rollback()
            raise
        self.db.execute("COMMIT")

    def _rollback(self) -> None:
        """Undo the open transaction, if SQLite has not already (it may after a full disk);
        the error that caused it is the one to report."""
        if self.db.in_transaction:
            with suppress(StoreError):
                self.db.execute("ROLLBACK")

    # -- the campaign lock --------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the writer's lock: one campaign at a time per results database."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise results_os_error(exc, running=False) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreError(
                f"another campaign ({holder}) is writing to this results database; "
                "wait for it to finish or use another --results directory",
                where=str(self.path),
            ) from None
        self._lock_fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}".encode())
        except OSError as exc:
            exc.filename = str(lock_path)
            raise results_os_error(exc, running=False) from None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- writing -----------------------------------------------------------------------------

    def start_campaign(
        self,
        name: str,
        plan_path: str,
        plan_text: str,
        plan_digest: str,
        versions: dict[str, str],
        machine: dict[str, Any],
        description: str = "",
        files: dict[str, str] | None = None,
    ) -> int:
        with self.transaction():
            cursor = self.db.execute(
                "INSERT INTO campaigns (name, plan_path, plan_text, plan_digest, started_at, "
                "pgbenchlab_version, pgbench_version, machine_json, description, files_json) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    name,
                    plan_path,
                    plan_text,
                    plan_digest,
                    time.time(),
                    versions["pgbenchlab"],
                    versions.get("pgbench"),
                    json.dumps(machine, sort_keys=True),
                    description,
                    json.dumps(files or {}, sort_keys=True),
                ),
            )
        assert cursor.lastrowid is not None
        self.db.campaign_running = True  # from now on a results fault stops the campaign
        return cursor.lastrowid

    def reopen_campaign(self, campaign_id: int) -> None:
        with self.transaction():
            self.db.execute(
                "UPDATE campaigns SET status = 'running', finished_at = NULL WHERE id = ?",
                (campaign_id,),
            )
        self.db.campaign_running = True

    def finish_campaign(self, campaign_id: int, status: str) -> None:
        with self.transaction():
            self.db.execute(
                "UPDATE campaigns SET status = ?, finished_at = ? WHERE id = ?",
                (status, time.time(), campaign_id),
            )
        self.db.campaign_running = False

    def mark_stopped(self, campaign_id: int) -> None:
        """Record that a results fault stopped the campaign, if the database still takes it."""
        with suppress(StoreError):
            self.finish_campaign(campaign_id, STOPPED)

    def record_server(self, campaign_id: int, facts: ServerFacts, variant: dict[str, str]) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT OR REPLACE INTO servers (campaign_id, name, variant_json, kind, version, "
                "version_num, install, data_dir, settings_json, requested_json, recorded_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    campaign_id,
                    facts.name,
                    json.dumps(redact_settings(variant), sort_keys=True),
                    facts.kind,
                    facts.version,
                    facts.version_num,
                    facts.install,
                    facts.data_dir,
                    json.dumps(redact_settings(facts.settings), sort_keys=True),
                    json.dumps(redact_settings(facts.requested), sort_keys=True),
                    time.time(),
                ),
            )

    def record_dataset(
        self, campaign_id: int, server: str, scale: int, database: str, seconds: float | None
    ) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO datasets (campaign_id, server, scale, database, initialized_at, "
                "init_seconds, reused) VALUES (?,?,?,?,?,?,?)",
                (campaign_id, server, scale, database, time.time(), seconds, seconds is None),
            )

    def record_run(self, campaign_id: int, result: RunResult) -> int:
        """Store one run, its seconds and histograms in one transaction (durable on return)."""
        with self.transaction():
            cursor = self.db.execute(*_run_insert(campaign_id, result))
            run_id = cursor.lastrowid
            assert run_id is not None
            self.db.executemany(
                "INSERT INTO run_seconds VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(run_id, *asdict(s).values()) for s in result.seconds],
            )
            latency = result.latency
            if latency is not None:
                histograms = {"latency": latency.histogram_json}
                if latency.service_histogram_json:
                    histograms["service"] = latency.service_histogram_json
                self.db.executemany(
                    "INSERT INTO run_histograms VALUES (?,?,?)",
                    [(run_id, kind, text) for kind, text in histograms.items()],
                )
            if result.telemetry is not None:
                telemetry_store.write_telemetry(self.db, run_id, result.telemetry)
            if result.diagnosis is not None:
                telemetry_store.write_diagnosis(self.db, run_id, result.diagnosis)
        return run_id

    def record_server_facts(self, campaign_id: int, facts: ServerTelemetryFacts) -> None:
        with self.transaction():
            telemetry_store.write_server_facts(self.db, campaign_id, facts)

    def fsync_figure(self, campaign_id: int, device: str) -> FsyncFigure | None:
        return telemetry_store.read_fsync_figure(self.db, campaign_id, device)

    # -- reading -----------------------------------------------------------------------------

    def campaign(self, name: str | None = None) -> sqlite3.Row | None:
        """The latest campaign (of that name)."""
        if name is None:
            return self.db.execute("SELECT * FROM campaigns ORDER BY id DESC LIMIT 1").fetchone()  # type: ignore[no-any-return]
        row = self.db.execute(
            "SELECT * FROM campaigns WHERE name = ? ORDER BY id DESC LIMIT 1", (name,)
        ).fetchone()
        return row  # type: ignore[no-any-return]

    def campaigns(self) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT c.*, (SELECT count(*) FROM latest_runs r WHERE r.campaign_id = c.id) AS runs "
            "FROM campaigns c ORDER BY c.id"
        ).fetchall()

    def recorded_data_dirs(self) -> list[Path]:
        """Every managed server's data directory any campaign recorded."""
        rows = self.db.execute(
            "SELECT DISTINCT data_dir FROM servers WHERE kind = 'managed' AND data_dir IS NOT NULL"
        ).fetchall()
        return [Path(str(r[0])) for r in rows]

    def done_run_keys(self, campaign_id: int) -> set[str]:
        marks = ", ".join("?" * len(COMPLETE_STATUSES))
        rows = self.db.execute(
            f"SELECT run_key FROM latest_runs WHERE campaign_id = ? AND status IN ({marks})",
            (campaign_id, *COMPLETE_STATUSES),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def runs(self, campaign_id: int) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT * FROM latest_runs WHERE campaign_id = ? ORDER BY sequence", (campaign_id,)
        ).fetchall()

    def run(self, run_id: int) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()  # type: ignore[no-any-return]

    def servers(self, campaign_id: int) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT * FROM servers WHERE campaign_id = ? ORDER BY id", (campaign_id,)
        ).fetchall()

    def seconds(self, run_id: int) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT * FROM run_seconds WHERE run_id = ? ORDER BY t", (run_id,)
        ).fetchall()

    def histogram(self, run_id: int, kind: str = "latency") -> str | None:
        row = self.db.execute(
            "SELECT histogram_json FROM run_histograms WHERE run_id = ? AND kind = ?",
            (run_id, kind),
        ).fetchone()
        return str(row[0]) if row else None


def _run_insert(campaign_id: int, r: RunResult) -> tuple[str, tuple[Any, ...]]:
    spec = r.spec | {"server_settings": redact_settings(r.spec["server_settings"])}
    latency = r.latency
    pct = latency.percentiles_ms if latency else {}
    service = (latency.service_percentiles_ms or {}) if latency else {}
    values: dict[str, Any] = {
        "campaign_id": campaign_id,
        "run_key": r.run_key,
        "cell_id": r.cell_id,
        "sequence": r.sequence,
        "repeat": r.repeat,
        "status": r.status,
        "error": r.error,
        "server": spec["server"],
        "server_settings_json": json.dumps(spec["server_settings"], sort_keys=True),
        "scale": spec["scale"],
        "workload": spec["workload"],
        "clients": spec["clients"],
        "threads": spec["threads"],
        "protocol": spec["protocol"],
        "duration_s": spec["duration_s"],
        "transactions_per_client": spec["transactions"],
        "warmup_s": spec["warmup_s"],
        "rate": spec["rate"],
        "latency_limit_ms": spec["latency_limit_ms"],
        "connect": int(spec["connect"]),
        "vacuum": spec["vacuum"],
        "spec_json": json.dumps(spec, sort_keys=True),
        "argv_json": json.dumps(list(r.argv)),
        "pgbench_version": r.pgbench_version,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
        "tps": r.tps,
        "transactions": r.transactions,
        "failed": r.failed,
        "skipped": r.skipped,
        "late": r.late,
        "latency_avg_ms": r.latency_avg_ms,
        "latency_stddev_ms": r.latency_stddev_ms,
        "lag_avg_ms": r.lag_avg_ms,
        "lag_max_ms": r.lag_max_ms,
        "connection_time_ms": r.connection_time_ms,
        **{column: pct.get(p) for p, column in PERCENTILE_COLUMNS.items()},
        "min_ms": latency.min_ms if latency else None,
        "max_ms": latency.max_ms if latency else None,
        "latency_source": latency.source if latency else None,
        "latency_samples": latency.samples if latency else None,
        "service_p50_ms": service.get("50"),
        "service_p99_ms": service.get("99"),
        "service_p999_ms": service.get("99.9"),
        "warmup_tps": r.warmup_tps,
        "client_cpu_s": r.client_cpu_s,
        "client_cpu_us_per_tx": r.client_cpu_us_per_tx,
        "report_json": json.dumps(r.report, sort_keys=True),
        "warnings_json": findings.to_json(r.warnings),
        "artifacts_json": json.dumps(list(r.artifacts)),
        "result_schema": r.schema_version,
    }
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    return f"INSERT INTO runs ({columns}) VALUES ({marks})", tuple(values.values())
