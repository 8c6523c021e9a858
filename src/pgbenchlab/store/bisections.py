"""Writing and reading performance bisections (the table of schema migration 6). A step's runs
are an ordinary campaign's; this table holds what ties the steps together."""

from __future__ import annotations

import json
import sqlite3

from pgbenchlab.store.records import BisectionRecord


def write_bisection(db: sqlite3.Connection, record: BisectionRecord) -> None:
    db.execute(
        "INSERT INTO bisections VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (name) DO UPDATE SET "
        "request_json = excluded.request_json, commits_json = excluded.commits_json, "
        "steps_json = excluded.steps_json, status = excluded.status, "
        "answer_json = excluded.answer_json, updated_at = excluded.updated_at",
        (
            record.name,
            json.dumps(record.request, sort_keys=True),
            json.dumps(list(record.commits)),
            json.dumps(list(record.steps)),
            record.status,
            None if record.answer is None else json.dumps(record.answer, sort_keys=True),
            record.started_at,
            record.updated_at,
        ),
    )


def read_bisection(db: sqlite3.Connection, name: str) -> BisectionRecord | None:
    row = db.execute("SELECT * FROM bisections WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    answer = row["answer_json"]
    return BisectionRecord(
        name=row["name"],
        request=json.loads(row["request_json"]),
        commits=tuple(json.loads(row["commits_json"])),
        steps=tuple(json.loads(row["steps_json"])),
        status=row["status"],
        answer=None if answer is None else json.loads(answer),
        started_at=row["started_at"],
        updated_at=row["updated_at"],
    )


def bisection_names(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM bisections ORDER BY started_at")]
