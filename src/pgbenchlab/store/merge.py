"""Results databases joined into a new one (`pgbenchlab merge`): what each holds (`inspect`,
read-only) and the copy (`write`). Which sets of campaigns may be joined is the caller's
decision (`campaign.fleet`); here, campaigns of one name given in `joined` become one campaign,
every other campaign is copied as it is, and every row of every table follows its campaign or
run under their new ids, the inputs' order kept (so the latest attempt of a run stays the
latest).

Every table of the schema is named in `TABLES` with how its rows are carried, and a table the
merge does not know stops it: a table added by a later migration can never be dropped silently
(tests/test_merge.py checks `TABLES` against a new database's tables).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pgbenchlab.errors import StoreError
from pgbenchlab.results import CampaignStatus
from pgbenchlab.store.database import Store
from pgbenchlab.store.faults import BUSY_TIMEOUT_S, GuardedConnection
from pgbenchlab.store.records import campaign_artifacts


class Carry(StrEnum):
    """How a table's rows reach the merged database."""

    CAMPAIGNS = "campaigns"  # one row per campaign; the joined ones become one (`write`)
    RUNS = "runs"  # every run, its id moved past the runs already there
    ROWS = "rows"  # every row, its run_id and campaign_id following their new ids
    FIRST = "first"  # one row per key within a campaign (a server's facts): the first input's
    # (the merge refuses shards whose servers ran different versions)
    BY_NAME = "by name"  # keyed by a name of their own: one copy (inputs must agree on it)


TABLES: dict[str, Carry] = {
    "campaigns": Carry.CAMPAIGNS,
    "runs": Carry.RUNS,
    "servers": Carry.FIRST,
    "server_facts": Carry.FIRST,
    "poolers": Carry.FIRST,
    "datasets": Carry.ROWS,
    "run_seconds": Carry.ROWS,
    "run_histograms": Carry.ROWS,
    "run_telemetry": Carry.ROWS,
    "run_telemetry_sources": Carry.ROWS,
    "run_telemetry_seconds": Carry.ROWS,
    "run_telemetry_totals": Carry.ROWS,
    "run_wait_events": Carry.ROWS,
    "run_events": Carry.ROWS,
    "run_statements": Carry.ROWS,
    "run_diagnosis": Carry.ROWS,
    "run_sysctl": Carry.ROWS,
    "capacity_probes": Carry.ROWS,
    "run_affinity": Carry.ROWS,
    "run_hosts": Carry.ROWS,
    "run_profiles": Carry.ROWS,
    "run_origins": Carry.ROWS,
    "run_generators": Carry.ROWS,
    "pgbench_profiles": Carry.ROWS,
    "run_servers": Carry.ROWS,
    "noise_floors": Carry.ROWS,
    "imported_files": Carry.ROWS,
    "server_tablespaces": Carry.FIRST,
    "server_preparations": Carry.ROWS,
    "plan_changes": Carry.ROWS,
    "bisections": Carry.BY_NAME,
    "follow_commits": Carry.BY_NAME,
    "follow_metrics": Carry.BY_NAME,
}
# each BY_NAME table's key (its columns)
NAME_KEYS = {
    "bisections": ("name",),
    "follow_commits": ("follow", "commit_hash"),
    "follow_metrics": ("follow", "metric"),
}


@dataclass(frozen=True)
class SourceCampaign:
    """A campaign of an input: its stored row, whether it is the latest of its name there, the
    run keys of its runs (every attempt), its servers and the shards its runs were made in."""

    row: Mapping[str, Any]
    latest: bool
    run_keys: frozenset[str]
    server_versions: Mapping[str, str]  # each server's label (name and variant) → its version
    server_names: frozenset[str] = frozenset()  # of its servers and runs
    shards: frozenset[str | None] = frozenset()  # "K/N"; None: a run made unsharded

    @property
    def id(self) -> int:
        return int(self.row["id"])

    @property
    def name(self) -> str:
        return str(self.row["name"])


@dataclass(frozen=True)
class Source:
    """One input database: its schema version, campaigns and named rows (bisections)."""

    path: Path
    schema: int
    campaigns: tuple[SourceCampaign, ...]
    named: Mapping[tuple[str, str], tuple[Any, ...]]  # (table, key) → the row


@dataclass(frozen=True)
class Joined:
    """The latest campaigns of one name in the inputs, to become one campaign, and the shards
    of its plan that none of them holds ("2/3"): a merge that lacks points."""

    parts: tuple[SourceCampaign, ...]
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Moved:
    """Where a campaign of an input went: its name and its id there and here."""

    source: Path
    name: str
    old_id: int
    new_id: int

    @property
    def old_artifacts(self) -> Path | None:
        """None where the stored name (or a link) would lead out of the input."""
        return campaign_artifacts(self.source.parent, self.name, self.old_id)

    def new_artifacts(self, results_dir: Path) -> Path | None:
        return campaign_artifacts(results_dir, self.name, self.new_id)


