"""pgbench-tools' per-test statistics mapped onto what a run stores, and what does not map
listed with the reason.

- `test_metrics_data`: its per-second `rate` (transactions that ended in the second), and
  `avg_latency`, `min_latency`, `max_latency` (ms, from its per-transaction rows) become the
  run's seconds. It buckets by the clock: second t is the t-th second from the first in which a
  transaction ended (the first and the last are partial). Its schedule lag is a run's only
  under a rate limit (without one, pgbench-tools writes 0: not measured). Its other metrics (its
  own samples of the server and of vmstat, iostat, meminfo) are listed.
- `test_bgwriter`: the difference of pg_stat_bgwriter's counters (from 17, of
  pg_stat_checkpointer's and pg_stat_bgwriter's) read before and after the test, as telemetry
  totals under the view pgbenchlab reads them from. From 17 on pgbench-tools writes 0 for
  backend writes and fsyncs (not measured), listed; so is `max_dirty` (the largest Dirty of
  /proc/meminfo, 0 when it collected no OS data).
- `test_stat_database`: pg_stat_database read after the test, its statistics reset before it
  (so the counters are the test's, pgbench-tools' own queries in the test database included),
  as pg_stat_database totals; `numbackends` (a gauge) and `conflicts` (pgbenchlab reads none)
  are listed.
- `tests.wal_written` (its insert position's advance over the test) becomes the run's WAL cost
  (`wal_bytes_per_tx`); its other costs are absent, "pgbench-tools records none". The test's
  `dbsize` and `cleanup` time map to no run figure: they are kept in the test's listing.
- `test_statements`: pg_stat_statements over the test (its calls are the test's transactions),
  the ten statements that took the most execution time as the run's top statements, as
  pgbenchlab's own capture keeps them (pgbench-tools' own queries among them); the others are
  counted in the listing.
- Other per-test tables (`test_statio`, `test_buffercache`, `test_settings`) are listed, not
  imported.

Nothing is computed that pgbench-tools did not store; the server's version decides the views
(unknown: the counters are listed, not placed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from pgbenchlab.records.costs import RunCosts
from pgbenchlab.records.telemetry import RunTelemetry, SourceStatus, Statement, Total
from pgbenchlab.results import Second
from pgbenchlab.store import ImportedFile
from pgbenchlab.telemetry.pgstats import DATABASE_COLUMNS
from pgbenchlab.telemetry.statements import TOP

BGWRITER, DATABASE, METRICS = "test_bgwriter", "test_stat_database", "test_metrics_data"
STATEMENTS = "test_statements"
# The costs of a run (`records.costs` notes' keys) pgbench-tools does not record: WAL it does.
NOT_RECORDED = ("server_cpu", "buffers", "context_switches", "instructions", "cycles")
NOT_IMPORTED = {
    "test_statio": "per-relation block reads and hits at the test's end: pgbenchlab keeps none",
    "test_buffercache": "pg_buffercache's contents at the test's end: pgbenchlab keeps none",
    "test_settings": "the server's settings at the test: pgbenchlab records them per campaign, "
    "from the server it runs",
}
TABLES = (BGWRITER, DATABASE, METRICS, STATEMENTS, *NOT_IMPORTED)
SECOND = ("rate", "avg_latency", "min_latency", "max_latency")  # a Second's tps, latency_*_ms
LAG = "avg_schedule_lag_ms"
LAGS = (LAG, "min_schedule_lag_ms", "max_schedule_lag_ms")
# test_bgwriter's columns by where pgbenchlab reads them, before 17 and from 17 on
BGWRITER_COUNTERS = ("checkpoints_timed", "checkpoints_req", "buffers_checkpoint",
                     "buffers_clean", "maxwritten_clean", "buffers_backend",
                     "buffers_backend_fsync", "buffers_alloc")  # fmt: skip
FROM_17 = {
    "checkpoints_timed": ("pg_stat_checkpointer", "num_timed"),
    "checkpoints_req": ("pg_stat_checkpointer", "num_requested"),
    "buffers_checkpoint": ("pg_stat_checkpointer", "buffers_written"),
    "buffers_clean": ("pg_stat_bgwriter", "buffers_clean"),
    "maxwritten_clean": ("pg_stat_bgwriter", "maxwritten_clean"),
    "buffers_alloc": ("pg_stat_bgwriter", "buffers_alloc"),
}

Rows = Mapping[str, Sequence[Mapping[str, Any]]]  # table → the test's rows
Statistics = Mapping[tuple[Any, int], Rows]  # (server, test) → its rows


@dataclass(frozen=True)
class Unmapped:
    """What of a statistics table does not map onto a run, and why."""

    table: str
    what: str
    why: str
    names: tuple[str, ...] = ()  # the metrics or columns, where `what` groups them


@dataclass(frozen=True)
class TestStatistics:
    seconds: tuple[Second, ...]
    telemetry: RunTelemetry | None
    read: tuple[tuple[str, str, str], ...]  # table, SHA-256 of its rows, what was made of them
    unmapped: tuple[Unmapped, ...]


def read_statistics(conn: psycopg.Connection[Any], tables: set[str]) -> Statistics:
    """The per-test rows of the statistics tables the database has, by (server, test)."""
    found: dict[tuple[Any, int], dict[str, list[dict[str, Any]]]] = {}
    for table in (t for t in TABLES if t in tables):
        timed = ", extract(epoch FROM collected) AS collected_epoch" if table == METRICS else ""
        with conn.cursor() as cursor:
            cursor.execute(f"SELECT *{timed} FROM {table}")
            names = [c.name for c in cursor.description or ()]
            for row in cursor.fetchall():
                values = dict(zip(names, row, strict=True))
                key = (values.get("server"), int(values["test"]))
                found.setdefault(key, {}).setdefault(table, []).append(values)
    return found


def test_statistics(
    test: Mapping[str, Any], rows: Rows, version_num: int, started: float, ended: float
) -> TestStatistics:
    unmapped = [Unmapped(t, "every row", why) for t, why in NOT_IMPORTED.items() if rows.get(t)]
    totals: list[Total] = []
    sources: list[SourceStatus] = []
    notes: dict[str, str] = {}
    for row in rows.get(BGWRITER, ())[:1]:
        placed, missed = _bgwriter(row, version_num)
        totals += placed
        unmapped += missed
        notes[BGWRITER] = f"{len(placed)} counter(s) as telemetry totals"
        sources += [
            SourceStatus(view, True, "imported: pgbench-tools' test_bgwriter")
            for view in sorted({t.source for t in placed})
        ]
    for row in rows.get(DATABASE, ())[:1]:
        wanted = DATABASE_COLUMNS[(90600, None)]
        placed = [
            Total("pg_stat_database", c, float(row[c])) for c in wanted if row.get(c) is not None
        ]
        totals += placed
        unmapped += [
            Unmapped(DATABASE, column, why)
            for column, why in (("numbackends", "a gauge at the test's end"),
                                ("conflicts", "recovery conflicts: pgbenchlab reads none"))
            if row.get(column) is not None
        ]  # fmt: skip
        notes[DATABASE] = f"{len(placed)} counter(s) as telemetry totals"
        note = "imported: pgbench-tools' test_stat_database (its own queries counted too)"
        sources.append(SourceStatus("pg_stat_database", True, note))
    seconds, missed = _seconds(rows.get(METRICS, ()), rated=test.get("rate_limit") is not None)
    unmapped += missed
    if seconds:
        notes[METRICS] = f"{len(seconds)} second(s): TPS and latency mean, min, max"
    statements, more = _statements(rows.get(STATEMENTS, ()))
    if statements:
        notes[STATEMENTS] = f"{len(statements)} top statement(s) by execution time"
        note = "imported: pgbench-tools' test_statements (over the test, its own queries too)"
        sources.append(SourceStatus("pg_stat_statements", True, note))
    if more:
        why = f"pgbenchlab keeps a run's {TOP} statements that took the most execution time"
        unmapped.append(Unmapped(STATEMENTS, f"{more} statement(s) beyond the top {TOP}", why))
    costs = _costs(test, ended - started)
    telemetry = None
    if totals or statements or costs is not None:
        telemetry = RunTelemetry(
            started_at=started, duration_s=max(ended - started, 0.0),
            server_version_num=version_num or None, activity_rounds=0, counter_rounds=2,
            sources=tuple(sources), series=(), totals=tuple(totals), waits=(), events=(),
            statements=statements, costs=costs,
        )  # fmt: skip
    read = tuple((t, _digest(rows[t]), note) for t, note in notes.items())
    return TestStatistics(seconds, telemetry, read, tuple(unmapped))


def _statements(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[Statement, ...], int]:
    """The test's statements that took the most execution time (`total_exec_time`, before 13
    `total_time`), and how many more it ran."""
    timed = "total_exec_time" if any("total_exec_time" in r for r in rows) else "total_time"
    ran = sorted((r for r in rows if int(r.get("calls") or 0) > 0),
                 key=lambda r: -float(r.get(timed) or 0))  # fmt: skip
    kept = tuple(
        Statement(
            rank=rank,
            queryid=int(row.get("queryid") or 0),
            query=str(row.get("query") or ""),
            calls=int(row["calls"]),
            total_time_ms=float(row.get(timed) or 0),
            rows=int(row.get("rows") or 0),
            shared_blks_hit=int(row.get("shared_blks_hit") or 0),
            shared_blks_read=int(row.get("shared_blks_read") or 0),
            shared_blks_written=int(row.get("shared_blks_written") or 0),
            wal_bytes=None if row.get("wal_bytes") is None else float(row["wal_bytes"]),
        )
        for rank, row in enumerate(ran[:TOP], start=1)
    )
    return kept, len(ran) - len(kept)


def _costs(test: Mapping[str, Any], window_s: float) -> RunCosts | None:
    """The test's WAL (`tests.wal_written`: its insert position's advance from the test's start
    to its end, as pgbench-tools measured it), the one cost it records."""
    if test.get("wal_written") is None:
        return None
    return RunCosts(
        window_s=max(window_s, 0.0),
        wal_bytes=float(test["wal_written"]),
        notes={figure: "pgbench-tools records none" for figure in NOT_RECORDED},
    )


def _bgwriter(row: Mapping[str, Any], version_num: int) -> tuple[list[Total], list[Unmapped]]:
    present = [c for c in BGWRITER_COUNTERS if row.get(c) is not None]
    missed = []
    if row.get("max_dirty") is not None:
        missed.append(Unmapped(BGWRITER, "max_dirty", "the largest Dirty of /proc/meminfo (0 "
                               "when pgbench-tools collected no OS data): a gauge"))  # fmt: skip
    if not version_num:
        why = "the server's version is unknown, and the view of each counter depends on it"
        return [], [*missed, Unmapped(BGWRITER, "every counter", why, tuple(present))]
    if version_num < 170000:
        return [Total("pg_stat_bgwriter", c, float(row[c])) for c in present], missed
    placed = [Total(*FROM_17[c], float(row[c])) for c in present if c in FROM_17]
    zeros = [c for c in present if c not in FROM_17]
    if zeros:
        why = "pgbench-tools writes 0 from PostgreSQL 17 on (not measured)"
        missed.append(Unmapped(BGWRITER, "backend writes", why, tuple(zeros)))
    return placed, missed


def _seconds(
    rows: Sequence[Mapping[str, Any]], *, rated: bool
) -> tuple[tuple[Second, ...], list[Unmapped]]:
    by_time: dict[float, dict[str, float]] = {}
    others: set[str] = set()
    for row in rows:
        metric = str(row["metric"])
        if metric in SECOND or (rated and metric == LAG):
            by_time.setdefault(float(row["collected_epoch"]), {})[metric] = float(row["value"])
        else:
            others.add(metric)
    missed = []
    lags = tuple(sorted(others & set(LAGS)))
    if lags and rated:
        why = "a second's least and largest schedule lag: a run's seconds keep the mean"
        missed.append(Unmapped(METRICS, "least and largest schedule lag", why, lags))
    elif lags:
        why = "without a rate limit pgbench-tools writes 0 (not measured)"
        missed.append(Unmapped(METRICS, "schedule lag", why, lags))
    if others - set(LAGS):
        why = "pgbench-tools' own samples of the server and the OS (pgbenchlab samples its own)"
        missed.append(Unmapped(METRICS, "other metrics", why, tuple(sorted(others - set(LAGS)))))
    if not by_time:
        return (), missed
    first = min(by_time)
    seconds = tuple(
        Second(
            t=round(at - first) + 1,
            tps=got["rate"],
            latency_mean_ms=got.get("avg_latency"),
            latency_stddev_ms=None,
            latency_min_ms=got.get("min_latency"),
            latency_max_ms=got.get("max_latency"),
            lag_ms=got.get(LAG),
        )
        for at, got in sorted(by_time.items())
        if "rate" in got
    )
    return seconds, missed


def unmapped_files(found: Sequence[tuple[int, Unmapped]]) -> tuple[ImportedFile, ...]:
    """What did not map, one listing per table and kind (test → what), with the tests."""
    grouped: dict[tuple[str, str], tuple[str, set[str], list[int]]] = {}
    for test, item in found:
        why, names, tests = grouped.setdefault((item.table, item.what), (item.why, set(), []))
        names.update(item.names)
        tests.append(test)
    listed = []
    for (table, what), (why, names, tests) in grouped.items():
        named = f": {', '.join(sorted(names))}" if names else ""
        note = f"not imported, {why}{named} (test(s) {', '.join(map(str, sorted(tests)))})"
        digest = _digest([{"table": table, "what": what, "tests": sorted(tests)}])
        listed.append(ImportedFile(f"{table}: {what}", digest, 0, "unread", None, note))
    return tuple(listed)


def _digest(rows: Sequence[Mapping[str, Any]]) -> str:
    text = json.dumps([dict(r) for r in rows], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
