"""The HTML report in a real headless Chromium, with the network unusable: it loads with no
console message, every chart draws marks, a run's detail opens, hostile names stay text.

The real-campaign test reads the database of `real_campaign` (conftest.py: real PostgreSQL 15
and 18, real pgbench). Set PGBENCHLAB_UPDATE_SCREENSHOT=1 to refresh
docs/report-screenshot.png from it.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest

from conftest_report import FakeServer, SyntheticPlan, add_events, write_synthetic
from pgbenchlab.report import write_report
from pgbenchlab.report.views import telemetry_series
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.mail import mail_view
from pgbenchlab.store import Store
from report_browser import Browser, open_report, screenshot_of
from support import embedded_data

pytestmark = pytest.mark.browser

DOCS_SCREENSHOT = Path(__file__).parent.parent / "docs" / "report-screenshot.png"
HOSTILE = "<script>alert(1)</script>"
PROBES = {
    "text": "document.body.innerText",
    "pwned": "typeof window.pwned",
    "detail_hidden": "document.getElementById('run-detail').hidden",
    "table_rows": "document.querySelectorAll('#run-table tbody tr').length",
}
# The telemetry panels under a run's TPS, by the datasets that draw them.
PANELS = {
    telemetry_series.WAITS: "waits",
    telemetry_series.HOST_CPU: "cpu",
    telemetry_series.PROCESS_CPU: "cpu",
    telemetry_series.IO: "io",
    telemetry_series.DISK_BUSY: "disk_busy",
    telemetry_series.COMMITS: "commits",
}
# Per panel of the run's timeline: its areas and lines drawn (rules, such as server events and
# the invisible zoom carrier, left out), and the first label of its time axis.
TIMELINE_PROBES = {
    "panel_marks": "Object.fromEntries([...document.querySelectorAll("
    "'#run-tps svg g.mark-group.role-scope')].filter(g => /_group$/.test(g.getAttribute('class')))"
    ".map(g => [g.getAttribute('class').split(' ').pop().replace(/_group$/, ''),"
    " g.querySelectorAll('g.mark-area > path, g.mark-line > path').length]))",
    "first_ticks": "[...document.querySelectorAll('#run-tps svg g.role-axis')]"
    ".filter(a => (a.getAttribute('aria-label') || '').startsWith('X-axis'))"
    ".map(a => a.querySelector('g.role-axis-label text').textContent)",
    "note": "[...document.querySelectorAll('#run-detail p.note')].map(p => p.textContent)",
}


def assert_drawn(charts: dict[str, int], expected: set[str]) -> None:
    assert expected <= set(charts), f"missing charts: {expected - set(charts)}"
    empty = [name for name, marks in charts.items() if marks <= 0]
    assert not empty, f"charts with nothing drawn: {empty}"


SELF_REPORTING_PAGE = """<!doctype html><html><body><script>
console.warn('odd', 2); alert('boo');
setTimeout(() => { throw new Error('late boom'); }, 10);
document.body.dataset.renderMs = '12'; document.body.dataset.chartsDone = '1';
</script><img src="https://cdn.example.com/x.png"><script src="missing.js"></script></body></html>
"""


def test_the_browser_reports_every_kind_of_problem(browser: Browser, tmp_path: Path) -> None:
    """What the report tests assert empty does catch trouble: a console message, a dialog, an
    exception after load, a load from the network (unusable here) and a missing file."""
    page_path = tmp_path / "page.html"
    page_path.write_text(SELF_REPORTING_PAGE, encoding="utf-8")
    result = open_report(page_path, browser=browser)
    found = "\n".join(result.console)
    assert "console.warning: odd 2" in found, found
    assert "dialog alert: boo" in found, found
    assert "exception: late boom" in found, found
    assert "failed load: https://cdn.example.com/x.png" in found, found
    assert "failed load: " + (tmp_path / "missing.js").as_uri() in found, found
    assert result.render_ms is not None and result.render_ms >= 12


def test_hostile_names_render_as_text(browser: Browser, tmp_path: Path) -> None:
    payload = "<img src=x onerror=window.pwned=1>"
    plan = SyntheticPlan(
        name=f"</script>{payload}",
        servers=(
            FakeServer(HOSTILE, "15.18", 1.0, {"work_mem": payload}),
            FakeServer('pg18"><svg onload=window.pwned=2>', "18.1", 1.1),
        ),
        clients=(1, 2),
        rates=(1000.0, 4000.0),
        latency_limit_ms=5.0,
        repeats=2,
        failures=(4,),
        duration_s=5,
    )
    db = write_synthetic(tmp_path / "res", plan)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET error = ? WHERE status = 'failed'", (payload,))
    add_events(db, [(1, 2.0, "checkpoint_start", payload)])
    out = write_report(db, output=tmp_path / "report.html")
    assert isinstance(out, Path)
    failed_id = 5  # sequence 4
    result = open_report(out, f"#run-{failed_id}", probes=PROBES, browser=browser)
    assert result.console == []
    assert result.checks["pwned"] == "undefined"
    text = result.checks["text"]
    assert HOSTILE in text and payload in text  # shown, literally, as text
    assert result.checks["detail_hidden"] is False
    assert_drawn(result.charts, {"chart-tps", "chart-latency", "chart-rate", "chart-heat-tps"})
    # a run with a server event: the event is a mark on its time series
    with_event = open_report(out, "#run-1", probes=PROBES, browser=browser)
    assert with_event.console == [] and with_event.checks["pwned"] == "undefined"
    assert_drawn(with_event.charts, {"run-tps", "run-latency", "run-sorted", "run-hist"})
    assert with_event.charts["run-tps"] == 2  # the TPS line and the event's rule


@pytest.mark.server
def test_real_campaign_report_in_the_browser(
    browser: Browser, real_campaign: Any, tmp_path: Path
) -> None:
    db = real_campaign.results_dir / "results.db"
    out = write_report(db, output=tmp_path / "report.html")
    assert isinstance(out, Path)
    result = open_report(out, probes=PROBES, screenshot=True, browser=browser)
    assert result.console == [], result.console
    assert_drawn(
        result.charts,
        {
            "chart-tps",
            "chart-latency",
            "chart-efficiency",
            "chart-dist",
            "chart-heat-tps",
            "chart-heat-p99",
            # pg15 and pg18: the majors differ, so TPS and p99 along the versions; two scales
            "chart-version-tps",
            "chart-version-p99",
            "chart-scale-tps",
            "chart-scale-p99",
        },
    )
    with Store(db) as store:
        runs = store.run_records(1)
    assert result.checks["table_rows"] == len(runs)
    assert result.screenshot and result.screenshot.startswith(b"\x89PNG")
    (tmp_path / "report.png").write_bytes(result.screenshot)
    # a run's detail: its per-second series and its latency distribution
    run_id = runs[-1].id
    detail = open_report(out, f"#run-{run_id}", probes=PROBES | TIMELINE_PROBES, browser=browser)
    assert detail.console == [], detail.console
    assert detail.checks["detail_hidden"] is False
    assert_drawn(detail.charts, {"run-tps", "run-latency", "run-sorted", "run-hist", "run-cdf"})
    # its telemetry under its TPS: a drawn panel for each kind of series the run has
    assert_timeline(embedded_data(out.read_text(encoding="utf-8")), run_id, detail.checks)
    assert result.render_ms is not None and result.render_ms < 5000
    if os.environ.get("PGBENCHLAB_UPDATE_SCREENSHOT"):
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        DOCS_SCREENSHOT.write_bytes(screenshot_of(out, "#charts", 1900, browser))


@pytest.mark.server
def test_real_campaign_view_model_matches_the_database(real_campaign: Any) -> None:
    db = real_campaign.results_dir / "results.db"
    with Store(db) as store:
        view = load_view(store, 1)
    connection = sqlite3.connect(db)
    try:
        for cell in view.cells:
            rows = connection.execute(
                "SELECT tps, p99_ms, p50_ms FROM latest_runs "
                "WHERE cell_id = ? AND status = 'ok' AND tps IS NOT NULL",
                (cell.cell_id,),
            ).fetchall()
            assert cell.n_ok == len(rows)
            if not rows:
                continue
            assert cell.tps is not None
            assert cell.tps.mean == pytest.approx(statistics.fmean(r[0] for r in rows))
            p99 = [r[1] for r in rows if r[1] is not None]
            assert cell.p99_ms == (pytest.approx(statistics.fmean(p99)) if p99 else None)
        count = connection.execute("SELECT count(*) FROM latest_runs").fetchone()[0]
        servers = [r[0] for r in connection.execute("SELECT name FROM servers ORDER BY id")]
    finally:
        connection.close()
    assert len(view.runs) == count
    assert [s.name for s in view.servers] == servers
    assert view.baseline == servers[0]
    assert {r.histogram is not None for r in view.runs if r.ok} == {True}
    assert all(r.seconds for r in view.runs if r.ok)


def test_lines_per_any_axis_the_reader_picks(browser: Browser, tmp_path: Path) -> None:
    plan = SyntheticPlan(clients=(1, 4), rates=(None, 2000.0), repeats=2, duration_s=5)
    out = write_report(write_synthetic(tmp_path, plan), output=tmp_path / "r.html")
    assert isinstance(out, Path)
    with browser.page() as page:
        first = page.open(out.as_uri())
        options = page.evaluate(
            "[...document.querySelectorAll('#series-axis option')].map(o => o.value)"
        )
        assert options == ["server", "workload", "rate"]
        legend = "[...document.querySelectorAll('#chart-tps .role-legend-label text')]"
        assert page.evaluate(f"{legend}.map(t => t.textContent)") == ["pg15", "pg18"]
        page.evaluate(
            "(() => { const s = document.getElementById('series-axis'); s.value = 'rate';"
            " s.dispatchEvent(new Event('change'));"
            " return new Promise(r => setTimeout(r, 1500)); })()"
        )
        labels = page.evaluate(f"{legend}.map(t => t.textContent)")
        redrawn = page.marks()
        problems = page.problems()
    assert first.console == [] and problems == []
    assert labels == ["unlimited", "2000 tps"]  # in the matrix order, not alphabetical
    assert all(redrawn[c] > 0 for c in ("chart-tps", "chart-latency", "chart-efficiency"))


def table_rows(anchor: str) -> str:
    """A probe: the text of every row (header first) of the table under heading ``anchor``."""
    return (
        f"[...document.getElementById('{anchor}').nextElementSibling.querySelectorAll('tr')]"
        ".map(r => [...r.cells].map(c => c.textContent))"
    )


def test_equivalence_verdicts_in_the_comparisons_table(browser: Browser, tmp_path: Path) -> None:
    """A plan with `equivalence`: each candidate's change is followed by its verdict within the
    margin, the very verdict `report --format text` prints for that cell and metric."""
    candidates = ("same", "close", "faster")
    plan = SyntheticPlan(
        servers=(
            FakeServer("pg15", "15.18"),
            FakeServer("same", "15.18"),
            FakeServer("close", "15.18", 1.25),
            FakeServer("faster", "15.18", 1.6),
        ),
        workloads=("select-only",),
        clients=(1, 2),
        duration_s=5,
        seed=2,  # one that gives each kind of verdict
        plan_text="[campaign]\nname = 'synthetic'\nequivalence = \"25%\"\n",
    )
    db = write_synthetic(tmp_path, plan)
    out = write_report(db, output=tmp_path / "r.html")
    mail = write_report(db, fmt="text")
    assert isinstance(out, Path) and isinstance(mail, str)
    probes = {"tps": table_rows("change-tps"), "p99": table_rows("change-p99")}
    result = open_report(out, probes=probes, browser=browser)
    assert result.console == [], result.console
    with Store(db) as store:
        judged = dict(mail_view(load_view(store, 1, detail=False)).candidates)
    said = " ".join(mail.split())  # the text report unwrapped
    shown = set()
    for metric in ("tps", "p99"):
        header, *rows = result.checks[metric]
        assert header == ["panel", "clients"] + [
            h for c in candidates for h in (c, f"{c} within ±25%")
        ]
        assert len(rows) == 2
        for row in rows:
            for index, candidate in enumerate(candidates):
                (change,) = [
                    c for c in judged[candidate]
                    if c.cell == f"clients={row[1]}" and c.metric == metric
                ]  # fmt: skip
                assert row[3 + 2 * index] == change.equivalence_reason.split(" (")[0]
                assert change.equivalence_reason in said  # printed by the text report
                shown.add(row[3 + 2 * index].split(":")[0])
    assert {"equivalent within ±25%", "not equivalent within ±25%", "not decided"} <= shown


def assert_timeline(data: dict[str, Any], run_id: int, checks: dict[str, Any]) -> None:
    """The run's timeline has the TPS panel and one panel with drawn areas or lines for each
    kind of telemetry the page embeds for it, and no other."""
    series = data["detail"]["runs"][str(run_id)]["x"][1]
    names = data["detail"]["telemetry"]["series"]
    expected = {"tps"} | {PANELS[names[s[0]][0]] for s in series}
    marks = checks["panel_marks"]
    assert set(marks) == expected, marks
    assert all(count > 0 for count in marks.values()), marks
    assert len(checks["first_ticks"]) == len(expected)


TELEMETRY_PLAN = SyntheticPlan(
    servers=(FakeServer("pg15", "15.18", 1.0), FakeServer("pg18", "18.1", 1.1)),
    workloads=("tpcb-like",),
    clients=(1, 8),
    repeats=2,
    duration_s=30,
    telemetry=True,
)


def test_telemetry_under_the_tps_zooms_with_it(browser: Browser, tmp_path: Path) -> None:
    db = write_synthetic(tmp_path / "res", TELEMETRY_PLAN)
    out = write_report(db, output=tmp_path / "report.html")
    assert isinstance(out, Path)
    data = embedded_data(out.read_text(encoding="utf-8"))
    with browser.page(1400, 2400) as page:
        shown = page.open(out.as_uri() + "#run-2")
        checks = {name: page.evaluate(js) for name, js in TIMELINE_PROBES.items()}
        assert_timeline(data, 2, checks)
        assert checks["note"] == []  # every run's telemetry is drawn: nothing to explain
        assert set(checks["first_ticks"]) == {"0"}  # one time axis from the first second
        # the wheel over the CPU panel zooms every panel's time axis, the TPS's too
        centre = page.evaluate(
            "(() => { const r = document.querySelector('#run-tps svg g.cpu_group "
            "path.background').getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        page.wheel(centre[0], centre[1], -400)
        page.evaluate("new Promise(r => setTimeout(r, 500))")
        zoomed = page.evaluate(TIMELINE_PROBES["first_ticks"])
        problems = page.problems()
    assert shown.console == [] and problems == [], shown.console + problems
    assert len(set(zoomed)) == 1 and zoomed[0] != "0", zoomed


def test_runs_beyond_the_telemetry_budget_say_so(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry_series, "TELEMETRY_SECONDS", 2 * TELEMETRY_PLAN.duration_s)
    db = write_synthetic(tmp_path / "res", TELEMETRY_PLAN)
    out = write_report(db, output=tmp_path / "report.html")
    assert isinstance(out, Path)
    header = "[...document.querySelectorAll('#run-table th')].map(th => th.textContent)"
    with browser.page() as page:
        left_out = page.open(out.as_uri() + "#run-8")  # repeat 2: beyond the budget
        checks = {name: page.evaluate(js) for name, js in TIMELINE_PROBES.items()}
        columns = page.evaluate(header)
    assert left_out.console == [], left_out.console
    assert checks["panel_marks"] == {}  # the plain TPS chart, drawn
    assert left_out.charts["run-tps"] > 0
    assert len(checks["note"]) == 1 and "drawn for 2 of the 8 runs" in checks["note"][0]
    assert "telemetry charts" in columns