def read_only(path: Path) -> GuardedConnection:
    """An existing database opened read-only (nothing of it is ever written)."""
    if not path.is_file():
        raise StoreError(f"no results database at {path}: give results directories or files")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, factory=GuardedConnection)
    assert isinstance(db, GuardedConnection)
    db.row_factory = sqlite3.Row
    return db


def inspect(path: Path) -> Source:
    """What an input holds, read in one snapshot."""
    db = read_only(path)
    try:
        db.execute("BEGIN")
        schema = int(db.execute("PRAGMA user_version").fetchone()[0])
        if schema == 0:
            raise StoreError(f"{path} is not a pgbenchlab results database")
        rows = db.execute("SELECT * FROM campaigns ORDER BY id").fetchall()
        latest = {str(r["name"]): int(r["id"]) for r in rows}
        keys: dict[int, set[str]] = {int(r["id"]): set() for r in rows}
        names: dict[int, set[str]] = {int(r["id"]): set() for r in rows}
        shards: dict[int, set[str | None]] = {int(r["id"]): set() for r in rows}
        runs = (
            "SELECT r.campaign_id, r.run_key, r.server, o.shard FROM runs r "
            "LEFT JOIN run_origins o ON o.run_id = r.id"
        )
        for campaign_id, run_key, server, shard in db.execute(runs):
            keys[int(campaign_id)].add(str(run_key))
            names[int(campaign_id)].add(str(server))
            shards[int(campaign_id)].add(None if shard is None else str(shard))
        versions: dict[int, dict[str, str]] = {int(r["id"]): {} for r in rows}
        servers = "SELECT campaign_id, name, variant_json, version FROM servers"
        for campaign_id, name, variant, version in db.execute(servers):
            label = name if variant == "{}" else f"{name} {variant}"
            versions[int(campaign_id)][str(label)] = str(version)
            names[int(campaign_id)].add(str(name))
        campaigns = tuple(
            SourceCampaign(
                dict(r),
                latest[r["name"]] == r["id"],
                frozenset(keys[int(r["id"])]),
                versions[int(r["id"])],
                frozenset(names[int(r["id"])]),
                frozenset(shards[int(r["id"])]),
            )
            for r in rows
        )
        named = {
            (table, " ".join(str(row[k]) for k in key)): tuple(row)
            for table, key in NAME_KEYS.items()
            if _has_table(db, table)
            for row in db.execute(f"SELECT * FROM {table}")
        }
        db.execute("COMMIT")
        return Source(path, schema, campaigns, named)
    finally:
        db.close()


def _has_table(db: sqlite3.Connection, table: str) -> bool:
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return found.fetchone() is not None


def schema_tables(db: sqlite3.Connection, schema: str = "main") -> list[str]:
    """The tables of a database (not its views, indexes or SQLite's own)."""
    rows = db.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    return [str(r[0]) for r in rows]


def write(out: Path, sources: Sequence[Source], joined: Mapping[str, Joined]) -> list[Moved]:
    """Create the database at out (a new file) from the sources: the campaigns in ``joined``
    (by name: the latest campaign of that name in each source holding it) as one each, after
    every other campaign; where each source campaign went."""
    Store(out).close()  # the current schema
    db = sqlite3.connect(out, uri=True, isolation_level=None, factory=GuardedConnection)
    assert isinstance(db, GuardedConnection)
    try:
        unknown = sorted(set(schema_tables(db)) - TABLES.keys())
        if unknown:  # a table added without saying how it is merged: a bug, never data lost
            raise RuntimeError(f"the merge does not know the tables {unknown}: add them to TABLES")
        ids = _write_campaigns(db, sources, joined)
        for source in sources:
            _write_rows(db, source, ids)
        return [
            Moved(s.path, c.name, c.id, ids[(s.path, c.id)]) for s in sources for c in s.campaigns
        ]
    finally:
        db.close()


def _write_campaigns(
    db: sqlite3.Connection, sources: Sequence[Source], joined: Mapping[str, Joined]
) -> dict[tuple[Path, int], int]:
    """Each source campaign's new id; the joined campaigns last, so they stay their name's
    latest."""
    ids: dict[tuple[Path, int], int] = {}
    with _transaction(db):
        for source in sources:
            for campaign in source.campaigns:
                if not (campaign.latest and campaign.name in joined):
                    ids[(source.path, campaign.id)] = _insert_campaign(db, campaign.row)
        for name, parts in joined.items():
            new_id = _insert_campaign(db, joined_row(parts))
            for source in sources:
                for campaign in source.campaigns:
                    if campaign.latest and campaign.name == name:
                        ids[(source.path, campaign.id)] = new_id
    return ids


