"""Server statistics, version-aware: which columns each view has in which server version, and
the few queries the sampler sends (all over one connection).

The cumulative views are read in one round trip per second: one row per source (and per
pg_stat_io object) with an array of numbers. A column a version lacks is not asked for, and a
timing column whose setting is off (it would read zero) is dropped: both are absent, never 0.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from pgbenchlab.records.version import major_text

VersionRange = tuple[int, int | None]  # server_version_num: from (inclusive), until (exclusive)

DATABASE_COLUMNS: dict[VersionRange, tuple[str, ...]] = {
    (90600, None): (
        "xact_commit",
        "xact_rollback",
        "blks_read",
        "blks_hit",
        "tup_returned",
        "tup_fetched",
        "tup_inserted",
        "tup_updated",
        "tup_deleted",
        "temp_files",
        "temp_bytes",
        "deadlocks",
        "blk_read_time",
        "blk_write_time",
    ),
}
# Checkpoints moved from pg_stat_bgwriter to pg_stat_checkpointer in 17; backend writes to
# pg_stat_io.
BGWRITER_COLUMNS: dict[VersionRange, tuple[str, ...]] = {
    (90600, 170000): (
        "checkpoints_timed",
        "checkpoints_req",
        "checkpoint_write_time",
        "checkpoint_sync_time",
        "buffers_checkpoint",
        "buffers_clean",
        "maxwritten_clean",
        "buffers_backend",
        "buffers_backend_fsync",
        "buffers_alloc",
    ),
    (170000, None): ("buffers_clean", "maxwritten_clean", "buffers_alloc"),
}
_CHECKPOINTER_17 = (
    "num_timed",
    "num_requested",
    "restartpoints_timed",
    "restartpoints_req",
    "restartpoints_done",
    "write_time",
    "sync_time",
    "buffers_written",
)
CHECKPOINTER_COLUMNS: dict[VersionRange, tuple[str, ...]] = {
    (170000, 180000): _CHECKPOINTER_17,
    (180000, None): (*_CHECKPOINTER_17, "num_done", "slru_written"),
}
# pg_stat_wal appeared in 14; in 18 its write/sync counts and times moved to pg_stat_io.
_WAL_14 = ("wal_records", "wal_fpi", "wal_bytes", "wal_buffers_full")
WAL_COLUMNS: dict[VersionRange, tuple[str, ...]] = {
    (140000, 180000): (*_WAL_14, "wal_write", "wal_sync", "wal_write_time", "wal_sync_time"),
    (180000, None): _WAL_14,
}
_IO_16 = (
    "reads",
    "read_time",
    "writes",
    "write_time",
    "writebacks",
    "writeback_time",
    "extends",
    "extend_time",
    "hits",
    "evictions",
    "reuses",
    "fsyncs",
    "fsync_time",
)
IO_COLUMNS: dict[VersionRange, tuple[str, ...]] = {
    (160000, 180000): _IO_16,
    (180000, None): (*_IO_16, "read_bytes", "write_bytes", "extend_bytes"),
}
VIEWS: dict[str, tuple[dict[VersionRange, tuple[str, ...]], str]] = {
    # source: (columns by version, FROM clause)
    "pg_stat_database": (DATABASE_COLUMNS, "pg_stat_database WHERE datname = current_database()"),
    "pg_stat_bgwriter": (BGWRITER_COLUMNS, "pg_stat_bgwriter"),
    "pg_stat_checkpointer": (CHECKPOINTER_COLUMNS, "pg_stat_checkpointer"),
    "pg_stat_wal": (WAL_COLUMNS, "pg_stat_wal"),
    "pg_stat_io": (IO_COLUMNS, "pg_stat_io GROUP BY object"),
}
FIRST_VERSION = {"pg_stat_checkpointer": 17, "pg_stat_wal": 14, "pg_stat_io": 16}
IO_TIMES = ("read_time", "write_time", "writeback_time", "extend_time", "fsync_time")
SETTINGS = (
    "track_io_timing",
    "track_wal_io_timing",
    "shared_preload_libraries",
    "wal_sync_method",
    "synchronous_commit",
    "fsync",
)

ACTIVITY_SQL = """
SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'CPU'), count(*)
FROM pg_stat_activity
WHERE datname = current_database() AND {client}
  AND application_name = 'pgbench' AND pid <> %s
  AND (wait_event_type IS NOT NULL OR state = 'active')
