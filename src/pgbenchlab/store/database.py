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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgbenchlab.errors import StoreError, UserError
from pgbenchlab.plan import planned_axis_orders
from pgbenchlab.profiles import SERVER, Profile
from pgbenchlab.redaction import redact_settings
from pgbenchlab.results import CampaignStatus, RunHost, RunOrigin, RunResult
from pgbenchlab.server import ServerFacts
from pgbenchlab.server.pooler import PoolerFacts
from pgbenchlab.store import bisections, follows, imports, side_tables
from pgbenchlab.store import profiles as profile_tables
from pgbenchlab.store import telemetry as telemetry_tables
from pgbenchlab.store.backfills import BACKFILLS, axis_orders_json
from pgbenchlab.store.columns import run_insert
from pgbenchlab.store.faults import connect, results_os_error
from pgbenchlab.store.generators import write_generators, write_server_parts
from pgbenchlab.store.reading import Reading
from pgbenchlab.store.records import (
    BisectionRecord,
    FollowCommit,
    ImportedCampaign,
    ImportedFile,
    JoinedSets,
    NoiseFloor,
    PlanChange,
    ProbeRecord,
)
from pgbenchlab.store.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from pgbenchlab.telemetry.campaign import ServerTelemetryFacts
    from pgbenchlab.telemetry.fsync import FsyncFigure


