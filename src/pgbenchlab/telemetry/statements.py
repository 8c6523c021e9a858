"""pg_stat_statements per run: the statements that took the most time during it.

Two snapshots (before pgbench starts, after it exits; the first without query texts) and
their difference, so the server's statistics are never reset (an external server's users may
rely on them). Needs the library in shared_preload_libraries and the extension in the
benchmark's database (each major's columns: `pgstats.statements_sql`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from pgbenchlab.records.telemetry import Statement
from pgbenchlab.telemetry import pgstats

TOP = 10
Key = tuple[Any, Any, Any]  # userid, queryid, toplevel
# Column positions in pgstats.STATEMENTS_SQL after the key.
CALLS, TIME, ROWS, HIT, READ, WRITTEN, WAL, DIRTIED, QUERY = range(3, 12)
BUFFERS = {"hit": HIT, "read": READ, "dirtied": DIRTIED, "written": WRITTEN}


@dataclass
class StatementsProbe:
    ok: bool
    note: str = ""
    version: int = 0
    schema: str = ""
    before: dict[Key, tuple[Any, ...]] = field(default_factory=dict)
    buffers: dict[str, float] | None = None  # every statement's blocks over the run, summed

    @classmethod
    def open(
        cls,
        conn: psycopg.Connection[Any],
        settings: pgstats.ServerSettings,
        on_error: Callable[[str], None],
    ) -> StatementsProbe:
        try:
            schema = pgstats.statements_schema(conn, settings)
        except psycopg.Error as exc:
            return cls(False, f"could not look for the extension: {exc}".split("\n")[0])
        if schema is None:
            return cls(
                False,
                "not loaded (shared_preload_libraries) or extension not created in this database",
            )
        probe = cls(
            True, pgstats.statements_note(settings.version_num), settings.version_num, schema
        )
        try:
            probe.before = probe._snapshot(conn, with_text=False)
        except psycopg.Error as exc:
            on_error(f"pg_stat_statements: {str(exc).splitlines()[0]}")
            probe.ok, probe.note = False, "could not be read"
        return probe

    def _snapshot(
        self, conn: psycopg.Connection[Any], *, with_text: bool
    ) -> dict[Key, tuple[Any, ...]]:
        sql = pgstats.statements_sql(self.version, self.schema, with_text=with_text)
        rows = conn.execute(sql, (with_text,)).fetchall()
        return {(r[0], r[1], r[2]): tuple(r) for r in rows}

    def finish(self, conn: psycopg.Connection[Any]) -> tuple[Statement, ...]:
        if not self.ok:
            return ()
        try:
            after = self._snapshot(conn, with_text=True)
        except psycopg.Error:
            self.ok, self.note = False, "could not be read after the run"
            return ()
        self.buffers = buffer_totals(self.before, after)
        return top_statements(self.before, after)


def _delta(row: tuple[Any, ...], old: tuple[Any, ...] | None, i: int) -> float:
    return float(row[i] or 0) - (float(old[i] or 0) if old else 0.0)


def buffer_totals(
    before: dict[Key, tuple[Any, ...]], after: dict[Key, tuple[Any, ...]]
) -> dict[str, float]:
    """Shared blocks hit, read, dirtied and written between two snapshots, over every
    statement (top-level ones only: a nested statement's blocks are its caller's too)."""
    toplevel = [(row, before.get(key)) for key, row in after.items() if row[2] is not False]
    return {name: sum(_delta(row, old, i) for row, old in toplevel) for name, i in BUFFERS.items()}


def top_statements(
    before: dict[Key, tuple[Any, ...]], after: dict[Key, tuple[Any, ...]], top: int = TOP
) -> tuple[Statement, ...]:
    """The statements with the most execution time between two snapshots."""
    ran = [
        (_delta(row, before.get(key), TIME), row, before.get(key))
        for key, row in after.items()
        if _delta(row, before.get(key), CALLS) > 0
    ]
    ran.sort(key=lambda item: -item[0])
    return tuple(
        Statement(
            rank=rank,
            queryid=int(row[1] or 0),
            query=str(row[QUERY]),
            calls=int(_delta(row, old, CALLS)),
            total_time_ms=spent,
            rows=int(_delta(row, old, ROWS)),
            shared_blks_hit=int(_delta(row, old, HIT)),
            shared_blks_read=int(_delta(row, old, READ)),
            shared_blks_written=int(_delta(row, old, WRITTEN)),
            wal_bytes=_delta(row, old, WAL) if row[WAL] is not None else None,
        )
        for rank, (spent, row, old) in enumerate(ran[:top], start=1)
    )