GROUP BY 1, 2
"""
# Before 10 a backend waiting for its client's next command has no wait event, only the state
# idle (10 on: Client/ClientRead): counted as Client/idle, so a sample still sees it.
ACTIVITY_BEFORE_10_SQL = """
SELECT coalesce(wait_event_type, CASE WHEN state = 'active' THEN 'CPU' ELSE 'Client' END),
       coalesce(wait_event, CASE WHEN state = 'active' THEN 'CPU' ELSE state END), count(*)
FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'pgbench' AND pid <> %s
  AND (wait_event_type IS NOT NULL OR state IN ('active', 'idle', 'idle in transaction'))
GROUP BY 1, 2
"""
# pgbench's backends still alive: a backend reports its last statistics as it exits, so the
# final counter sample waits until none is left (else up to a second of commits goes missing).
BENCH_BACKENDS_SQL = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND {client}
  AND application_name = 'pgbench' AND pid <> %s
"""
# Before 15 a collector process gathers the counters and a backend reads them from its file,
# accepted up to PGSTAT_STAT_INTERVAL (500 ms) old: a read meant to include the backends that
# just exited waits until the file was written after they had gone.
COLLECTOR_UNTIL = 150000
SERVER_NOW_SQL = "SELECT clock_timestamp()"
STATISTICS_SINCE_SQL = "SELECT pg_stat_get_snapshot_timestamp() >= %s"
COLLECTOR_POLL_S = 0.1


def await_collector(
    conn: psycopg.Connection[Any], version: int, limit_s: float
) -> tuple[int, bool]:
    """Before 15, wait (bounded) until the collector's figures were written after this moment
    and so include the backends that have exited. Returns the statements sent and whether the
    figures were fresh in time."""
    if version >= COLLECTOR_UNTIL:
        return 0, True
    deadline = time.monotonic() + limit_s
    now = conn.execute(SERVER_NOW_SQL).fetchone()
    sent = 1
    while now is not None and time.monotonic() < deadline:
        sent += 1
        fresh = conn.execute(STATISTICS_SINCE_SQL, (now[0],)).fetchone()
        if fresh is not None and fresh[0]:
            return sent, True
        time.sleep(COLLECTOR_POLL_S)
    return sent, False


# How one of pgbench's backends is connected: TLS (with its protocol and cipher) or not.
CONNECTION_SQL = """
SELECT s.ssl, s.version, s.cipher
FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
WHERE a.datname = current_database() AND {client}
  AND a.application_name = 'pgbench' AND a.pid <> %s
ORDER BY s.ssl DESC
LIMIT 1
"""
# backend_type came in 10; before, pg_stat_activity's backends in a database were clients and
# the background workers some of them started (pgbench's application_name tells them apart).
CLIENT_BACKEND = "backend_type = 'client backend'"
BACKEND_TYPE_SINCE = 100000


@dataclass(frozen=True)
class ActivityQueries:
    """The pg_stat_activity queries as this major can run them."""

    activity: str
    bench_backends: str
    connection: str
    note: str = ""  # what this major's pg_stat_activity cannot say

    @staticmethod
    def build(version: int) -> ActivityQueries:
        since_10 = version >= BACKEND_TYPE_SINCE
        client = CLIENT_BACKEND if since_10 else "true"
        return ActivityQueries(
            ACTIVITY_SQL.format(client=client) if since_10 else ACTIVITY_BEFORE_10_SQL,
            BENCH_BACKENDS_SQL.format(client=client),
            CONNECTION_SQL.format(client=client.replace("backend_type", "a.backend_type")),
            ""
            if since_10
            else f"PostgreSQL {major_text(version)} has no Client wait events "
            "(they came in 10): a backend waiting for pgbench is counted as Client:idle",
        )