class Store(Reading):
    """Read and write access to one results database."""

    @classmethod
    def existing(cls, path: Path) -> Store:
        """The results database at path, which a campaign must have written already."""
        if not path.is_file():
            raise UserError(f"no results database at {path}; run a campaign or give --results DIR")
        return cls(path)

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
        if self.db.in_transaction:  # a write inside a larger one (an import): that one commits
            yield
            return
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
        axis_orders: Mapping[str, Sequence[str]] | None = None,
    ) -> int:
        """A new campaign; ``axis_orders`` (`Plan.axis_orders`) default to the plan text's."""
        if axis_orders is None:
            axis_orders = planned_axis_orders(plan_text)
        with self.transaction():
            cursor = self.db.execute(
                "INSERT INTO campaigns (name, plan_path, plan_text, plan_digest, started_at, "
                "pgbenchlab_version, pgbench_version, machine_json, description, files_json, "
                "axis_orders_json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
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
                    axis_orders_json(axis_orders),
                ),
            )
        assert cursor.lastrowid is not None
        self.db.campaign_running = True  # from now on a results fault stops the campaign
        return cursor.lastrowid

    def record_import(self, found: ImportedCampaign) -> int:
        """An imported campaign whole, in one transaction: its servers, runs and the files they
        were read from (`pgbenchlab import`); its id."""
        with self.transaction():
            campaign_id = imports.insert_campaign(self.db, found)
            for server in found.servers:
                self.record_server(campaign_id, server.facts, dict(server.variant))
            run_ids = [self.record_run(campaign_id, result) for result in found.runs]
            imports.insert_files(self.db, campaign_id, found.files, run_ids)
        return campaign_id

    def reopen_campaign(self, campaign_id: int) -> None:
        with self.transaction():
            self.db.execute(
                "UPDATE campaigns SET status = ?, finished_at = NULL WHERE id = ?",
                (CampaignStatus.RUNNING, campaign_id),
            )
        self.db.campaign_running = True

    def replace_plan(
        self, campaign_id: int, plan_text: str, plan_digest: str, joined: JoinedSets | None = None
    ) -> None:
        """The campaign goes on under a plan that differs only in how many rounds it may take
        (a bisection step given a higher --max-rounds) or in the test sets it adds (joined: kept
        with the plan it replaced, `plan_changes`): its record says so from now on."""
        with self.transaction():
            if joined is not None:
                side_tables.write_plan_change(self.db, campaign_id, joined)
            self.db.execute(
                "UPDATE campaigns SET plan_text = ?, plan_digest = ? WHERE id = ?",
                (plan_text, plan_digest, campaign_id),
            )

    def finish_campaign(self, campaign_id: int, status: str, shard: str = "") -> None:
        """The campaign's end; an incomplete merge run again here (resumed) is decided again
        (`side_tables.still_missing`: shard is the part of the plan this call ran, "" none)."""
        with self.transaction():
            ran = shard if status == CampaignStatus.FINISHED else ""
            missing = side_tables.still_missing(self.db, campaign_id, ran)
            if missing and status == CampaignStatus.FINISHED:
                status = CampaignStatus.INCOMPLETE
            self.db.execute(
                "UPDATE campaigns SET status = ?, finished_at = ?, missing_shards_json = ? "
                "WHERE id = ?",
                (status, time.time(), json.dumps(missing), campaign_id),
            )
        self.db.campaign_running = False

    def mark_stopped(self, campaign_id: int) -> None:
        """Record that a results fault stopped the campaign, if the database still takes it."""
        with suppress(StoreError):
            self.finish_campaign(campaign_id, CampaignStatus.STOPPED)

    def record_server(
        self, campaign_id: int, facts: ServerFacts, variant: dict[str, str], description: str = ""
    ) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT OR REPLACE INTO servers (campaign_id, name, variant_json, kind, version, "
                "version_num, install, data_dir, settings_json, requested_json, recorded_at, "
                "build_key, build_json, description) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                    facts.build.get("key") if facts.build else None,
                    json.dumps(facts.build, sort_keys=True) if facts.build else None,
                    description,
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

    def record_run(
        self,
        campaign_id: int,
        result: RunResult,
        hosts: Sequence[RunHost] = (),
        origin: RunOrigin | None = None,
    ) -> int:
        """Store one run, its seconds, histograms, hosts and origin in one transaction (durable
        on return)."""
        with self.transaction():
            cursor = self.db.execute(*run_insert(campaign_id, result))
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
                telemetry_tables.write_telemetry(self.db, run_id, result.telemetry)
            if result.diagnosis is not None:
                telemetry_tables.write_diagnosis(self.db, run_id, result.diagnosis)
            self.db.executemany(
                "INSERT INTO run_sysctl VALUES (?,?,?)", [(run_id, *kv) for kv in result.sysctl]
            )
            self.db.executemany(
                "INSERT INTO run_hosts VALUES (?,?,?,?)",
                [(run_id, h.role, h.host, h.address) for h in hosts],
            )
            for profile in (result.profile, result.pgbench_profile):
                if profile is not None:
                    profile_tables.write_profile(self.db, run_id, profile)
            if origin is not None:
                self.db.execute(
                    "INSERT INTO run_origins VALUES (?,?,?)", (run_id, origin.machine, origin.shard)
                )
            write_generators(self.db, run_id, result.generators)
            write_server_parts(self.db, run_id, result.servers)
        return run_id

    def profiles_by_run(self, run_ids: list[int], process: str = SERVER) -> dict[int, Profile]:
        """The runs' CPU profiles of the server (or of pgbench: process PGBENCH)."""
        return profile_tables.read_profiles(self.db, run_ids, process)

    def record_probe(self, campaign_id: int, probe: ProbeRecord) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO capacity_probes (run_id, campaign_id, search, role, rate, clients, "
                "passed, verdict, tps) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    probe.run_id,
                    campaign_id,
                    probe.search,
                    probe.role,
                    probe.rate,
                    probe.clients,
                    int(probe.passed),
                    probe.verdict,
                    probe.tps,
                ),
            )

    def record_server_facts(self, campaign_id: int, facts: ServerTelemetryFacts) -> None:
        with self.transaction():
            telemetry_tables.write_server_facts(self.db, campaign_id, facts)

    def record_pooler(self, campaign_id: int, facts: PoolerFacts) -> None:
        with self.transaction():
            side_tables.write_pooler(self.db, campaign_id, facts)

    def poolers(self, campaign_id: int) -> dict[str, PoolerFacts]:
        """Each server's pooler in the campaign, by server name."""
        return side_tables.read_poolers(self.db, campaign_id)

    def save_bisection(self, record: BisectionRecord) -> None:
        with self.transaction():
            bisections.write_bisection(self.db, record)

    def replace_noise_floors(self, campaign_id: int, floors: Sequence[NoiseFloor]) -> None:
        with self.transaction():  # those recorded before go: the campaign's floors as of now
            side_tables.forget_noise_floors(self.db, campaign_id)
            for floor in floors:
                side_tables.write_noise_floor(self.db, campaign_id, floor)

    def noise_floors(self, campaign_id: int) -> tuple[NoiseFloor, ...]:
        return side_tables.read_noise_floors(self.db, campaign_id)

    def save_follow_commit(self, record: FollowCommit) -> None:
        with self.transaction():
            follows.write_follow_commit(self.db, record)

    def follow_commits(self, follow: str) -> tuple[FollowCommit, ...]:
        """A followed branch's commits, oldest first."""
        return follows.read_follow_commits(self.db, follow)

    def follow_names(self) -> list[str]:
        return follows.follow_names(self.db)

    def add_follow_metrics(self, follow: str, metrics: tuple[str, ...]) -> None:
        """Metrics the follow follows beyond the defaults (kept for its later calls and pages)."""
        with self.transaction():
            follows.add_follow_metrics(self.db, follow, metrics)

    def follow_metrics(self, follow: str) -> tuple[str, ...]:
        return follows.read_follow_metrics(self.db, follow)

    def plan_changes(self, campaign_id: int) -> tuple[PlanChange, ...]:
        return side_tables.read_plan_changes(self.db, campaign_id)

    def imported_files(self, campaign_id: int) -> tuple[ImportedFile, ...]:
        """The files an imported campaign was read from (`pgbenchlab import`)."""
        return imports.read_files(self.db, campaign_id)

    def imported_as(self, digest: str) -> str | None:
        """The imported campaign that read these very files with this pattern, if any."""
        return imports.campaign_of_digest(self.db, digest)

    def fsync_figure(self, campaign_id: int, device: str) -> FsyncFigure | None:
        return telemetry_tables.read_fsync_figure(self.db, campaign_id, device)
