"""`pgbenchlab capacity`: a real search against rate ceilings the test makes, interrupted and
resumed from what is stored, reported and compared; and the refusals of what cannot be searched.

The ceilings: every transaction takes the same advisory lock and sleeps 10 ms (server "fast")
or 20 ms ("slow"), so transactions run one at a time and no server does more than 100 (50) per
second, however many clients. The search's closed-loop start run measures the ceiling itself
(on this machine a 10 ms transaction takes 10.2–11 ms: 90–98 TPS), far below what a loaded
2-core machine does with select-only (thousands), so the ceilings hold under load. The SLO
(``skipped <= 1%`` with -L 500 ms) is loose on latency: a rate fails when the backlog grows
through the run. With Poisson arrivals and 3 s runs, a run at the ceiling passes about half the
time, so the bracket holds the ceiling within the resolution of such runs; tests/
test_capacity_model.py derives that band from a model of this queue (`RESOLUTION`).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from pgbenchlab import plan
from pgbenchlab.analysis.capacity import GROW, START, Next, SearchSettings
from pgbenchlab.analysis.slo import parse_slo
from pgbenchlab.campaign.capacity import (
    CapacityOptions,
    latency_limit_ms,
    probe_spec,
    search_capacity,
    search_cells,
)
from pgbenchlab.cli import main
from pgbenchlab.invocation import command
from pgbenchlab.plan import RunSpec
from pgbenchlab.records.version import parse_version
from pgbenchlab.report import load_view, write_report
from pgbenchlab.report.render import images
from pgbenchlab.report.views.capacity import CapacityView, capacity_views, compare_capacities
from pgbenchlab.store import Store
from support import QuietReporter, require_installs, run_errors
from test_capacity_model import RESOLUTION

# alone: latency bounds under offered rates
pytestmark = pytest.mark.alone

CEILINGS = {"fast": 100.0, "slow": 50.0}  # one transaction at a time, each ≥ 10 or 20 ms

PLAN = """
[campaign]
name = "ceiling"

[defaults]
duration = "3s"
warmup = "0s"
vacuum = "none"
checkpoint = false

