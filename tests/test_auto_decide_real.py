"""`repeats = "auto"` deciding on a metric other than TPS, for real: forced sequential scans
against index scans on select-only, decided on TPS and on pgbench's latency average, with an
equivalence margin in the plan; `compare --metric` then reads the same stored runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli import main
from support import INDEX_AGAINST_SEQSCAN, QuietReporter, require_installs

pytestmark = pytest.mark.server

DECIDE = f"""
[campaign]
name = "auto-decide"
repeats = "auto"
min_repeats = 3
max_repeats = 6
decide = ["tps", "latency_avg"]
equivalence = "5%"
[defaults]
duration = "1s"
warmup = "0s"
checkpoint = false
{INDEX_AGAINST_SEQSCAN}[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""


def test_a_known_change_is_decided_on_tps_and_the_latency_average(
    tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_installs("embedded")
    the_plan = plan.parse(DECIDE, "p.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.failed == 0
    assert outcome.answers == ["repeats auto: 1 of 1 answer(s) decided; every answer decided"]
    db = sqlite3.connect(results_dir / RESULTS_DB)
    rows = db.execute(
        "SELECT server, latency_avg_ms FROM latest_runs WHERE status = 'ok'"
    ).fetchall()
    db.close()
    assert len(rows) == 6 and all(latency > 0 for _, latency in rows)  # decided at round 3
    assert main(["compare", "--results", str(results_dir), "--baseline", "index",
                 "--candidate", "seqscan", "--metric", "latency_avg", "--equivalence",
                 "5%"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "latency_avg" in out and "regressed" in out
    assert "not equivalent within ±5%" in out
