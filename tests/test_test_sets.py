"""Test sets joining a campaign: a plan that only adds servers (test sets, with the builds they
name) to a stored campaign continues it, the new sets' cells run and the old runs kept, the
plan it replaced kept in the campaign's history and the report saying which sets were added
when; any other change is refused as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan, report
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.campaign.resume import added_servers
from pgbenchlab.cli import main
from pgbenchlab.errors import StoreError
from pgbenchlab.store import Store
from support import QuietReporter, require_installs
from test_claims import library_run, plan_text
from test_faults import db_rows

SMALL = """
[[server]]
name = "small-buffers"
install = "embedded"
description = "shared_buffers 16MB"
settings = { shared_buffers = "16MB" }
"""
BUILD = '[build.b]\nsource = "debian:postgresql-13"\n'


@pytest.mark.parametrize(
    ("old", "new", "added"),
    [
        (plan_text("c"), plan_text("c") + SMALL, ("small-buffers",)),
        (
            plan_text("c"),
            plan_text("c") + SMALL.replace('"embedded"', '{ build = "b" }') + BUILD,
            ("small-buffers",),
        ),
        (plan_text("c") + SMALL, plan_text("c") + SMALL, ()),  # nothing added
        (plan_text("c") + SMALL, plan_text("c"), ()),  # a set removed
        (plan_text("c") + SMALL, plan_text("c") + SMALL.replace("16MB", "32MB"), ()),
        (plan_text("c"), plan_text("c", clients="[2]") + SMALL, ()),  # the matrix changed too
        (plan_text("c") + BUILD, plan_text("c") + BUILD.replace("13", "15") + SMALL, ()),
        ("not = [toml", plan_text("c"), ()),
    ],
)
def test_only_added_servers_and_their_builds_join(old: str, new: str, added: tuple[str]) -> None:
    assert added_servers(old, new) == added


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dry.toml"
    path.write_text(text)
    return path


def dry_run(tmp_path: Path, text: str, results: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The dry run's sentence on what the run would do with the results."""
    capsys.readouterr()
    assert main(["run", str(write(tmp_path, text)), "--dry-run", "--results", str(results)]) == 0
    return next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("the run ")
    )


@pytest.mark.server
def test_a_test_set_added_later_joins_the_campaign(
    tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_installs("embedded")
    first = library_run(tmp_path, plan_text("sets"), results_dir)
    assert first.ran == 1 and first.failed == 0
    first_plan = db_rows(results_dir, "SELECT plan_text, plan_digest FROM campaigns")[0]

    reporter = QuietReporter()
    joined = plan_text("sets") + SMALL
    # the dry run says what the run will do with the campaign, and writes nothing
    assert dry_run(tmp_path, plan_text("sets"), results_dir, capsys) == (
        'the run continues campaign "sets": 1 of its 1 runs are done and kept'
    )
    assert dry_run(tmp_path, joined, results_dir, capsys) == (
        'the run test set(s) small-buffers join campaign "sets": their cells run, 1 of its 2 '
        "runs are done and kept"
    )
    assert main(["run", str(write(tmp_path, plan_text("sets", clients="[2]"))), "--dry-run",
                 "--results", str(results_dir)]) == 2  # fmt: skip
    assert "was run with a different plan" in capsys.readouterr().err
    assert db_rows(results_dir, "SELECT count(*) FROM plan_changes")[0][0] == 0
    the_plan = plan.parse(joined, str(tmp_path / "plan.toml"), base=tmp_path)
    second = run_campaign(the_plan, results_dir, reporter)
    assert second.campaign_id == first.campaign_id
    assert (second.ran, second.skipped_done, second.failed) == (1, 1, 0)  # only the new cell
    runs = db_rows(results_dir, "SELECT campaign_id, server, status FROM runs ORDER BY id")
    assert [tuple(r) for r in runs] == [
        (first.campaign_id, "pg", "ok"),
        (first.campaign_id, "small-buffers", "ok"),
    ]
    notes = [text for kind, text in reporter.events if kind == "note"]
    assert any("test set(s) small-buffers join campaign" in str(n) for n in notes), notes

    with Store(results_dir / RESULTS_DB) as store:
        (change,) = store.plan_changes(first.campaign_id)
        stored = store.find_campaign("sets")
    assert change.added == ("small-buffers",)
    assert (change.plan_text, change.plan_digest) == tuple(first_plan)
    assert stored is not None and "small-buffers" in stored.plan_text
    assert stored.axis_orders["server"] == ("pg", "small-buffers")

    text = report.write_report(results_dir / RESULTS_DB, campaign="sets", fmt="markdown")
    assert isinstance(text, str)
    servers = next(line for line in text.splitlines() if line.startswith("- servers:"))
    assert "pg (PostgreSQL" in servers and "small-buffers" in servers
    assert "- test sets added " in text and text.count("small-buffers") >= 2

    # Anything else changed with it is refused as before, and changes nothing.
    with pytest.raises(StoreError, match="different plan"):
        library_run(tmp_path, plan_text("sets", clients="[2]") + SMALL, results_dir)
    assert len(db_rows(results_dir, "SELECT id FROM runs")) == 2
