"""The sorted per-second TPS of several configurations on one chart (the classic "percentile
TPS" plot): each run's seconds from fastest to slowest, the share of its seconds on x, one colour
per configuration; drawn in the real browser from the stored per-second series, and as an
image."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab.report import write_report
from pgbenchlab.report.render import chart_data, html, images
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.store import Store
from report_browser import Browser, open_report

# Two servers, one workload, clients 1 and 2, two repeats of 10 s: 4 runs at each client count.
PLAN = SyntheticPlan(workloads=("select-only",), clients=(1, 2), repeats=2, duration_s=10)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("sorted"), PLAN)


@pytest.fixture(scope="module")
def view(db: Path) -> ReportView:
    with Store(db) as store:
        return load_view(store, 1)


def test_each_runs_seconds_fastest_first_over_its_share_of_seconds(view: ReportView) -> None:
    rows = chart_data.sorted_rows(view)
    by_run: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault(int(row["run"]), []).append(row)
    assert set(by_run) == {r.id for r in view.runs if r.ok}
    for run in view.runs:
        ranked = by_run[run.id]
        assert len(ranked) == PLAN.duration_s
        assert sorted(int(r["t"]) for r in ranked) == [s.t for s in run.seconds]
        assert all(a["tps"] >= b["tps"] for a, b in pairwise(ranked))
        positions = [float(r["position"]) for r in ranked]
        assert positions[0] == 0.5 / PLAN.duration_s and positions[-1] < 1
        assert {r["s_server"] for r in ranked} == {run.server}  # its configuration's colour
    chart = next(c for c in html.main_charts(view) if c["id"] == "chart-sorted")
    spec = chart["specs"]["server"]
    assert spec["data"] == {"name": "sorted"} and spec["facet"]["field"] == "p_server"
    assert spec["params"][0]["value"] == 2  # the most clients shown first
    layer = spec["spec"]["layer"][0]
    assert layer["encoding"]["color"]["field"] == "s_server"
    assert layer["encoding"]["detail"]["field"] == "run"  # a line per run


def test_the_chart_as_an_image(view: ReportView, tmp_path: Path) -> None:
    spec = dict(images.chart_specs(view, per_run=False))["sorted"]
    written = images.write_chart(spec, tmp_path / "sorted")
    svg = written[0].read_text(encoding="utf-8")
    assert "Per-second TPS sorted, per run" in svg and "share of the run" in svg


@pytest.mark.browser
def test_the_chart_draws_a_line_per_run_in_the_browser(
    db: Path, browser: Browser, tmp_path: Path
) -> None:
    out = write_report(db, output=tmp_path / "report.html")
    assert isinstance(out, Path)
    result = open_report(out, browser=browser)
    assert result.console == [], result.console
    assert result.charts["chart-sorted"] == 4  # both servers' runs at 2 clients, two repeats
