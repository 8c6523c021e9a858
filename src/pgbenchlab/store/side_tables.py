"""Writing and reading the small tables kept beside a campaign's runs: the pooler in front of
each server (`poolers`), the noise floors measured for it (`noise_floors`), and the plans a
campaign ran under before a later one added test sets to it (`plan_changes`: which sets were
added when, and the plan each replaced; the campaign row holds the current one); and what an
incomplete merge still lacks (`still_missing`)."""

from __future__ import annotations

import json
import sqlite3
import time

from pgbenchlab.plan import Shard, missing_shards, shard_of
from pgbenchlab.redaction import redact_settings
from pgbenchlab.server.pooler import PoolerFacts
from pgbenchlab.store.backfills import axis_orders_json
from pgbenchlab.store.records import JoinedSets, NoiseFloor, PlanChange


def write_pooler(db: sqlite3.Connection, campaign_id: int, facts: PoolerFacts) -> None:
    """The pooler in front of a server: its version and settings (as server settings are:
    masked where a secret could be)."""
    db.execute(
        "INSERT OR REPLACE INTO poolers VALUES (?,?,?,?,?,?,?)",
        (
            campaign_id,
            facts.server,
            facts.kind,
            facts.version,
            json.dumps(redact_settings(facts.settings), sort_keys=True),
            facts.binary,
            time.time(),
        ),
    )


def read_poolers(db: sqlite3.Connection, campaign_id: int) -> dict[str, PoolerFacts]:
    rows = db.execute(
        "SELECT server, kind, version, settings_json, binary FROM poolers "
        "WHERE campaign_id = ? ORDER BY server",
        (campaign_id,),
    )
    return {
        str(r[0]): PoolerFacts(str(r[0]), str(r[1]), str(r[2]), json.loads(r[3]), str(r[4]))
        for r in rows
    }


def write_noise_floor(db: sqlite3.Connection, campaign_id: int, floor: NoiseFloor) -> None:
    db.execute(
        "INSERT INTO noise_floors (campaign_id, server, metric, kind, spread, evidence, cell) "
        "VALUES (?,?,?,?,?,?,?)",
        (
            campaign_id, floor.server, floor.metric, floor.kind, floor.spread, floor.evidence,
            floor.cell,
        ),
    )  # fmt: skip


def forget_noise_floors(db: sqlite3.Connection, campaign_id: int) -> None:
    """The campaign's floors removed, to be measured anew (a resumed campaign has more runs)."""
    db.execute("DELETE FROM noise_floors WHERE campaign_id = ?", (campaign_id,))


def read_noise_floors(db: sqlite3.Connection, campaign_id: int) -> tuple[NoiseFloor, ...]:
    rows = db.execute(
        "SELECT metric, kind, spread, server, evidence, cell FROM noise_floors "
        "WHERE campaign_id = ? ORDER BY metric, kind, server, cell",
        (campaign_id,),
    ).fetchall()
    return tuple(
        NoiseFloor(str(m), str(k), float(s), str(v), str(e), str(c)) for m, k, s, v, e, c in rows
    )


def write_plan_change(db: sqlite3.Connection, campaign_id: int, joined: JoinedSets) -> None:
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


def read_plan_changes(db: sqlite3.Connection, campaign_id: int) -> tuple[PlanChange, ...]:
    rows = db.execute(
        "SELECT changed_at, added_json, plan_text, plan_digest FROM plan_changes "
        "WHERE campaign_id = ? ORDER BY changed_at",
        (campaign_id,),
    ).fetchall()
    return tuple(
        PlanChange(float(at), tuple(json.loads(added)), str(text), str(digest))
        for at, added, text, digest in rows
    )


def still_missing(db: sqlite3.Connection, campaign_id: int, ran: str) -> list[str]:
    """What an incomplete merge still lacks once a call ran the part `ran` of its plan whole
    ("K/N", "1/1" the whole plan; "" none): no shard once a run was made unsharded (a resume
    runs all the plan's runs not stored), else those of its runs' partition absent; and the
    test sets a merge of a grown plan lacked ("2/2 of test set(s) fast") but in `ran`."""
    row = db.execute(
        "SELECT missing_shards_json FROM campaigns WHERE id = ?", (campaign_id,)
    ).fetchone()
    stored: list[str] = json.loads(row[0]) if row else []
    if not stored or ran == "1/1":
        return []
    found = db.execute(
        "SELECT DISTINCT o.shard FROM runs r LEFT JOIN run_origins o ON o.run_id = r.id "
        "WHERE r.campaign_id = ?",
        (campaign_id,),
    )
    shards = {Shard(1, 1) if text is None else shard_of(str(text)) for (text,) in found}
    if Shard(1, 1) in shards:
        return []
    if None in shards or len({s.count for s in shards if s}) != 1:
        return stored  # not one partition: left as the merge found it
    sets = [m for m in stored if " of test set" in m and not (ran and m.startswith(f"{ran} "))]
    return [str(s) for s in missing_shards({s for s in shards if s})] + sets
