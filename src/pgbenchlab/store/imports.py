"""Imported campaigns (`pgbenchlab import`): the campaign row, marked with the status
`imported`, and the files it was read from (`imported_files`: path, SHA-256, role, the run a file
gave, why a file was not read). Called inside `Store.record_import`'s transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pgbenchlab import __version__
from pgbenchlab.results import CampaignStatus
from pgbenchlab.store.backfills import axis_orders_json
from pgbenchlab.store.faults import GuardedConnection
from pgbenchlab.store.records import ImportedCampaign, ImportedFile


def insert_campaign(db: GuardedConnection, found: ImportedCampaign) -> int:
    servers = sorted({s.facts.name for s in found.servers})
    cursor = db.execute(
        "INSERT INTO campaigns (name, plan_path, plan_text, plan_digest, started_at, "
        "finished_at, status, pgbenchlab_version, pgbench_version, description, files_json, "
        "axis_orders_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            found.name,
            found.source,
            found.plan_text,
            found.digest,
            found.started_at,
            found.finished_at,
            CampaignStatus.IMPORTED,
            __version__,
            found.pgbench_version,
            found.description,
            json.dumps({f.path: f.sha256 for f in found.files}, sort_keys=True),
            axis_orders_json({"server": servers}),
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def insert_files(
    db: GuardedConnection, campaign_id: int, files: Sequence[ImportedFile], run_ids: Sequence[int]
) -> None:
    db.executemany(
        "INSERT INTO imported_files (campaign_id, path, sha256, size, role, run_id, note) "
        "VALUES (?,?,?,?,?,?,?)",
        [
            (
                campaign_id,
                f.path,
                f.sha256,
                f.size,
                f.role,
                None if f.run is None else run_ids[f.run],
                f.note,
            )
            for f in files
        ],
    )


def read_files(db: GuardedConnection, campaign_id: int) -> tuple[ImportedFile, ...]:
    """The files an imported campaign was read from, in path order (none for a campaign run
    here); `run` is the stored run's id."""
    rows = db.execute(
        "SELECT path, sha256, size, role, run_id, note FROM imported_files "
        "WHERE campaign_id = ? ORDER BY path",
        (campaign_id,),
    ).fetchall()
    return tuple(
        ImportedFile(str(p), str(d), int(n), str(r), None if i is None else int(i), str(t))
        for p, d, n, r, i, t in rows
    )


def campaign_of_digest(db: GuardedConnection, digest: str) -> str | None:
    """The name of the imported campaign of that digest (the same files, the same pattern)."""
    row = db.execute(
        "SELECT name FROM campaigns WHERE status = ? AND plan_digest = ? ORDER BY id LIMIT 1",
        (CampaignStatus.IMPORTED, digest),
    ).fetchone()
    return None if row is None else str(row[0])
