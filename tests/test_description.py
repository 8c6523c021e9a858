"""The campaign's description: validated in the plan, stored with the campaign (and filled in for
databases written before it was stored), shown atop the report and in `campaigns`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cli_process import run_cli
from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab import plan
from pgbenchlab.errors import PlanError
from pgbenchlab.report import write_report
from pgbenchlab.report.render import markdown
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import MIGRATIONS, Store

ABOUT = "Checkpoint tuning <b>before</b> & after"
PLAN = f"""
[campaign]
name = "about"
description = "{ABOUT}"
[[server]]
name = "pg"
install = "embedded"
[matrix]
scale = 1
workload = ["select-only"]
clients = [1]
"""


def test_the_plan_carries_its_description(tmp_path: Path) -> None:
    assert plan.parse(PLAN, "p.toml", base=tmp_path).description == ABOUT
    with pytest.raises(PlanError, match=r"campaign\.description: must be a string"):
        plan.parse(PLAN.replace(f'"{ABOUT}"', "3"), "p.toml", base=tmp_path)


def described_db(tmp_path: Path) -> Path:
    db = write_synthetic(tmp_path, SyntheticPlan(workloads=("select-only",), clients=(1,)))
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE campaigns SET description = ?", (ABOUT,))
    return db


def test_report_and_markdown_show_it_first(tmp_path: Path) -> None:
    db = described_db(tmp_path)
    page = write_report(db, output=tmp_path / "r.html")
    assert isinstance(page, Path)
    text = page.read_text(encoding="utf-8")
    shown = '<p class="description">Checkpoint tuning &lt;b&gt;before&lt;/b&gt; &amp; after</p>'
    assert shown in text and text.index(shown) < text.index('class="sub"')
    with Store(db) as store:
        summary = markdown.render(load_view(store, 1, detail=False))
    assert summary.splitlines()[2] == "_Checkpoint tuning &lt;b>before&lt;/b> & after_"


def test_campaigns_lists_it(tmp_path: Path) -> None:
    db = described_db(tmp_path)
    done = run_cli("campaigns", "--results", db.parent, timeout=60)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split()[-1] == "description"
    assert row.rstrip().endswith(ABOUT)


def test_older_databases_get_the_description_of_their_plan(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    with sqlite3.connect(db) as connection:
        connection.executescript(MIGRATIONS[1] + MIGRATIONS[2] + "PRAGMA user_version = 2;")
        connection.execute(
            "INSERT INTO campaigns (name, plan_path, plan_text, plan_digest, started_at, "
            "pgbenchlab_version) VALUES ('about', 'p.toml', ?, 'x', 0, '0')",
            (PLAN,),
        )
    with Store(db) as store:
        found = store.find_campaign("about")
        assert found is not None and found.description == ABOUT
