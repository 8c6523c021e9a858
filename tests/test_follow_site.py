"""A followed branch in the site and the history export, from a synthetic results database:
six neighbouring commits measured, the fourth twice as slow. The change lies between two
neighbouring commits (nothing to bisect: the later one is the culprit); its timeline draws a
point per commit with its hover text and a link to the commit's report, the change as a band
linked to its page, all offline in the real browser."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab.cli import main
from pgbenchlab.report import write_site
from pgbenchlab.store import FollowCommit, Store
from report_browser import Browser

SLOW_FROM = 3


@pytest.fixture
def database(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    for position in range(6):
        commit = f"{position + 1:x}" * 40
        speed = 0.5 if position >= SLOW_FROM else 1.0
        server = FakeServer("pg", "13.16", speed, {"shared_buffers": "32MB"})
        plan = SyntheticPlan(
            name=f"nightly.{commit[:12]}", servers=(server,), workloads=("select-only",),
            clients=(2,), repeats=4, seed=position,
        )  # fmt: skip
        db = write_synthetic(results, plan)
        with Store(db) as store:
            store.save_follow_commit(
                FollowCommit(
                    "nightly", commit, None, position, f"<i>change</i> {position}",
                    f"2026-01-0{position + 1}T10:00:00+00:00", "git:/src/postgresql", "master",
                    plan.name, "measured", "", 30.0, float(position),
                )
            )  # fmt: skip
    return db


def test_the_site_shows_the_change_and_its_culprit(database: Path, tmp_path: Path) -> None:
    index = write_site(database, tmp_path / "site")
    assert 'href="follows/nightly.html"' in index.read_text()
    page = (index.parent / "follows" / "nightly.html").read_text()
    assert page.count('class="commit"') == 6 * 2  # a linked point per commit, TPS and p99
    assert "&lt;i&gt;change&lt;/i&gt; 3" in page and "<i>change" not in page  # text, not markup
    changes = sorted((index.parent / "follows").glob("nightly-*.html"))
    assert changes, "no page per change"
    text = changes[0].read_text()
    assert "Culprit: <code>" + "4" * 40 in text  # the commit at position 3


def test_the_history_exports_as_commit_time_cell_metric_value(
    database: Path, tmp_path: Path
) -> None:
    out = tmp_path / "history.csv"
    assert (
        main(["export", "--format", "history", "--results", str(database.parent), "-o", str(out)])
        == 0
    )
    assert out.read_text().splitlines()[0] == "commit,time,cell,metric,value"
    with out.open() as rows:
        tps = [r for r in csv.DictReader(rows) if r["metric"] == "tps"]
    assert [r["commit"][:1] for r in tps] == ["1", "2", "3", "4", "5", "6"]  # in branch order
    assert {r["cell"] for r in tps} == {"select-only, scale 1, 2 clients"}
    assert float(tps[5]["value"]) < 0.7 * float(tps[0]["value"])


@pytest.mark.browser
def test_the_timeline_in_the_browser(browser: Browser, database: Path, tmp_path: Path) -> None:
    index = write_site(database, tmp_path / "site")
    page = index.parent / "follows" / "nightly.html"
    with browser.page(1400, 1200) as tab:
        tab.page.goto(page.as_uri())
        assert tab.problems() == []
        assert tab.evaluate("document.querySelectorAll('svg.follow-chart circle').length") == 12
        hover = tab.evaluate("document.querySelector('a.commit circle title').textContent")
        assert "<i>change</i> 0" in hover and "2026-01-01" in hover
        tab.page.click("a.commit >> nth=0")  # to the commit's report
        tab.page.wait_for_load_state()
        assert tab.page.url.endswith(".html") and "/campaigns/" in tab.page.url
        tab.page.goto(page.as_uri())
        tab.page.click("a.change >> nth=0")  # to the change's page
        tab.page.wait_for_load_state()
        assert "Culprit" in tab.page.content()
        assert tab.problems() == []
