"""A repeat that shared the host with other work is named as the likely cause of the variation.

A real campaign (PostgreSQL 18, embedded) runs one cell three times; during the second measured
run CPU-burning processes compete with the server and pgbench on this 2-core machine. The
telemetry must see the other load, the diagnosis store it, and the report's advice name that run
when it explains the variation between the repeats. `compare` prints the same cause (checked
on a synthetic database, where the rendering is the question).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest_report import SyntheticPlan, add_diagnosis, write_synthetic
from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, remove_clusters, run_campaign
from pgbenchlab.plan import RunSpec
from pgbenchlab.report.views import compare
from pgbenchlab.report.views.advice import likely_cause
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import Store
from support import QuietReporter, require_installs, run_errors

# alone: it loads the machine on purpose, and measures that load
pytestmark = pytest.mark.alone

PLAN = """
[campaign]
name = "neighbour"
repeats = 3
order = "sequential"

[defaults]
duration = "3s"
warmup = "1s"

[matrix]
scale = 1
workload = ["select-only"]
clients = [2]

[[server]]
name = "pg18"
install = "embedded"
"""
# Two per CPU of this machine, each in its own session: with the kernel's autogroup scheduling
# a session shares CPU as one group, so burners in the test's session would only compete with
# pgbench. This way they take most of the CPUs, an effect far beyond the host's noise.
BURNERS = 4


class Neighbour(QuietReporter):
    """Starts CPU burners when the second run starts measuring and stops them after it."""

    def __init__(self) -> None:
        super().__init__()
        self.measured = 0
        self.burners: list[subprocess.Popen[bytes]] = []
        self.disturbed_key = ""

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring":
            self.measured += 1
            if self.measured == 2:
                self.disturbed_key = spec.run_key
                burn = [sys.executable, "-c", "while True: pass"]
                self.burners = [
                    subprocess.Popen(burn, start_new_session=True) for _ in range(BURNERS)
                ]
        elif self.burners:
            self.stop()

    def stop(self) -> None:
        for burner in self.burners:
            burner.kill()
            burner.wait()
        self.burners = []


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    require_installs("embedded")
    base = tmp_path_factory.mktemp("neighbour")
    results = base / "results"
    reporter = Neighbour()
    try:
        outcome = run_campaign(plan.parse(PLAN, "neighbour.toml", base=base), results, reporter)
        assert outcome.failed == 0, run_errors(outcome)
        yield results / RESULTS_DB, reporter.disturbed_key
    finally:
        reporter.stop()
        remove_clusters(results)


def other_loads(db: Path) -> dict[str, float]:
    with Store(db) as store:
        rows = store.db.execute(
            "SELECT r.run_key, d.details_json FROM runs r JOIN run_diagnosis d ON d.run_id = r.id"
        ).fetchall()
    return {str(key): json.loads(details)["other_load_share"] for key, details in rows}


@pytest.mark.server
def test_the_diagnosis_stores_the_other_load(campaign: tuple[Path, str]) -> None:
    db, disturbed = campaign
    loads = other_loads(db)
    assert len(loads) == 3
    # The burners take most of the CPU the host has left. Whatever else shares this host (other
    # load of its own) touches every run alike, so the test asks for the rise above the busiest
    # other run, as a share of what that run left idle: a quiet host (0.02 → 0.7) and a host
    # already half busy with other work (0.6 → 0.8) both show it.
    busiest = max(load for key, load in loads.items() if key != disturbed)
    assert (loads[disturbed] - busiest) / (1 - busiest) >= 1 / 3, loads


@pytest.mark.server
def test_the_advice_names_the_run_that_shared_the_host(campaign: tuple[Path, str]) -> None:
    db, disturbed = campaign
    with Store(db) as store:
        view = load_view(store, 1, detail=False)
    run = next(r for r in view.runs if r.run_key == disturbed)
    others = [r for r in view.runs if r.run_key != disturbed]
    assert run.tps is not None and all(r.tps and r.tps > run.tps for r in others)
    cause = likely_cause(view.runs)
    assert cause is not None and cause.startswith(f"run {run.id} (")
    assert "shared the host" in cause
    variation = next(a for a in view.advice if a.kind == "high-variation")
    assert cause in variation.message


def test_compare_names_the_likely_cause_of_high_variation(tmp_path: Path) -> None:
    plan_ = SyntheticPlan(workloads=("select-only",), clients=(1,))
    db = write_synthetic(tmp_path, plan_)
    with sqlite3.connect(db) as connection:
        ids = [r[0] for r in connection.execute("SELECT id FROM runs ORDER BY id")]
        slow = ids[0]  # the first repeat of pg15's only cell
        connection.execute("UPDATE runs SET tps = tps / 2 WHERE id = ?", (slow,))
    for run_id in ids:
        share = 0.45 if run_id == slow else 0.02
        add_diagnosis(db, run_id, "server_cpu_bound", [], {"other_load_share": share})
    with Store(db) as store:
        changes = compare.within_campaign(store, None, "pg15", "pg18", threshold=0.02)
    text = compare.as_text(changes, "pg15", "pg18")
    assert "High variation between repeats:" in text
    assert "baseline: TPS varies with CV" in text
    assert f"likely cause: run {slow} (-" in text and "other processes used 45% of the CPUs" in text
    assert json.loads(compare.as_json(changes, []))["changes"][0]["warnings"]