STATEMENTS_SQL = """
SELECT userid, queryid, {toplevel}, calls, {total_time}, rows, shared_blks_hit,
       shared_blks_read, shared_blks_written, {wal_bytes}, shared_blks_dirtied{query}
FROM {schema}.pg_stat_statements(%s)
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def absence(source: str, version: int) -> str:
    first = FIRST_VERSION.get(source, 0)
    return f"PostgreSQL {major_text(version)} has no {source} (it came in {first})"


def columns_for(table: Mapping[VersionRange, tuple[str, ...]], version: int) -> tuple[str, ...]:
    for (since, until), columns in table.items():
        if version >= since and (until is None or version < until):
            return columns
    return ()


@dataclass(frozen=True)
class ServerSettings:
    version_num: int
    values: dict[str, str]

    def on(self, name: str) -> bool:
        return self.values.get(name) == "on"

    def timing_setting(self, source: str, column: str, key: str = "") -> str | None:
        """The setting a timing column needs (None: always measured, or not a timing)."""
        if column in ("blk_read_time", "blk_write_time"):
            return "track_io_timing"
        if column in ("wal_write_time", "wal_sync_time"):
            return "track_wal_io_timing"
        if source == "pg_stat_io" and column in IO_TIMES:
            return "track_wal_io_timing" if key == "wal" else "track_io_timing"
        return None


def read_settings(conn: psycopg.Connection[Any]) -> ServerSettings:
    rows = conn.execute(
        "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(SETTINGS),)
    ).fetchall()
    version = int(conn.info.server_version)
    return ServerSettings(version, {str(n): str(v) for n, v in rows})


@dataclass(frozen=True)
class CounterQuery:
    """The one-round-trip query of every cumulative view this server has."""

    sql: str
    columns: dict[str, tuple[str, ...]]  # source → columns, in array order
    absent: dict[str, str]  # source → why it is absent

    @staticmethod
    def build(version: int) -> CounterQuery:
        parts, columns, absent = [], {}, {}
        for source, (table, from_clause) in VIEWS.items():
            cols = columns_for(table, version)
            if not cols:
                absent[source] = absence(source, version)
                continue
            columns[source] = cols
            grouped = "GROUP BY" in from_clause
            values = ", ".join(f"sum({c})" if grouped else c for c in cols)
            key = "object" if grouped else "''"
            parts.append(f"SELECT '{source}', {key}, ARRAY[{values}]::float8[] FROM {from_clause}")
        return CounterQuery("\nUNION ALL ".join(parts), columns, absent)

    def read(
        self, conn: psycopg.Connection[Any], settings: ServerSettings
    ) -> dict[str, dict[str, float]]:
        """source → metric → cumulative value; pg_stat_io metrics are "object.column"."""
        found: dict[str, dict[str, float]] = {}
        for source, key, values in conn.execute(self.sql).fetchall():
            metrics = found.setdefault(str(source), {})
            prefix = f"{str(key).replace(' ', '_')}." if key else ""
            for column, value in zip(self.columns[source], values, strict=True):
                needs = settings.timing_setting(source, column, str(key))
                if value is not None and (needs is None or settings.on(needs)):
                    metrics[prefix + column] = float(value)
        return found

    def notes(self, settings: ServerSettings) -> dict[str, str]:
        """What part of an available source is absent because a timing setting is off."""
        notes = {}
        for source, cols in self.columns.items():
            off = sorted(
                {
                    f"{c} (needs {s})"
                    for c in cols
                    for key in ("", "wal")
                    if (s := settings.timing_setting(source, c, key)) and not settings.on(s)
                }
            )
            if off:
                notes[source] = "absent: " + ", ".join(off)
        return notes


def statements_sql(version: int, schema: str, *, with_text: bool) -> str:
    """pg_stat_statements as each major names it: total_time until 12 (total_exec_time from
    13), wal_bytes from 13 (NULL before: absent, not zero), toplevel from 14."""
    return STATEMENTS_SQL.format(
        toplevel="toplevel" if version >= 140000 else "true",
        total_time="total_exec_time" if version >= 130000 else "total_time",
        wal_bytes="wal_bytes" if version >= 130000 else "NULL::numeric",
        query=", query" if with_text else "",
        schema=schema,
    )


def statements_note(version: int) -> str:
    """What this major's pg_stat_statements lacks."""
    if version >= 130000:
        return ""
    return f"absent: wal_bytes (PostgreSQL {major_text(version)} has none; it came in 13)"


def statements_schema(conn: psycopg.Connection[Any], settings: ServerSettings) -> str | None:
    """The schema of pg_stat_statements in this database, or None when it cannot be read."""
    if "pg_stat_statements" not in settings.values.get("shared_preload_libraries", ""):
        return None
    row = conn.execute(
        "SELECT quote_ident(n.nspname) FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_stat_statements'"
    ).fetchone()
    return str(row[0]) if row else None
