"""A campaign's plan history: test sets (servers) joined a campaign by a later plan, each change
kept with the plan it replaced (`plan_changes`), so the campaign says which sets were added
when and its earlier plans stay readable."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgbenchlab.store.backfills import axis_orders_json


@dataclass(frozen=True)
class JoinedSets:
    """The test sets a plan adds to a campaign, and what of the new plan the campaign keeps
    beside its text: its files' digests and its axes' orders."""

    added: tuple[str, ...]
    files: Mapping[str, str]
    axis_orders: Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class PlanChange:
    """One change of a campaign's plan: when, the test sets it added, and the plan before."""

    changed_at: float
    added: tuple[str, ...]
    plan_text: str
    plan_digest: str


def record(db: sqlite3.Connection, campaign_id: int, joined: JoinedSets) -> None:
    """The plan the campaign ran under until now kept as its history, with the sets added;
    the campaign's files and axis orders become the new plan's (its text: the caller's)."""
    db.execute(
        "INSERT INTO plan_changes (campaign_id, changed_at, added_json, plan_text, plan_digest, "
        "files_json) SELECT id, ?, ?, plan_text, plan_digest, files_json FROM campaigns "
        "WHERE id = ?",
        (time.time(), json.dumps(list(joined.added)), campaign_id),
    )
    db.execute(
        "UPDATE campaigns SET files_json = ?, axis_orders_json = ? WHERE id = ?",
        (
            json.dumps(dict(joined.files), sort_keys=True),
            axis_orders_json(joined.axis_orders),
            campaign_id,
        ),
    )


def read(db: sqlite3.Connection, campaign_id: int) -> tuple[PlanChange, ...]:
    rows = db.execute(
        "SELECT changed_at, added_json, plan_text, plan_digest FROM plan_changes "
        "WHERE campaign_id = ? ORDER BY changed_at",
        (campaign_id,),
    ).fetchall()
    return tuple(
        PlanChange(float(at), tuple(json.loads(added)), str(text), str(digest))
        for at, added, text, digest in rows
    )
