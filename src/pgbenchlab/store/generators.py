"""The run_generators table: each load generator's part of a run split across several (its
share, seed, clock and start, its own report's figures and CPU)."""

from __future__ import annotations

import sqlite3
from dataclasses import astuple, fields

from pgbenchlab.results import GeneratorFigures

COLUMNS = tuple(f.name for f in fields(GeneratorFigures))


def write_generators(
    db: sqlite3.Connection, run_id: int, generators: tuple[GeneratorFigures, ...]
) -> None:
    marks = ",".join("?" * (len(COLUMNS) + 1))
    db.executemany(
        f"INSERT INTO run_generators (run_id, {', '.join(COLUMNS)}) VALUES ({marks})",
        [(run_id, *astuple(g)) for g in generators],
    )


def read_generators(db: sqlite3.Connection, run_id: int) -> tuple[GeneratorFigures, ...]:
    rows = db.execute(
        f"SELECT {', '.join(COLUMNS)} FROM run_generators WHERE run_id = ? ORDER BY host",
        (run_id,),
    ).fetchall()
    return tuple(GeneratorFigures(*row) for row in rows)