def joined_row(joined: Joined) -> dict[str, Any]:
    """The campaign the parts make together: the first part's row, from the earliest start to
    the latest end (none while a part has not ended), the shards it lacks, and a status every
    part shares or, else, the one that asks for attention first; incomplete when shards are
    missing (a part's own "incomplete" is decided again here)."""
    rows = [p.row for p in joined.parts]
    ends = [r["finished_at"] for r in rows]
    statuses = {str(r["status"]) for r in rows} - {CampaignStatus.INCOMPLETE}
    statuses = (statuses or {CampaignStatus.FINISHED}) | (
        {CampaignStatus.INCOMPLETE} if joined.missing else set()
    )
    attention = [
        CampaignStatus.RUNNING,
        CampaignStatus.STOPPED,
        CampaignStatus.INTERRUPTED,
        CampaignStatus.INCOMPLETE,
    ]
    status = next((s for s in attention if s in statuses), CampaignStatus.FINISHED)
    return {
        **rows[0],
        "started_at": min(r["started_at"] for r in rows),
        "finished_at": None if None in ends else max(ends),
        "status": status if len(statuses) > 1 else next(iter(statuses)),
        "missing_shards_json": json.dumps(list(joined.missing)),
    }


def _insert_campaign(db: sqlite3.Connection, row: Mapping[str, Any]) -> int:
    columns = [c for c in row if c != "id"]
    cursor = db.execute(
        f"INSERT INTO campaigns ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        [row[c] for c in columns],
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _write_rows(
    db: sqlite3.Connection, source: Source, ids: Mapping[tuple[Path, int], int]
) -> None:
    """Every row of one source's tables, under the new campaign and run ids."""
    uri = f"file:{quote(str(source.path.resolve()))}?mode=ro"
    db.execute("ATTACH DATABASE ? AS source", (uri,))
    try:
        with _transaction(db):
            db.execute("CREATE TEMP TABLE campaign_ids (old INTEGER PRIMARY KEY, new INTEGER)")
            db.executemany(
                "INSERT INTO temp.campaign_ids VALUES (?, ?)",
                [(c.id, ids[(source.path, c.id)]) for c in source.campaigns],
            )
            offset = int(db.execute("SELECT coalesce(max(id), 0) FROM main.runs").fetchone()[0])
            for table, carry in TABLES.items():
                if carry != Carry.CAMPAIGNS:
                    _copy_table(db, table, carry, offset)
            _fill_origins(db, offset)
            db.execute("DROP TABLE temp.campaign_ids")
    finally:
        db.execute("DETACH DATABASE source")


def _copy_table(db: sqlite3.Connection, table: str, carry: Carry, offset: int) -> None:
    columns = [str(r[1]) for r in db.execute(f"PRAGMA main.table_info({table})")]
    if carry != Carry.RUNS:
        columns = [c for c in columns if c != "id"]  # row ids of their own, referenced nowhere
    moved = {
        "id": f"id + {offset}",
        "run_id": f"run_id + {offset}",
        "campaign_id": "(SELECT new FROM temp.campaign_ids WHERE old = campaign_id)",
    }
    values = ", ".join(moved.get(c, c) for c in columns)
    verb = "INSERT OR IGNORE" if carry in (Carry.FIRST, Carry.BY_NAME) else "INSERT"
    order = " ORDER BY id" if carry == Carry.RUNS else ""  # attempts keep their order
    db.execute(
        f"{verb} INTO main.{table} ({', '.join(columns)}) "
        f"SELECT {values} FROM source.{table}{order}"
    )


def _fill_origins(db: sqlite3.Connection, offset: int) -> None:
    """Runs stored before origins were: made on their campaign's machine, unsharded."""
    db.execute(
        "INSERT INTO main.run_origins (run_id, machine, shard) "
        f"SELECT r.id + {offset}, coalesce(json_extract(c.machine_json, '$.hostname'), "
        "'unknown'), NULL FROM source.runs r JOIN source.campaigns c ON c.id = r.campaign_id "
        "WHERE r.id NOT IN (SELECT run_id FROM source.run_origins)"
    )


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def differing_named(sources: Sequence[Source]) -> list[str]:
    """Named rows (bisections) two sources hold differently: "table name"."""
    seen: dict[tuple[str, str], tuple[Any, ...]] = {}
    differ = []
    for source in sources:
        for key, row in source.named.items():
            if seen.setdefault(key, row) != row:
                differ.append(f"{key[0][:-1]} {key[1]}")
    return sorted(set(differ))


def stored_files(row: Mapping[str, Any]) -> dict[str, str]:
    """A campaign row's files and their digests (part of its plan's identity)."""
    return dict(json.loads(row["files_json"] or "{}"))
