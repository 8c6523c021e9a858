"""Writing and reading telemetry in the results database (tables of schema migration 2).

Plain SQL stays pleasant: one row per value in run_telemetry_seconds (run_id, source, metric,
t, value) and run_telemetry_totals, so a chart of one metric is a WHERE clause and a
comparison a GROUP BY. See docs/telemetry.md for every source and metric.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from pgbenchlab.records.telemetry import (
    Affinity,
    LogEvent,
    Point,
    RunTelemetry,
    SourceStatus,
    Statement,
    Total,
    WaitCount,
)
from pgbenchlab.telemetry.fsync import FsyncFigure

if TYPE_CHECKING:
    from pgbenchlab.analysis.diagnosis import Diagnosis
    from pgbenchlab.telemetry.campaign import ServerTelemetryFacts


def write_telemetry(db: sqlite3.Connection, run_id: int, tel: RunTelemetry) -> None:
    db.execute(
        "INSERT INTO run_telemetry VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            run_id,
            tel.started_at,
            tel.duration_s,
            tel.server_version_num,
            tel.activity_rounds,
            tel.counter_rounds,
            tel.pgbench_threads,
            tel.host_cpus,
            json.dumps(tel.server_settings, sort_keys=True),
            json.dumps(list(tel.errors)),
        ),
    )
    db.executemany(
        "INSERT INTO run_telemetry_sources VALUES (?,?,?,?)",
        [(run_id, s.source, int(s.available), s.note) for s in tel.sources],
    )
    db.executemany(
        "INSERT INTO run_telemetry_seconds VALUES (?,?,?,?,?)",
        [(run_id, p.source, p.metric, p.t, p.value) for p in tel.series],
    )
    db.executemany(
        "INSERT INTO run_telemetry_totals VALUES (?,?,?,?)",
        [(run_id, t.source, t.metric, t.value) for t in tel.totals],
    )
    db.executemany(
        "INSERT INTO run_wait_events VALUES (?,?,?,?)",
        [(run_id, w.wait_event_type, w.wait_event, w.samples) for w in tel.waits],
    )
    db.executemany(
        "INSERT INTO run_events VALUES (?,?,?,?,?)",
        [
            (run_id, e.t, e.kind, e.summary, json.dumps(e.detail, sort_keys=True))
            for e in tel.events
        ],
    )
    db.executemany(
        "INSERT INTO run_affinity (run_id, role, requested, observed, processes, verified, "
        "numa_requested, memory_nodes, numa_policies) VALUES (?,?,?,?,?,?,?,?,?)",
        [
            (
                run_id,
                a.role,
                a.requested,
                OBSERVED_SEPARATOR.join(a.observed),
                a.processes,
                None if a.verified is None else int(a.verified),
                a.numa_requested,
                OBSERVED_SEPARATOR.join(a.memory_nodes) or None,
                OBSERVED_SEPARATOR.join(a.numa_policies) or None,
            )
            for a in tel.affinity
        ],
    )
    db.executemany(
        "INSERT INTO run_statements VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                run_id,
                s.rank,
                s.queryid,
                s.query,
                s.calls,
                s.total_time_ms,
                s.rows,
                s.shared_blks_hit,
                s.shared_blks_read,
                s.shared_blks_written,
                s.wal_bytes,
            )
            for s in tel.statements
        ],
    )


OBSERVED_SEPARATOR = " | "  # between distinct CPU lists, when a role's processes disagreed


AFFINITY_COLUMNS = (
    "role, requested, observed, processes, numa_requested, memory_nodes, numa_policies"
)


def read_affinity(row: sqlite3.Row | tuple[object, ...]) -> Affinity:
    """A run_affinity row (`AFFINITY_COLUMNS`) as its record."""
    role, requested, observed, processes, numa, memory, policies = row[:7]
    return Affinity(
        str(role),
        None if requested is None else str(requested),
        tuple(str(observed).split(OBSERVED_SEPARATOR)),
        int(str(processes)),
        numa_requested=None if numa is None else str(numa),
        memory_nodes=() if memory is None else tuple(str(memory).split(OBSERVED_SEPARATOR)),
        numa_policies=() if policies is None else tuple(str(policies).split(OBSERVED_SEPARATOR)),
    )


def write_diagnosis(db: sqlite3.Connection, run_id: int, diagnosis: Diagnosis) -> None:
    db.execute(
        "INSERT INTO run_diagnosis VALUES (?,?,?,?)",
        (
            run_id,
            diagnosis.verdict.value,
            json.dumps(list(diagnosis.evidence)),
            json.dumps(diagnosis.details, sort_keys=True),
        ),
    )


def write_server_facts(
    db: sqlite3.Connection, campaign_id: int, facts: ServerTelemetryFacts
) -> None:
    storage: dict[str, Any] = facts.storage or {}
    fsync = facts.fsync
    db.execute(
        "INSERT OR REPLACE INTO server_facts VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            campaign_id,
            facts.server,
            storage.get("fs_type"),
            storage.get("super_options")
            and f"{storage.get('mount_options')} ({storage.get('super_options')})",
            storage.get("device"),
            json.dumps(storage, sort_keys=True) if facts.storage else None,
            json.dumps(facts.pg_config, sort_keys=True) if facts.pg_config else None,
            fsync.for_method("fdatasync") if fsync else None,
            json.dumps(
                {"device": fsync.device, "ops_per_s": fsync.ops_per_s, "output": fsync.output}
            )
            if fsync
            else None,
            time.time(),
        ),
    )


def read_fsync_figure(db: sqlite3.Connection, campaign_id: int, device: str) -> FsyncFigure | None:
    row = db.execute(
        "SELECT fsync_json FROM server_facts WHERE campaign_id = ? AND device = ? "
        "AND fsync_json IS NOT NULL LIMIT 1",
        (campaign_id, device),
    ).fetchone()
    if row is None:
        return None
    data = json.loads(row[0])
    return FsyncFigure(
        str(data["device"]),
        {str(k): float(v) for k, v in data["ops_per_s"].items()},
        str(data["output"]),
    )


def read_telemetry(db: sqlite3.Connection, run_id: int) -> RunTelemetry | None:
    """A run's telemetry as it was stored (what the sampler does not store, such as its own
    statements, comes back as none)."""
    row = db.execute(
        "SELECT started_at, duration_s, server_version_num, activity_rounds, counter_rounds, "
        "pgbench_threads, host_cpus, server_settings_json, errors_json FROM run_telemetry "
        "WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        return None

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in db.execute(sql, (run_id,)).fetchall()]

    return RunTelemetry(
        started_at=float(row[0]),
        duration_s=float(row[1]),
        server_version_num=row[2],
        activity_rounds=int(row[3]),
        counter_rounds=int(row[4]),
        pgbench_threads=row[5],
        host_cpus=row[6],
        server_settings=json.loads(row[7]),
        errors=tuple(json.loads(row[8])),
        sources=tuple(
            SourceStatus(s, bool(a), n)
            for s, a, n in rows(
                "SELECT source, available, note FROM run_telemetry_sources WHERE run_id = ?"
            )
        ),
        series=tuple(
            Point(*r)
            for r in rows(
                "SELECT source, metric, t, value FROM run_telemetry_seconds WHERE run_id = ? "
                "ORDER BY source, metric, t"
            )
        ),
        totals=tuple(
            Total(*r)
            for r in rows("SELECT source, metric, value FROM run_telemetry_totals WHERE run_id = ?")
        ),
        waits=tuple(
            WaitCount(*r)
            for r in rows(
                "SELECT wait_event_type, wait_event, samples FROM run_wait_events WHERE run_id = ?"
            )
        ),
        events=tuple(
            LogEvent(t, kind, summary, json.loads(detail))
            for t, kind, summary, detail in rows(
                "SELECT t, kind, detail, detail_json FROM run_events WHERE run_id = ? ORDER BY t"
            )
        ),
        statements=tuple(
            Statement(*r)
            for r in rows(
                "SELECT rank, queryid, query, calls, total_time_ms, rows, shared_blks_hit, "
                "shared_blks_read, shared_blks_written, wal_bytes FROM run_statements "
                "WHERE run_id = ? ORDER BY rank"
            )
        ),
        affinity=tuple(
            read_affinity(r)
            for r in rows(f"SELECT {AFFINITY_COLUMNS} FROM run_affinity WHERE run_id = ?")
        ),
    )
