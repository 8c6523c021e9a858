"""A results database written before the store's redesign (tests/golden/results/
before-redesign.db, by make_before.py) migrates to the same schema the current code writes,
its runs have the same columns filled, and both give a report."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from pgbenchlab import exporting, plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.report import summary_text, write_report
from pgbenchlab.store import RUN_COLUMNS, Store
from support import QuietReporter, require_installs, run_errors

pytestmark = pytest.mark.server

GOLDEN = Path(__file__).parent / "golden" / "results"

Schema = dict[str, list[tuple[str, str]]]


def schema(db: sqlite3.Connection) -> Schema:
    """Every table and view with its columns' names and types."""
    names = [
        str(r[0])
        for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    return {
        name: [(str(c[1]), str(c[2])) for c in db.execute(f"PRAGMA table_info({name})")]
        for name in names
    }


GOLDEN_SCHEMA = 3  # the schema before-redesign.db was written with


def null_patterns(db: sqlite3.Connection) -> dict[str, tuple[bool, ...]]:
    """Per run key, which registry columns hold a value, of those a database of the golden's
    schema had (a column added since holds what its migration gave the old runs, if any)."""
    names = ", ".join(c.name for c in RUN_COLUMNS if c.since <= GOLDEN_SCHEMA)
    rows = db.execute(f"SELECT run_key, {names} FROM runs ORDER BY run_key").fetchall()
    return {str(r[0]): tuple(v is not None for v in r[1:]) for r in rows}


def test_a_database_written_before_the_redesign_matches_one_written_now(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    before = tmp_path / "before.db"
    shutil.copy(GOLDEN / "before-redesign.db", before)
    Store(before).close()  # migrates it
    the_plan = plan.load(GOLDEN / "tiny.toml")
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.ran == len(the_plan.specs) == 2 and outcome.failed == 0, run_errors(outcome)
    after = results_dir / RESULTS_DB

    old, new = sqlite3.connect(before), sqlite3.connect(after)
    try:
        assert schema(old) == schema(new)
        assert "axis_orders_json" in dict(schema(new)["campaigns"])
        old_patterns, new_patterns = null_patterns(old), null_patterns(new)
        assert len(old_patterns) == 2 and old_patterns == new_patterns
        orders = [
            db.execute("SELECT axis_orders_json FROM campaigns").fetchone() for db in (old, new)
        ]
        assert orders[0] == orders[1] == ('{"server": ["pg18"]}',)  # backfilled, then written
        missing = [
            db.execute("SELECT missing_shards_json FROM campaigns").fetchone() for db in (old, new)
        ]
        assert missing[0] == missing[1] == ("[]",)  # no merge lacking shards
    finally:
        old.close()
        new.close()

    for path in (before, after):
        page = write_report(path, output=path.with_suffix(".html"))
        assert isinstance(page, Path) and "tiny-store" in page.read_text()
        markdown = write_report(path, fmt="markdown")
        assert isinstance(markdown, str) and "tiny-store" in markdown
        with Store(path) as store:
            assert "pg18" in summary_text(store, 1)
            rows = exporting.run_rows(store, 1)
            assert [r["clients"] for r in rows] == [1, 2] and all(r["tps"] for r in rows)
