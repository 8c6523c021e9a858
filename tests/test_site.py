"""`pgbenchlab report --site DIR`: one static site for a whole results database — an index of
campaigns, each campaign's report, and the comparisons of campaigns sharing cells — opened in
headless Chromium with the network unusable: every link resolves offline and nothing is
requested from the network."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from cli_process import run_cli
from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab.report import write_site
from pgbenchlab.store import Store
from report_browser import Browser

NIGHTLY = {"shared_buffers": "128MB"}
CAMPAIGNS = (
    SyntheticPlan(name="nightly-1", servers=(FakeServer("pg18", "18.1", 1.0, NIGHTLY),)),
    SyntheticPlan(name="nightly-2", servers=(FakeServer("pg18", "18.2", 1.3, NIGHTLY),), seed=8),
    # no cell in common with the nightlies: another workload
    SyntheticPlan(
        name="<b>writes</b>",
        servers=(FakeServer("pg15", "15.18"),),
        workloads=("simple-update",),
        clients=(1, 2),
    ),
)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    for plan in CAMPAIGNS:
        db = write_synthetic(tmp_path / "results", plan)
    return db


def add_campaign_without_runs(db: Path) -> None:
    with Store(db) as store:
        store.start_campaign("stopped-early", "p.toml", "", "d", {"pgbenchlab": "0.1.0"}, {})


def test_site_has_an_index_every_report_and_the_comparisons_that_exist(
    database: Path, tmp_path: Path
) -> None:
    add_campaign_without_runs(database)
    index = write_site(database, tmp_path / "site")
    assert index == tmp_path / "site" / "index.html"
    text = index.read_text(encoding="utf-8")
    names = re.findall(r'<a href="campaigns/\d+-[^"]+">([^<]+)</a>', text)
    assert names == ["&lt;b&gt;writes&lt;/b&gt;", "nightly-2", "nightly-1"]  # newest first
    assert "<tr><td>stopped-early</td>" in text  # listed, no report to link
    assert text.index("stopped-early") < text.index("nightly-2")
    assert "<b>writes</b>" not in text  # a name is text
    assert "pg18 (18.2)" in text and "finished" in text
    pages = sorted(p.relative_to(tmp_path / "site").as_posix() for p in index.parent.rglob("*"))
    assert [p for p in pages if p.endswith(".html")] == [
        "campaigns/1-nightly-1.html",
        "campaigns/2-nightly-2.html",
        "campaigns/3-_b_writes__b_.html",
        "comparisons/1-vs-2.html",  # the only pair sharing cells, the earlier as baseline
        "index.html",
    ]
    comparison = (index.parent / "comparisons/1-vs-2.html").read_text(encoding="utf-8")
    assert "nightly-1 → nightly-2" in comparison
    assert comparison.count("improved") >= 6  # 6 cells 30 % faster: TPS improved in each


def test_site_options_conflicting_with_it_are_one_line_and_exit_2(
    database: Path, tmp_path: Path
) -> None:
    results = database.parent
    done = run_cli("report", "--results", results, "--site", tmp_path / "s", "--campaign", "x")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "--site" in done.stderr
    assert not (tmp_path / "s").exists()
    done = run_cli("report", "--results", results, "--site", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "s" / "index.html")


def test_an_empty_path_is_refused_not_taken_for_the_working_directory(
    database: Path, tmp_path: Path
) -> None:
    # Path("") is ".": an empty --site would write the site into the working directory.
    work = tmp_path / "work"
    work.mkdir()
    results = database.parent
    for option in ("--site", "-o", "--images", "--results"):
        done = run_cli("report", "--results", results, option, "", cwd=work)
        assert done.returncode == 2, (option, done.stderr)
        assert f"argument {option}" in done.stderr and "empty path" in done.stderr
    assert list(work.iterdir()) == []


LINKS = "[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))"


@pytest.mark.browser
def test_site_in_the_browser_links_work_offline(
    browser: Browser, database: Path, tmp_path: Path
) -> None:
    index = write_site(database, tmp_path / "site")
    requested: list[str] = []
    seen: set[Path] = set()
    todo = [index]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        with browser.page(1400, 1000) as page:
            page.page.on("request", lambda r: requested.append(r.url))
            if path.parent.name == "campaigns":  # a report: every chart drawn, no message
                result = page.open(path.as_uri())
                assert result.console == [], (path, result.console)
                assert result.charts and min(result.charts.values()) > 0
            else:
                page.page.goto(path.as_uri())
                assert page.problems() == [], path
            links = [h for h in page.evaluate(LINKS) if not h.startswith("#")]
        for link in links:
            target = (path.parent / link).resolve()
            assert target.is_file(), f"{path.name}: broken link {link}"
            todo.append(target)
    assert {p.relative_to(index.parent).as_posix() for p in seen} >= {
        "index.html",
        "campaigns/1-nightly-1.html",
        "comparisons/1-vs-2.html",
    }
    assert len(seen) == 5  # the index, three reports, one comparison: all reached by links
    assert all(url.startswith("file://") for url in requested), requested


def test_a_comparison_page_judges_equivalence_within_the_baseline_plans_margin(
    tmp_path: Path,
) -> None:
    """Where the baseline's plan names an equivalence margin, each shared cell's change is
    judged against it too, as `compare --equivalence` does."""
    margin = "[campaign]\nname = 'nightly-1'\nequivalence = '50%'\n"
    for plan in (replace(CAMPAIGNS[0], plan_text=margin), CAMPAIGNS[1]):
        db = write_synthetic(tmp_path / "results", plan)
    index = write_site(db, tmp_path / "site")
    page = (index.parent / "comparisons/1-vs-2.html").read_text(encoding="utf-8")
    assert "<th>within ±50%</th>" in page
    judged = re.findall(r'<td title="([^"]*)">([^<]*)</td></tr>', page)
    assert len(judged) == page.count("<tr><td>") and judged
    words = ("equivalent within ±50%", "not equivalent", "not decided")
    assert all(said.startswith(words) and why.startswith(said) for why, said in judged)
    assert any(said == "equivalent within ±50%" for _, said in judged)  # 30 % faster
    plain = write_site(write_synthetic(tmp_path / "other", CAMPAIGNS[1]), tmp_path / "s2")
    assert "within ±" not in plain.read_text(encoding="utf-8")
