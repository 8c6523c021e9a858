"""The report opens with its answer: findings computed once from the view model (the
comparisons and their verdicts, where scaling stops, what limited the runs, the warnings that
change a conclusion), each linking to its evidence in the page, and the same in Markdown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest_report import FakeServer, SyntheticPlan, add_diagnosis, write_synthetic
from pgbenchlab.report import write_report
from pgbenchlab.report.render import markdown
from pgbenchlab.report.views.answer import findings
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.store import Store
from report_browser import Browser

# pg18 a third faster than pg15 everywhere; one run fails; two runs are limited by their CPU.
PLAN = SyntheticPlan(
    servers=(FakeServer("pg15", "15.18", 1.0), FakeServer("pg18", "18.1", 1.3)),
    workloads=("select-only",),
    clients=(1, 2, 4, 8),
    repeats=3,
    failures=(0,),
    duration_s=60,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = write_synthetic(tmp_path_factory.mktemp("answer"), PLAN)
    for run_id in (2, 3):
        add_diagnosis(found, run_id, "server_cpu_bound", ["CPU busy 98 % of the run"])
    return found


@pytest.fixture(scope="module")
def view(db: Path) -> ReportView:
    with Store(db) as store:
        return load_view(store, 1)


@pytest.fixture(scope="module")
def page(db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = write_report(db, output=tmp_path_factory.mktemp("page") / "r.html")
    assert isinstance(out, Path)
    return out


def test_findings_state_the_comparison_the_scaling_the_limits_and_the_failure(
    view: ReportView,
) -> None:
    listed = findings(view)
    found = {f.anchor: f for f in listed}
    assert {f.kind for f in listed} == {"comparison", "scaling", "limits", "warning"}
    tps = found["change-tps"]
    assert tps.kind == "comparison"
    assert tps.text.startswith("pg18 against pg15, TPS: improved in ")
    cells = sum(c.metric == "tps" for c in view.changes)
    improved = sum(c.metric == "tps" and c.verdict == "improved" for c in view.changes)
    assert f"improved in {improved} of {cells} cell(s)" in tps.text and improved > 0
    assert found["change-p99"].text.startswith("pg18 against pg15, p99 latency: ")
    scaling = [f for f in listed if f.kind == "scaling"]
    assert [f.text.split(":")[0] for f in scaling] == ["pg15", "pg18"]  # one per series
    means = {c.clients: c.tps.mean for c in view.cells if c.dim("server") == "pg18" and c.tps}
    clients = max(means, key=lambda n: means[n])
    assert f"highest {means[clients]:,.0f} TPS at {clients} clients" in scaling[1].text
    assert all(f.anchor == "scalability" for f in scaling)
    assert found["limits"].text == "What limited the runs: server cpu bound in 2 of 24 run(s)"
    assert found["warning-1"].kind == "warning"
    assert found["warning-1"].text.startswith("1 run(s) failed")


def test_the_page_opens_with_them_and_every_link_has_its_evidence(
    view: ReportView, page: Path
) -> None:
    text = page.read_text(encoding="utf-8")
    main = text[text.index("<main>") :]
    first = re.search(r'<section id="([^"]+)"><h2>([^<]+)</h2>', main)
    assert first is not None and first.groups() == ("findings", "Findings")
    ids = set(re.findall(r'\sid="([^"]+)"', text))
    links = re.findall(r'<a class="evidence" href="#([^"]+)">', main)
    assert links == [f.anchor for f in findings(view)]
    assert set(links) <= ids
    # the configuration comes after the results
    assert main.index('id="tables"') < main.index('id="overview"')
    assert main.index('id="charts"') < main.index('id="overview"')


def test_markdown_opens_with_the_same_findings(view: ReportView) -> None:
    text = markdown.render(view)
    lines = text.splitlines()
    start = lines.index("### Findings")
    said = [
        f"- {markdown.escape(f.text)} (_{markdown.escape(f.evidence)}_)" for f in findings(view)
    ]
    assert lines[start + 2 : start + 2 + len(said)] == said
    assert start < lines.index("### TPS and p99 latency by clients") < lines.index("### Campaign")


@pytest.mark.browser
def test_a_finding_leads_to_its_evidence_in_the_browser(browser: Browser, page: Path) -> None:
    with browser.page(1400, 900) as tab:
        opened = tab.open(page.as_uri())
        heading = tab.evaluate("document.querySelector('main > section h2').textContent")
        link = "document.querySelector('#findings a.evidence[href=\"#change-tps\"]')"
        assert tab.evaluate(f"{link} !== null")
        before = tab.evaluate("window.scrollY")
        tab.page.click('#findings a.evidence[href="#change-tps"]')
        tab.page.wait_for_timeout(300)
        target = tab.evaluate(
            "(() => { const r = document.getElementById('change-tps').getBoundingClientRect();"
            " return [r.top, window.innerHeight, document.getElementById('change-tps')"
            ".textContent, location.hash, window.scrollY]; })()"
        )
        problems = tab.problems()
    assert opened.console == [] and problems == [], opened.console + problems
    assert heading == "Findings"
    top, height, title, fragment, after = target
    assert title == "TPS: change against pg15" and fragment == "#change-tps"
    assert after > before and -1 < top < height  # scrolled to it: the table is in view


def test_candidates_with_no_cell_decided_are_said_together(tmp_path: Path) -> None:
    """One run per cell decides nothing: the candidates are named in one finding per metric,
    not one line each."""
    servers = tuple(FakeServer(f"pg{m}", f"{m}.1", 1.0 + m / 100) for m in (13, 14, 15, 16))
    db = write_synthetic(tmp_path, SyntheticPlan(servers=servers, clients=(1, 2), repeats=1))
    with Store(db) as store:
        listed = [f for f in findings(load_view(store, 1)) if f.kind == "comparison"]
    assert [f.text for f in listed] == [
        "pg14, pg15, pg16 against pg13, TPS: not enough data in any cell (more repeats decide)",
        "pg14, pg15, pg16 against pg13, p99 latency: not enough data in any cell "
        "(more repeats decide)",
    ]
