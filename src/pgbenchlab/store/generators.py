"""The run_generators table: each load generator's part of a run split across several (its
share, seed, clock and start, its own report's figures and CPU); the run_servers table: each
member server's part of a group's run, its diagnosis's evidence as a JSON list, its costs, the
diagnosis' details and the member's run it judged (`ObservedRun`) as JSON objects."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import astuple, fields

from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.records.costs import RunCosts
from pgbenchlab.records.observed import ObservedRun
from pgbenchlab.results import GeneratorFigures, ServerPart

COLUMNS = tuple(f.name for f in fields(GeneratorFigures))
PART_FIELDS = tuple(f.name for f in fields(ServerPart))
PART_JSON = ("evidence", "costs", "details", "observed")  # stored as JSON in NAME_json
PART_COLUMNS = tuple(f"{f}_json" if f in PART_JSON else f for f in PART_FIELDS)


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


def write_server_parts(db: sqlite3.Connection, run_id: int, parts: tuple[ServerPart, ...]) -> None:
    marks = ",".join("?" * (len(PART_COLUMNS) + 1))
    db.executemany(
        f"INSERT INTO run_servers (run_id, {', '.join(PART_COLUMNS)}) VALUES ({marks})",
        [(run_id, *_part_row(p)) for p in parts],
    )


def read_server_parts(db: sqlite3.Connection, run_id: int) -> tuple[ServerPart, ...]:
    rows = db.execute(
        f"SELECT {', '.join(PART_COLUMNS)} FROM run_servers WHERE run_id = ? ORDER BY rowid",
        (run_id,),
    ).fetchall()
    return tuple(_part(row) for row in rows)


def _part_row(part: ServerPart) -> tuple[object, ...]:
    plain = {
        "evidence": list(part.evidence),
        "costs": None if part.costs is None else part.costs.stored(),
        "details": dict(part.details),
        "observed": None if part.observed is None else part.observed.stored(),
    }
    found = {k: None if v is None else json.dumps(v, sort_keys=True) for k, v in plain.items()}
    return tuple(found[f] if f in found else getattr(part, f) for f in PART_FIELDS)


def _part(row: tuple[object, ...]) -> ServerPart:
    values = dict(zip(PART_FIELDS, row, strict=True))
    values["evidence"] = tuple(json.loads(str(values["evidence"])))
    values["details"] = json.loads(str(values["details"]))
    if values["costs"] is not None:
        values["costs"] = RunCosts.from_stored(json.loads(str(values["costs"])))
    if values["observed"] is not None:
        values["observed"] = ObservedRun.from_stored(json.loads(str(values["observed"])))
    if values["verdict"] is not None:
        values["verdict"] = Bottleneck(str(values["verdict"]))
    return ServerPart(**values)  # type: ignore[arg-type]
