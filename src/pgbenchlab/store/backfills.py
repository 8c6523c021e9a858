"""The Python steps some migrations of `store.schema` need: older campaigns get what their
stored plan gave."""

from __future__ import annotations

import json
import sqlite3
import tomllib
from collections.abc import Callable, Mapping, Sequence

from pgbenchlab.plan import planned_axis_orders
from pgbenchlab.redaction import redact_setting

# Steps a migration needs beyond SQL: older campaigns get what their stored plan gave.
BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {}


def _fill_descriptions(db: sqlite3.Connection) -> None:
    for campaign_id, text in db.execute("SELECT id, plan_text FROM campaigns").fetchall():
        try:
            description = tomllib.loads(text).get("campaign", {}).get("description", "")
        except tomllib.TOMLDecodeError:
            continue
        if isinstance(description, str) and description:
            db.execute(
                "UPDATE campaigns SET description = ? WHERE id = ?", (description, campaign_id)
            )


def axis_orders_json(orders: Mapping[str, Sequence[str]]) -> str:
    """The axis orders as stored: setting values masked as the servers table masks them, so
    that they match the recorded variants."""
    masked = {
        axis: [v if axis == "server" else redact_setting(axis, v) for v in values]
        for axis, values in orders.items()
    }
    return json.dumps(masked)


def _fill_axis_orders(db: sqlite3.Connection) -> None:
    for campaign_id, text in db.execute("SELECT id, plan_text FROM campaigns").fetchall():
        db.execute(
            "UPDATE campaigns SET axis_orders_json = ? WHERE id = ?",
            (axis_orders_json(planned_axis_orders(text)), campaign_id),
        )


def _fill_sysctl(db: sqlite3.Connection) -> None:
    """Each run's kernel tunables from its stored cell; a server record per variant with them;
    the axis orders again, now with the tunables' values in plan order."""
    rows = db.execute("SELECT id, spec_json FROM runs").fetchall()
    db.executemany(
        "UPDATE runs SET sysctl_json = ? WHERE id = ?",
        [(json.dumps(json.loads(spec).get("sysctl", {}), sort_keys=True), i) for i, spec in rows],
    )
    _split_servers_by_tunables(db)
    _fill_axis_orders(db)


_SERVER_FACTS = (
    "kind, version, version_num, install, data_dir, settings_json, requested_json, "
    "recorded_at, build_key, build_json"
)
_RUNS_OF_RECORD = (
    "SELECT 1 FROM runs r WHERE r.campaign_id = servers.campaign_id AND r.server = servers.name "
    "AND r.server_settings_json = servers.variant_json AND r.sysctl_json"
)


def _split_servers_by_tunables(db: sqlite3.Connection) -> None:
    """A server's variant recorded without the kernel tunables of its runs: one record per
    variant they ran with (in run order), in place of the one without."""
    variants = db.execute(
        "SELECT campaign_id, server, server_settings_json, sysctl_json FROM runs "
        "WHERE sysctl_json != '{}' GROUP BY campaign_id, server, server_settings_json, "
        "sysctl_json ORDER BY campaign_id, MIN(sequence)"
    ).fetchall()
    for campaign_id, name, settings, sysctl in variants:
        variant = json.dumps(json.loads(settings) | json.loads(sysctl), sort_keys=True)
        db.execute(
            f"INSERT OR IGNORE INTO servers (campaign_id, name, variant_json, {_SERVER_FACTS}) "
            f"SELECT campaign_id, name, ?, {_SERVER_FACTS} FROM servers "
            "WHERE campaign_id = ? AND name = ? AND variant_json = ?",
            (variant, campaign_id, name, settings),
        )
    db.execute(
        f"DELETE FROM servers WHERE EXISTS ({_RUNS_OF_RECORD} != '{{}}') "
        f"AND NOT EXISTS ({_RUNS_OF_RECORD} = '{{}}')"
    )


BACKFILLS[3] = _fill_descriptions
BACKFILLS[4] = _fill_axis_orders
BACKFILLS[13] = _fill_sysctl
