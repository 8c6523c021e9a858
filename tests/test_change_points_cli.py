"""`pgbenchlab compare --series` and the report's change points: a real step along a setting
axis is found between the right values with the right sign; campaigns and servers follow the
order given or planned; axes that cannot be scanned are one-line user errors."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_process import run_cli
from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, remove_clusters, run_campaign
from pgbenchlab.plan import planned_axis_orders
from pgbenchlab.report import write_report
from pgbenchlab.report.render import markdown
from pgbenchlab.report.views import steps
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.compare_series import within_campaign
from pgbenchlab.store import Store
from support import QuietReporter, require_installs, run_errors

# alone: steps found in measured TPS
pytestmark = pytest.mark.alone

# A random_page_cost so high that the planner reads pgbench_accounts sequentially instead of
# through its index: select-only becomes about a hundred times slower, a step no noise hides.
# Three values need four runs each: with three, no step can reach 99 % (smallest_p_value).
PLANNER = """
[campaign]
name = "planner"
repeats = 4
[defaults]
duration = "1s"
warmup = "0s"
[[server]]
name = "pg"
install = "embedded"
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
[matrix.setting]
random_page_cost = [1, 4, 100000]
"""


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The results directory of the real campaign above (12 runs of 1 s)."""
    require_installs("embedded")
    base = tmp_path_factory.mktemp("planner")
    the_plan = plan.parse(PLANNER, str(base / "planner.toml"), base=base)
    results = base / "results"
    outcome = run_campaign(the_plan, results, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    yield results
    remove_clusters(results)


def compare_series(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("compare", "--results", results, *args, timeout=120)


@pytest.mark.server
def test_the_step_is_found_between_the_right_values(planner: Path) -> None:
    done = compare_series(planner, "--series", "random_page_cost", "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    assert found["axis"] == "random_page_cost"
    assert found["order"] == ["1", "4", "100000"]
    assert (found["cells"], found["cells_with_steps"], found["too_short"]) == (1, 1, [])
    steps = {s["metric"]: s for s in found["steps"]}
    assert set(steps) >= {"tps", "p50"}  # p99 of 1-s runs is noisier: not required
    for step in found["steps"]:
        assert (step["previous"], step["label"]) == ("4", "100000"), step
        assert step["verdict"] == "regressed"
        assert step["p_value"] < 0.01
        assert step["axes"]["workload"] == "select-only"
    assert steps["tps"]["relative_step"] < -0.5 and steps["tps"]["ci_high"] < -0.5
    assert steps["p50"]["relative_step"] > 1 and steps["p50"]["after"] > steps["p50"]["before"]


@pytest.mark.server
def test_text_names_the_step_and_the_gate_fails(planner: Path) -> None:
    done = compare_series(
        planner, "--series", "random_page_cost", "--threshold", "3%", "--fail-on-regression"
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Change points along random_page_cost: 1 → 4 → 100000"
    tps = next(line for line in lines if " TPS " in line)
    assert "4 and 100000" in tps and tps.endswith("regressed")
    assert re.fullmatch(r"[23] steps in 1 of 1 cell\.", lines[-1]), lines[-1]


@pytest.mark.server
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("clients",), "--series clients: 1 value(s) here; a series needs at least 3; "),
        (("workload",), "--series workload: its values have no order to follow; "),
        (("nope",), "--series nope: no such axis in campaign 'planner'; "),
        (("campaign", "planner"), "--series campaign needs at least 3 campaigns in order, got 1"),
        (("server", "--baseline", "pg"), "--series scans every value of an axis; drop --baseline"),
    ],
)
def test_axes_that_cannot_be_scanned_are_user_errors(
    planner: Path, args: tuple[str, ...], says: str
) -> None:
    done = compare_series(planner, "--series", *args)
    assert done.returncode == 2, done.stdout
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert says in done.stderr
    if says.endswith("; "):  # a wrong axis: the line names those that would work
        assert done.stderr.rstrip().endswith("series axes here: random_page_cost")


@pytest.mark.server
def test_the_report_shows_the_same_steps(planner: Path, tmp_path: Path) -> None:
    db = planner / RESULTS_DB
    with Store(db) as store:
        expected = within_campaign(store, "planner", "random_page_cost")
    table = steps.step_table(expected)
    page = write_report(db, output=tmp_path / "r.html")
    assert isinstance(page, Path)
    html = page.read_text(encoding="utf-8")
    section = html[html.index('<section id="change-points">') :]
    section = section[: section.index("</section>")]
    assert "<h2>Where performance stepped</h2>" in section
    assert '<a href="#change-points">' in html
    for row in table.rows:  # the CLI's numbers, cell for cell
        assert all(f">{value}</td>" in section for value in row), row
    markdown = write_report(db, fmt="markdown")
    assert isinstance(markdown, str)
    assert "### Change points along random\\_page\\_cost" in markdown
    assert "| all | TPS | 4 and 100000 |" in markdown


# -- without a server: synthetic results databases ----------------------------------------------


def nightly_builds(results: Path, speeds: tuple[float, ...]) -> Path:
    """One single-server campaign per build, night0, night1, ..., in one results database."""
    for i, speed in enumerate(speeds):
        db = write_synthetic(
            results,
            SyntheticPlan(
                name=f"night{i}",
                servers=(FakeServer("pg", "18.1", speed),),
                workloads=("tpcb-like",),
                clients=(1, 4),
                duration_s=3,
                seed=i,
            ),
        )
    return db


def test_campaigns_in_the_order_given(tmp_path: Path) -> None:
    nightly_builds(tmp_path, (1.0, 1.0, 1.5, 1.5))
    names = ["night0", "night1", "night2", "night3"]
    done = compare_series(tmp_path, "--series", "campaign", *names, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["order"] == names and found["cells"] == 2
    tps = [s for s in found["steps"] if s["metric"] == "tps"]
    assert [(s["previous"], s["label"], s["verdict"]) for s in tps] == [
        ("night1", "night2", "improved")
    ] * 2
    assert {s["cell"] for s in tps} == {"clients=1", "clients=4"}
    # The same builds given newest first: the same step, now a regression.
    backwards = compare_series(
        tmp_path, "--series", "campaign", *reversed(names), "--fail-on-regression"
    )
    assert backwards.returncode == 1
    assert "night2 and night1" in backwards.stdout


def test_servers_follow_the_plan_not_the_run_order(tmp_path: Path) -> None:
    # One major: builds of a release (servers of several majors read oldest first instead)
    servers = tuple(
        FakeServer(f"pg{v}", f"15.{v}", speed) for v, speed in ((14, 1.0), (15, 1.0), (16, 0.6))
    )
    db = write_synthetic(
        tmp_path, SyntheticPlan(servers=servers, workloads=("tpcb-like",), clients=(2,), repeats=4)
    )
    with Store(db) as store:
        ran = within_campaign(store, None, "server")
    planned_order = {"server": ["pg16", "pg15", "pg14"]}  # as the campaign's plan stored it
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE campaigns SET axis_orders_json = ?", (json.dumps(planned_order),)
        )
    with Store(db) as store:
        planned = within_campaign(store, None, "server")
    assert ran.order == ("pg14", "pg15", "pg16") and planned.order == ("pg16", "pg15", "pg14")
    first, second = ran.steps[0], planned.steps[0]
    assert (first.metric, first.previous, first.label, first.verdict) == (
        "tps",
        "pg15",
        "pg16",
        "regressed",
    )
    assert (second.previous, second.label, second.verdict) == ("pg16", "pg15", "improved")


def test_setting_values_in_plan_order() -> None:
    text = """
[matrix.setting]
synchronous_commit = [false, "local", true]
[[server]]
name = "b"
setting = { work_mem = ["64MB", "4MB"] }
[[server]]
name = "a"
"""
    assert planned_axis_orders(text) == {
        "server": ["b", "a"],
        "synchronous_commit": ["off", "local", "on"],
        "work_mem": ["64MB", "4MB"],
    }
    assert planned_axis_orders("not = [toml") == {}


def test_a_series_too_short_to_show_a_step_says_so(tmp_path: Path) -> None:
    servers = tuple(FakeServer(f"pg{v}", f"{v}.1", s) for v, s in ((14, 1.0), (15, 3.0), (16, 3.0)))
    db = write_synthetic(
        tmp_path, SyntheticPlan(servers=servers, workloads=("tpcb-like",), clients=(1,))
    )
    with Store(db) as store:
        found = within_campaign(store, None, "server")
    # Three times faster, yet three runs at three servers cannot reach 99 %.
    assert found.steps == () and found.too_short == ("all",)
    assert found.repeats_to_show == 4
    assert "cannot show any step at 99% confidence" in steps.summary(found)
    assert "about 4 runs per value would do" in steps.summary(found)


def test_the_view_holds_the_reports_scans_and_the_renderers_print_them(tmp_path: Path) -> None:
    # One major: builds of a release (servers of several majors read oldest first instead)
    servers = tuple(
        FakeServer(f"pg{v}", f"15.{v}", speed) for v, speed in ((14, 1.0), (15, 1.0), (16, 0.6))
    )
    db = write_synthetic(
        tmp_path, SyntheticPlan(servers=servers, workloads=("tpcb-like",), clients=(2,), repeats=4)
    )
    with Store(db) as store:
        view = load_view(store, 1, detail=False)
        fresh = steps.scan_view(view, "server")
    assert view.scans == (fresh,)  # computed once, by build_view, the same as on demand
    assert fresh.steps and fresh.steps[0].verdict == "regressed"
    text = markdown.render(view)
    assert f"### {markdown.escape(steps.title(fresh))}" in text
    assert all(markdown.escape(value) in text for value in steps.step_table(fresh).rows[0])
