"""The registry of run columns is the `runs` table a migrated database has; the axis orders of
schema 4 are written with a campaign and backfilled for older ones from their plan text."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields, replace
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.redaction import redact_plan_text
from pgbenchlab.report.render.payload import COLUMNS
from pgbenchlab.report.views import load
from pgbenchlab.report.views.model import RunView
from pgbenchlab.store import MIGRATIONS, RUN_COLUMNS, SCHEMA_VERSION, JoinedSets, Store
from pgbenchlab.store.columns import COLUMN, KEY_COLUMNS, added_columns_sql

PLAN = """
[campaign]
name = "ordered"
[[server]]
name = "pg16"
setting = { work_mem = ["64MB", "4MB"], primary_conninfo = ["host=h password=hunter2"] }
[[server]]
name = "pg14"
[matrix]
clients = [1]
"""


def older_database(path: Path, version: int) -> None:
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, version + 1)))
    db.execute(f"PRAGMA user_version = {version}")
    db.close()


def test_the_registry_is_the_runs_table_of_a_migrated_database(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    older_database(path, 1)
    with Store(path) as store:
        table = store.db.execute("PRAGMA table_info(runs)").fetchall()
    stored = [(r["name"], r["type"], bool(r["notnull"])) for r in table]
    described = [*KEY_COLUMNS, *((c.name, c.sql_type, c.required) for c in RUN_COLUMNS)]
    assert stored == described


def test_new_columns_come_from_the_registry(tmp_path: Path) -> None:
    # Schema 10 added the connection's columns; no other migration after 1 added one.
    assert all(added_columns_sql(v) == "" for v in range(2, 10))
    assert added_columns_sql(10) == (
        "ALTER TABLE runs ADD COLUMN connection TEXT;\n"
        "ALTER TABLE runs ADD COLUMN tls_protocol TEXT;\n"
        "ALTER TABLE runs ADD COLUMN tls_cipher TEXT;\n"
    )
    later = replace(COLUMN["tps"], name="tps_median", since=SCHEMA_VERSION + 1)
    sql = added_columns_sql(SCHEMA_VERSION + 1, (*RUN_COLUMNS, later))
    assert sql == "ALTER TABLE runs ADD COLUMN tps_median REAL;\n"
    with Store(tmp_path / "results.db") as store:
        store.db.executescript(sql)
        names = [r["name"] for r in store.db.execute("PRAGMA table_info(runs)")]
    assert names[-1] == "tps_median"
    with pytest.raises(ValueError, match="NOT NULL"):
        added_columns_sql(9, (replace(COLUMN["run_key"], since=9),))


def test_every_registry_column_reaches_the_run_view_and_the_payload() -> None:
    view_fields = {f.name for f in fields(RunView)}
    assert {c.key for c in RUN_COLUMNS} - view_fields - load.DERIVED <= {
        "spec",  # as the view's options
        "server_settings",  # in the server label
        "sysctl",  # in the server label
        "report",  # as late and skipped shares, retries
        "warnings",  # as stored_warnings
        "artifacts",
        "result_schema",
    }
    assert all(c.doc and c.sql_type in ("INTEGER", "REAL", "TEXT") for c in RUN_COLUMNS)
    described = {c.key: c.help for c in COLUMNS if c.key in COLUMN}
    own_help = {key for key, text in described.items() if text != COLUMN[key].doc}
    assert len(described) > 30 and own_help == {"server", "connect", "cell_id"}


def test_axis_orders_are_stored_with_a_new_campaign(tmp_path: Path) -> None:
    the_plan = plan.parse(PLAN, str(tmp_path / "ordered.toml"), base=tmp_path)
    assert the_plan.axis_orders == {
        "server": ["pg16", "pg14"],
        "primary_conninfo": ["host=h password=hunter2"],
        "work_mem": ["64MB", "4MB"],
    }
    with Store(tmp_path / "results.db") as store:
        campaign_id = store.start_campaign(
            "ordered", "p.toml", the_plan.stored_text, "d", {"pgbenchlab": "x"}, {},
            axis_orders=the_plan.axis_orders,
        )  # fmt: skip
        record = store.campaign_record(campaign_id)
    assert record is not None
    assert record.axis_orders["server"] == ("pg16", "pg14")
    assert record.axis_orders["work_mem"] == ("64MB", "4MB")
    assert "hunter2" not in json.dumps(record.axis_orders)  # masked as the servers table is


@pytest.mark.parametrize("version", [1, 3])
def test_older_databases_get_their_axis_orders_from_the_stored_plan(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "results.db"
    older_database(path, version)
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO campaigns (name, plan_path, plan_text, plan_digest, started_at, "
        "pgbenchlab_version) VALUES (?, 'p.toml', ?, 'd', 0, 'x')",
        [("ordered", redact_plan_text(PLAN)), ("broken", "not = [toml")],
    )
    db.commit()
    db.close()
    with Store(path) as store:
        ordered, broken = store.find_campaign("ordered"), store.find_campaign("broken")
        version_now = store.db.execute("PRAGMA user_version").fetchone()[0]
    assert version_now == SCHEMA_VERSION
    assert ordered is not None and broken is not None
    assert ordered.axis_orders["server"] == ("pg16", "pg14")
    assert ordered.axis_orders["work_mem"] == ("64MB", "4MB")
    assert broken.axis_orders == {}


def test_schema_28_records_the_files_an_import_read(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    older_database(path, 27)
    with Store(path) as store:
        columns = [r["name"] for r in store.db.execute("PRAGMA table_info(imported_files)")]
        assert store.imported_files(1) == ()  # campaigns run here read no file
    assert columns == ["campaign_id", "path", "sha256", "size", "role", "run_id", "note"]


def test_schema_32_keeps_the_plans_a_campaign_replaced_to_add_test_sets(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    older_database(path, 31)
    with Store(path) as store:
        columns = [r["name"] for r in store.db.execute("PRAGMA table_info(plan_changes)")]
        assert store.plan_changes(1) == ()  # a campaign run under one plan
        campaign = store.start_campaign("c", "p.toml", "old plan", "d1", {"pgbenchlab": "0"}, {})
        joined = JoinedSets(("b",), {"s.sql": "abc"}, {"server": ["a", "b"]})
        store.replace_plan(campaign, "new plan", "d2", joined)
        (change,) = store.plan_changes(campaign)
        record = store.find_campaign("c")
    assert columns == [
        "campaign_id", "changed_at", "added_json", "plan_text", "plan_digest", "files_json"
    ]  # fmt: skip
    assert (change.added, change.plan_text, change.plan_digest) == (("b",), "old plan", "d1")
    assert record is not None and (record.plan_text, record.plan_digest) == ("new plan", "d2")
    assert record.files == {"s.sql": "abc"} and record.axis_orders["server"] == ("a", "b")