[[server]]
name = "fast"
install = "embedded"
workload = [{{ name = "ceiling", script = "ceiling.sql", define = {{ sleep = "0.01" }} }}]
{slow}
[matrix]
scale = [1]
clients = [2]
{extra}
"""
SLOW = """
[[server]]
name = "slow"
install = "embedded"
workload = [{ name = "ceiling", script = "ceiling.sql", define = { sleep = "0.02" } }]
"""


def write_plan(where: Path, *, extra: str = 'latency_limit = "500ms"', slow: bool = False) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "ceiling.sql").write_text("SELECT pg_advisory_xact_lock(1), pg_sleep(:sleep);\n")
    path = where / "ceiling.toml"
    path.write_text(PLAN.format(extra=extra, slow=SLOW if slow else ""))
    return path


class InterruptAfter(QuietReporter):
    """Sends this process SIGINT (as Ctrl-C) a second into the measured run of the probe after
    the first `probes` probes are stored: pgbench is cut short mid-run."""

    def __init__(self, probes: int) -> None:
        super().__init__()
        self.left = probes

    def note(self, text: str) -> None:
        super().note(text)
        if text.startswith("    "):  # a probe's line, printed once it is stored
            self.left -= 1

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring" and self.left == 0:
            self.left = -1
            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()


@pytest.mark.server
def test_searches_find_the_ceilings_resume_and_compare(
    tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_installs("embedded")
    plan_path = write_plan(tmp_path, slow=True)
    the_plan = plan.load(plan_path)
    # Trials and confirmations of 3 s (the fewest seconds a growing backlog shows in), bisection
    # to 10 %: about 10 probes per search.
    settings = SearchSettings(tolerance=0.1)
    options = CapacityOptions(parse_slo("skipped <= 1%"), settings, trial_s=3)

    cut = search_capacity(the_plan, options, results_dir, InterruptAfter(3))
    assert cut.outcome.interrupted
    with Store(results_dir / "results.db") as store:
        before = [p.run_id for p in store.probe_records(cut.outcome.campaign_id)]
        statuses = [r.status for r in store.run_records(cut.outcome.campaign_id)]
    assert len(before) == 3 and statuses == ["ok"] * 3 + ["interrupted"]

    done = search_capacity(the_plan, options, results_dir, QuietReporter())
    assert not done.outcome.interrupted and done.outcome.failed == 0, run_errors(done.outcome)
    with Store(results_dir / "results.db") as store:
        views = {v.server: v for v in capacity_views(store, done.outcome.campaign_id)}
    assert [p.run_id for p in views["fast"].points][:3] == before  # kept, not run again
    for server, ceiling in CEILINGS.items():
        check_search(views[server], ceiling, options.settings)

    (compared,) = compare_capacities(list(views.values()), "fast", "slow")
    assert compared.ratio is not None and 0.3 <= compared.ratio <= 0.8  # about 50 ÷ 100
    assert compared.ratio_low is not None and compared.ratio_high is not None
    assert compared.ratio_low <= compared.ratio <= compared.ratio_high

    # A finished search answers from what is stored: the command runs nothing more.
    stored = sum(len(v.points) for v in views.values())
    shown = cli_json(capsys, "capacity", plan_path, "--slo", "skipped <= 1%", "--trial", "3s",
                     "--tolerance", "10%", "--results", results_dir)  # fmt: skip
    assert [s["answer"] for s in shown] == [v.as_dict()["answer"] for v in views.values()]
    for answer in (s["answer"] for s in shown):  # what the confirmations behind it did
        assert answer["achieved"] > 0 and 0 <= answer["skipped_share"] <= 0.01
    assert sum(len(s["probes"]) for s in shown) == stored
    compared_cli = cli_json(capsys, "compare", "--campaign", "ceiling-capacity", "--baseline",
                            "fast", "--candidate", "slow", "--results", results_dir)  # fmt: skip
    assert compared_cli[0]["ratio"] == compared.ratio

    report = write_report(results_dir / "results.db")
    assert '<section id="capacity">' in Path(report).read_text()
    with Store(results_dir / "results.db") as store:
        view = load_view(store, done.outcome.campaign_id, detail=False)
    images.export(view, tmp_path / "images", per_run=False)
    knees = sorted(p.name for p in (tmp_path / "images").glob("knee-*.png"))
    assert [k.split("-")[1] for k in knees] == ["fast", "slow"]


def cli_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main([*map(str, args), "--json"]) == 0
    shown: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return shown


def check_search(view: CapacityView, nominal: float, settings: SearchSettings) -> None:
    start = view.points[0]
    assert start.role == START and start.achieved is not None
    ceiling = start.achieved  # closed loop: the lock busy all the time, its own throughput
    assert nominal * 0.7 <= ceiling <= nominal
    assert len(view.points) <= settings.max_probes
    answer = view.answer
    assert answer is not None and answer.rate is not None, view.points
    assert answer.highest_pass is not None and answer.lowest_fail is not None
    assert answer.highest_pass <= answer.rate < answer.lowest_fail  # within its bracket
    # The bracket holds the ceiling, within what 3 s runs can resolve.
    low, high = RESOLUTION
    assert answer.highest_pass / high <= ceiling <= answer.lowest_fail / low, view.points
    for point in view.open_loop:
        assert point.passed or point.offered is None or point.offered > ceiling / 2, point
        # Far above the ceiling no run passes: the backlog grows by a fifth of the rate.
        if point.offered is not None and point.offered > ceiling * 1.3:
            assert not point.passed, point
        if point.offered is not None:  # Little's law: rate × -L × 2, at most 64
            assert point.clients == min(64, math.ceil(point.offered * 0.5 * 2))


@pytest.mark.parametrize(
    ("slo", "extra", "says"),
    [
        ("p99 10ms", "", "--slo: cannot read 'p99 10ms'"),
        ("p97 <= 10ms", "", "unknown metric 'p97'"),
        ("p99 <= 10ms", "rate = [100]", "capacity searches the rate itself"),
        ("skipped <= 1%", "", "the SLO bounds no latency"),
    ],
)
def test_what_cannot_be_searched_is_refused_before_anything_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    slo: str,
    extra: str,
    says: str,
) -> None:
    path = write_plan(tmp_path, extra=extra)
    results = tmp_path / "results"
    code = main(["capacity", str(path), "--slo", slo, "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert says in err and len(err.splitlines()) == 1, err
    assert not results.exists()


def test_a_workload_of_a_fixed_transaction_count_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_plan(tmp_path)
    text = re.sub(r'duration = "\w+"', "transactions = 100", path.read_text())
    path.write_text(text)
    results = tmp_path / "results"
    code = main(["capacity", str(path), "--slo", "p99 <= 10ms", "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "cannot be rate-limited" in err and len(err.splitlines()) == 1
    assert not results.exists()


def test_a_probe_runs_with_the_slos_bound_to_the_microsecond(tmp_path: Path) -> None:
    """-L takes the SLO's bound as written (":g" made 1234.567 ms into -L 1234.57)."""
    cell = search_cells(plan.load(write_plan(tmp_path, extra="")))[0]
    slo = parse_slo("p99 <= 1234.567ms")
    step = Next(GROW, 50.0, full_length=False)
    spec = probe_spec(cell, step, latency_limit_ms(cell, slo), CapacityOptions(slo), 1, (2,))
    run = command.Invocation(spec.workload, 1, spec.clients, spec.options, 3)
    argv = command.build_argv(Path("pgbench"), parse_version("pgbench (PostgreSQL) 18.1"), run, "b")
    assert argv[argv.index("-L") + 1] == "1234.567"
