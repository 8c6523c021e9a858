"""Writing and reading followed branches (the table of schema migration 27): one row per commit
`follow` selected. A commit's runs are an ordinary campaign's (its `campaign`); this table holds
what the commit is and what became of it. And the metrics a follow follows beyond the defaults
(migration 35)."""

from __future__ import annotations

import sqlite3
from dataclasses import astuple, fields

from pgbenchlab.store.records import FollowCommit

COLUMNS = tuple(f.name for f in fields(FollowCommit))


def write_follow_commit(db: sqlite3.Connection, record: FollowCommit) -> None:
    kept = [c for c in COLUMNS if c not in ("follow", "commit_hash")]
    db.execute(
        f"INSERT INTO follow_commits ({', '.join(COLUMNS)}) VALUES "
        f"({', '.join('?' for _ in COLUMNS)}) ON CONFLICT (follow, commit_hash) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in kept),
        astuple(record),
    )


def read_follow_commits(db: sqlite3.Connection, follow: str) -> tuple[FollowCommit, ...]:
    """The follow's commits along the branch, oldest first."""
    rows = db.execute(
        f"SELECT {', '.join(COLUMNS)} FROM follow_commits WHERE follow = ? ORDER BY position",
        (follow,),
    )
    return tuple(FollowCommit(*row) for row in rows)


def follow_names(db: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in db.execute(
            "SELECT follow FROM follow_commits GROUP BY follow ORDER BY min(measured_at)"
        )
    ]


def add_follow_metrics(db: sqlite3.Connection, follow: str, metrics: tuple[str, ...]) -> None:
    db.executemany(
        "INSERT OR IGNORE INTO follow_metrics (follow, metric) VALUES (?, ?)",
        [(follow, m) for m in metrics],
    )


def read_follow_metrics(db: sqlite3.Connection, follow: str) -> tuple[str, ...]:
    rows = db.execute(
        "SELECT metric FROM follow_metrics WHERE follow = ? ORDER BY rowid", (follow,)
    )
    return tuple(r[0] for r in rows)
