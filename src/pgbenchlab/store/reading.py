"""Reading a results database: the queries of everything that shows results (reports, export,
the CLI), returning the frozen records of `pgbenchlab.store.records`.

Per-run reads take many run ids at once (in chunks SQLite accepts) so that a thousand-run
report makes a handful of queries, not thousands.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.diagnosing import stale
from pgbenchlab.errors import UserError
from pgbenchlab.records.telemetry import Affinity
from pgbenchlab.results import (
    COMPLETE_STATUSES,
    CampaignStatus,
    GeneratorFigures,
    RunHost,
    RunOrigin,
    RunStatus,
    Second,
    ServerPart,
)
from pgbenchlab.store import bisections
from pgbenchlab.store.columns import RUN_COLUMNS
from pgbenchlab.store.faults import GuardedConnection
from pgbenchlab.store.generators import read_generators, read_server_parts
from pgbenchlab.store.metrics import Metric, figures
from pgbenchlab.store.records import (
    BisectionRecord,
    CampaignRecord,
    CampaignSummary,
    DatasetRecord,
    ProbeRecord,
    RunDiagnosis,
    RunEvent,
    RunRecord,
    RunTelemetryFacts,
    RunValue,
    ServerRecord,
    ServerStorage,
    TelemetryPoint,
    WaitEvents,
    campaign_artifacts,
)
from pgbenchlab.store.rediagnosis import rediagnose, rediagnosed_parts
from pgbenchlab.store.telemetry import AFFINITY_COLUMNS, read_affinity

CHUNK = 500  # run ids per query: under SQLite's limit of bound parameters
RUN_SELECT = "SELECT id, campaign_id, " + ", ".join(c.name for c in RUN_COLUMNS)


def _chunks(ids: Collection[int]) -> Iterable[list[int]]:
    listed = list(ids)
    for start in range(0, len(listed), CHUNK):
        yield listed[start : start + CHUNK]


def _marks(chunk: list[int]) -> str:
    return ",".join("?" * len(chunk))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def run_record(row: Iterable[Any]) -> RunRecord:
    """A run from the values of `RUN_SELECT`, in its order."""
    run_id, campaign_id, *stored = row
    values = {c.key: c.decode(v) for c, v in zip(RUN_COLUMNS, stored, strict=True)}
    return RunRecord(int(run_id), int(campaign_id), values)


def campaign_record(row: sqlite3.Row) -> CampaignRecord:
    return CampaignRecord(
        id=int(row["id"]),
        name=str(row["name"]),
        status=CampaignStatus(row["status"]),
        plan_path=str(row["plan_path"]),
        plan_text=str(row["plan_text"]),
        plan_digest=str(row["plan_digest"]),
        started_at=float(row["started_at"]),
        finished_at=_float(row["finished_at"]),
        pgbenchlab_version=str(row["pgbenchlab_version"]),
        pgbench_version=row["pgbench_version"],
        machine=json.loads(row["machine_json"] or "{}"),
        description=str(row["description"]),
        files=json.loads(row["files_json"] or "{}"),
        axis_orders={
            str(k): tuple(str(v) for v in values)
            for k, values in json.loads(row["axis_orders_json"] or "{}").items()
        },
        missing_shards=tuple(str(s) for s in json.loads(row["missing_shards_json"])),
    )


class Reading:
    """The reading half of `Store` (``db`` is its open connection)."""

    db: GuardedConnection
    path: Path

    def _tuples(self, sql: str, parameters: list[Any]) -> sqlite3.Cursor:
        """A query's rows as plain tuples: faster than named rows for long series."""
        cursor: sqlite3.Cursor = self.db.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, parameters)

    # -- campaigns -------------------------------------------------------------------------------

    def find_campaign(self, name: str | None = None) -> CampaignRecord | None:
        """The latest campaign (of that name)."""
        named = "" if name is None else " WHERE name = ?"
        parameters: tuple[str, ...] = () if name is None else (name,)
        sql = f"SELECT * FROM campaigns{named} ORDER BY id DESC LIMIT 1"
        row = self.db.execute(sql, parameters).fetchone()
        return None if row is None else campaign_record(row)

    def campaign_id(self, name: str | None) -> int:
        """The latest campaign's id (of that name); a user's mistake when there is none."""
        found = self.find_campaign(name)
        if found is None:
            raise UserError(f"no campaign {name!r} in {self.path}" if name else "no campaign yet")
        return found.id

    def campaign_record(self, campaign_id: int) -> CampaignRecord | None:
        row = self.db.execute("SELECT * FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        return None if row is None else campaign_record(row)

    def bisection(self, name: str) -> BisectionRecord | None:
        return bisections.read_bisection(self.db, name)

    def bisection_names(self) -> list[str]:
        return bisections.bisection_names(self.db)

    def campaign_summaries(self) -> tuple[CampaignSummary, ...]:
        """Every campaign, oldest first, with its number of runs."""
        rows = self.db.execute(
            "SELECT c.*, (SELECT count(*) FROM latest_runs r WHERE r.campaign_id = c.id) AS runs "
            "FROM campaigns c ORDER BY c.id"
        ).fetchall()
        return tuple(CampaignSummary(campaign_record(r), int(r["runs"])) for r in rows)

    def artifacts_dir(self, campaign: CampaignRecord) -> Path | None:
        """Where the campaign's raw files are kept (None: nowhere inside the results directory,
        as its name is no directory name)."""
        return campaign_artifacts(self.path.parent, campaign.name, campaign.id)

    # -- servers and datasets --------------------------------------------------------------------

    def recorded_data_dirs(self) -> list[Path]:
        """Every managed server's data directory any campaign recorded."""
        rows = self.db.execute(
            "SELECT DISTINCT data_dir FROM servers WHERE kind = 'managed' AND data_dir IS NOT NULL"
        ).fetchall()
        return [Path(str(r[0])) for r in rows]

    def build_keys(self) -> set[str]:
        """The cache key of every build any campaign's servers ran."""
        rows = self.db.execute("SELECT DISTINCT build_key FROM servers WHERE build_key IS NOT NULL")
        return {str(r[0]) for r in rows}

    def server_records(self, campaign_id: int) -> tuple[ServerRecord, ...]:
        rows = self.db.execute(
            "SELECT * FROM servers WHERE campaign_id = ? ORDER BY id", (campaign_id,)
        ).fetchall()
        return tuple(
            ServerRecord(
                name=str(r["name"]),
                variant=json.loads(r["variant_json"]),
                kind=str(r["kind"]),
                version=str(r["version"]),
                version_num=int(r["version_num"]),
                install=r["install"],
                data_dir=r["data_dir"],
                settings=json.loads(r["settings_json"]),
                requested=json.loads(r["requested_json"]),
                recorded_at=float(r["recorded_at"]),
                build=json.loads(r["build_json"]) if r["build_json"] else None,
                description=str(r["description"]),
            )
            for r in rows
        )

    def server_storage(self, campaign_id: int) -> dict[str, ServerStorage]:
        """Per server name, the file system its data directory is on (none for a server
        whose facts were not recorded)."""
        rows = self.db.execute(
            "SELECT server, fs_type, mount_options FROM server_facts WHERE campaign_id = ?",
            (campaign_id,),
        ).fetchall()
        return {str(r[0]): ServerStorage(r[1], r[2]) for r in rows}

    def dataset_records(self, campaign_id: int) -> tuple[DatasetRecord, ...]:
        rows = self.db.execute(
            "SELECT server, scale, database, initialized_at, init_seconds, reused "
            "FROM datasets WHERE campaign_id = ? ORDER BY id",
            (campaign_id,),
        ).fetchall()
        return tuple(
            DatasetRecord(str(r[0]), int(r[1]), str(r[2]), float(r[3]), _float(r[4]), bool(r[5]))
            for r in rows
        )

    # -- runs ------------------------------------------------------------------------------------

    def done_run_keys(self, campaign_id: int) -> set[str]:
        marks = ", ".join("?" * len(COMPLETE_STATUSES))
        rows = self.db.execute(
            f"SELECT run_key FROM latest_runs WHERE campaign_id = ? AND status IN ({marks})",
            (campaign_id, *COMPLETE_STATUSES),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def run_values(self, campaign_id: int, metrics: Sequence[Metric] = ()) -> tuple[RunValue, ...]:
        """Latest attempts: cell, round, TPS and ``metrics`` (ok runs only), wall time."""
        asked = "".join(f", CASE WHEN status = ? THEN {m.column} END" for m in metrics)
        rows = self.db.execute(
            "SELECT cell_id, repeat, CASE WHEN status = ? THEN tps END, "
            f"finished_at - started_at{asked} FROM latest_runs WHERE campaign_id = ? "
            "ORDER BY sequence",
            (RunStatus.OK, *(RunStatus.OK for _ in metrics), campaign_id),
        ).fetchall()
        return tuple(
            RunValue(str(c), int(r), _float(t), float(s), figures(metrics, rest))
            for c, r, t, s, *rest in rows
        )

    def run_sysctl(self, run_id: int) -> dict[str, str]:
        """The kernel tunables a run ran with, as read back (none for most runs)."""
        rows = self.db.execute("SELECT name, value FROM run_sysctl WHERE run_id = ?", (run_id,))
        return {str(n): str(v) for n, v in rows.fetchall()}

    def run_records(self, campaign_id: int) -> tuple[RunRecord, ...]:
        """The campaign's runs, the latest attempt of each run key, in run order."""
        sql = f"{RUN_SELECT} FROM latest_runs WHERE campaign_id = ? ORDER BY sequence"
        return tuple(run_record(r) for r in self._tuples(sql, [campaign_id]))

    def probe_records(self, campaign_id: int) -> tuple[ProbeRecord, ...]:
        """A capacity campaign's probes, in the order they ran."""
        rows = self.db.execute(
            "SELECT run_id, search, role, rate, clients, passed, verdict, tps "
            "FROM capacity_probes WHERE campaign_id = ? ORDER BY run_id",
            (campaign_id,),
        ).fetchall()
        return tuple(
            ProbeRecord(
                int(r[0]), r[1], r[2], _float(r[3]), int(r[4]), bool(r[5]), r[6], _float(r[7])
            )
            for r in rows
        )

    def run_record(self, run_id: int) -> RunRecord | None:
        row = self._tuples(f"{RUN_SELECT} FROM runs WHERE id = ?", [run_id]).fetchone()
        return None if row is None else run_record(row)

    def run_hosts(self, run_id: int) -> tuple[RunHost, ...]:
        """The hosts of a run; a run stored before hosts existed ran here, as did its pgbench."""
        rows = self.db.execute(
            "SELECT role, host, address FROM run_hosts WHERE run_id = ? ORDER BY role, host",
            (run_id,),
        ).fetchall()
        return tuple(RunHost(*row) for row in rows) or (
            RunHost("pgbench", "local"),
            RunHost("server", "local"),
        )

    def origins_by_run(self, ids: Collection[int]) -> dict[int, RunOrigin]:
        """Where each run was made (machine, shard); runs stored before schema 13 have none."""
        found: dict[int, RunOrigin] = {}
        for chunk in _chunks(ids):
            for run_id, machine, shard in self._tuples(
                f"SELECT run_id, machine, shard FROM run_origins WHERE run_id IN ({_marks(chunk)})",
                chunk,
            ):
                found[int(run_id)] = RunOrigin(str(machine), shard)
        return found

    def run_generators(self, run_id: int) -> tuple[GeneratorFigures, ...]:
        """The load generators' parts of a run split across several (else none)."""
        return read_generators(self.db, run_id)

    def run_server_parts(self, run_id: int) -> tuple[ServerPart, ...]:
        """Each member server's part of a group's run (else none), its verdict by today's
        rules."""
        return rediagnosed_parts(self.db, run_id, read_server_parts(self.db, run_id))

    def seconds_by_run(self, ids: Collection[int]) -> dict[int, tuple[Second, ...]]:
        found: dict[int, list[Second]] = defaultdict(list)
        for chunk in _chunks(ids):
            for run_id, *values in self._tuples(
                f"SELECT * FROM run_seconds WHERE run_id IN ({_marks(chunk)}) ORDER BY run_id, t",
                chunk,
            ):
                found[run_id].append(Second(*values))
        return {run_id: tuple(seconds) for run_id, seconds in found.items()}

    def histograms_by_run(self, ids: Collection[int]) -> dict[tuple[int, str], str]:
        """Each run's stored histograms by (run id, kind: "latency" | "service")."""
        found: dict[tuple[int, str], str] = {}
        for chunk in _chunks(ids):
            for run_id, kind, text in self._tuples(
                "SELECT run_id, kind, histogram_json FROM run_histograms "
                f"WHERE run_id IN ({_marks(chunk)})",
                chunk,
            ):
                found[(int(run_id), str(kind))] = str(text)
        return found

    # -- what telemetry recorded -----------------------------------------------------------------

    def events_by_run(self, ids: Collection[int]) -> dict[int, tuple[RunEvent, ...]]:
        """Server events during runs (checkpoints, autovacuum), in time order."""
        found: dict[int, list[RunEvent]] = defaultdict(list)
        for chunk in _chunks(ids):
            for run_id, t, kind, detail in self._tuples(
                f"SELECT run_id, t, kind, detail FROM run_events WHERE run_id IN ({_marks(chunk)}) "
                "ORDER BY run_id, t",
                chunk,
            ):
                found[int(run_id)].append(RunEvent(float(t), str(kind), str(detail)))
        return {run_id: tuple(events) for run_id, events in found.items()}

    def diagnoses_by_run(self, ids: Collection[int]) -> dict[int, RunDiagnosis]:
        """What limited each run, with its evidence, where telemetry could tell."""
        found: dict[int, RunDiagnosis] = {}
        for chunk in _chunks(ids):
            for run_id, verdict, evidence, details in self._tuples(
                "SELECT run_id, verdict, evidence_json, details_json FROM run_diagnosis "
                f"WHERE run_id IN ({_marks(chunk)})",
                chunk,
            ):
                found[int(run_id)] = RunDiagnosis(
                    Bottleneck(verdict),
                    tuple(str(e) for e in json.loads(evidence)),
                    json.loads(details),
                )
        for run_id in [r for r, d in found.items() if stale(d.details)]:
            again = rediagnose(self.db, run_id)  # by today's rules, from what was stored
            if again is None:
                del found[run_id]
            else:
                found[run_id] = RunDiagnosis(again.verdict, again.evidence, again.details)
        return found

    def telemetry_facts_by_run(self, ids: Collection[int]) -> dict[int, RunTelemetryFacts]:
        found: dict[int, RunTelemetryFacts] = {}
        for chunk in _chunks(ids):
            for run_id, duration, cpus, rounds in self._tuples(
                "SELECT run_id, duration_s, host_cpus, activity_rounds FROM run_telemetry "
                f"WHERE run_id IN ({_marks(chunk)})",
                chunk,
            ):
                found[int(run_id)] = RunTelemetryFacts(float(duration), cpus, int(rounds))
        return found

    def telemetry_points(
        self, ids: Collection[int], wanted: Mapping[str, Collection[str] | None]
    ) -> dict[int, list[TelemetryPoint]]:
        """The per-second telemetry of the runs: of each wanted source, the metrics named (all
        of them for None). Each source is a range of the table's primary key: quick to read."""
        found: dict[int, list[TelemetryPoint]] = defaultdict(list)
        for chunk in _chunks(ids):
            for source, metrics in wanted.items():
                condition, parameters = "source = ?", [source]
                if metrics is not None:
                    condition += f" AND metric IN ({','.join('?' * len(metrics))})"
                    parameters += list(metrics)
                for run_id, *point in self._tuples(
                    "SELECT run_id, source, metric, t, value FROM run_telemetry_seconds "
                    f"WHERE run_id IN ({_marks(chunk)}) AND {condition}",
                    [*chunk, *parameters],
                ):
                    found[run_id].append((point[0], point[1], point[2], point[3]))
        return dict(found)

    def telemetry_gaps(self, run_id: int) -> tuple[tuple[str, bool, str], ...]:
        """The run's telemetry sources that were absent or partly so: (source, captured, why)."""
        rows = self._tuples(
            "SELECT source, available, note FROM run_telemetry_sources WHERE run_id = ? "
            "AND (available = 0 OR note <> '') ORDER BY source",
            [run_id],
        )
        return tuple((str(r[0]), bool(r[1]), str(r[2])) for r in rows)

    def major_gaps(self, campaign_id: int) -> dict[str, dict[str, str]]:
        """Per server, the telemetry its PostgreSQL major could not give: source → why."""
        found: dict[str, dict[str, str]] = defaultdict(dict)
        for server, source, note in self._tuples(
            "SELECT DISTINCT r.server, s.source, s.note FROM run_telemetry_sources s "
            "JOIN runs r ON r.id = s.run_id WHERE r.campaign_id = ? "
            "AND s.note LIKE '%PostgreSQL % has no%' ORDER BY s.source",
            [campaign_id],
        ):
            found[str(server)][str(source)] = str(note)
        return dict(found)

    def wait_events(self, run_id: int, limit: int) -> tuple[WaitEvents, ...]:
        """The run's most sampled wait events, most first."""
        rows = self._tuples(
            "SELECT wait_event_type, wait_event, samples FROM run_wait_events WHERE run_id = ? "
            "ORDER BY samples DESC LIMIT ?",
            [run_id, limit],
        )
        return tuple(WaitEvents(str(r[0]), str(r[1]), int(r[2])) for r in rows)

    def wait_events_by_run(self, ids: Collection[int]) -> dict[int, tuple[WaitEvents, ...]]:
        """Every run's wait-event samples, most first."""
        found: dict[int, list[WaitEvents]] = defaultdict(list)
        for chunk in _chunks(ids):
            for run_id, kind, event, samples in self._tuples(
                "SELECT run_id, wait_event_type, wait_event, samples FROM run_wait_events "
                f"WHERE run_id IN ({_marks(chunk)}) ORDER BY run_id, samples DESC",
                chunk,
            ):
                found[int(run_id)].append(WaitEvents(str(kind), str(event), int(samples)))
        return {run_id: tuple(waits) for run_id, waits in found.items()}

    def affinity_by_run(self, ids: Collection[int]) -> dict[int, tuple[Affinity, ...]]:
        """The CPUs each run's server processes and pgbench were allowed (read back)."""
        found: dict[int, list[Affinity]] = defaultdict(list)
        for chunk in _chunks(ids):
            for run_id, *row in self._tuples(
                f"SELECT run_id, {AFFINITY_COLUMNS} FROM run_affinity "
                f"WHERE run_id IN ({_marks(chunk)}) ORDER BY run_id, role",
                chunk,
            ):
                found[int(run_id)].append(read_affinity(tuple(row)))
        return {run_id: tuple(found_) for run_id, found_ in found.items()}
