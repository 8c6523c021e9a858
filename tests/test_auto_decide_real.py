"""`repeats = "auto"` deciding on a metric other than TPS, for real: forced sequential scans
against index scans on select-only, decided on TPS and on pgbench's latency average, with an
equivalence margin in the plan; `compare --metric` then reads the same stored runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab.cli import main
from support import INDEX_AGAINST_SEQSCAN, decided_runs, one_cell_plan

pytestmark = pytest.mark.server

DECIDE = one_cell_plan(
    "auto-decide",
    campaign='repeats = "auto"\nmin_repeats = 3\nmax_repeats = 6\n'
    'decide = ["tps", "latency_avg"]\nequivalence = "5%"\n',
    defaults='duration = "1s"\ncheckpoint = false\n',
    servers=INDEX_AGAINST_SEQSCAN,
)


@pytest.mark.alone
def test_a_known_change_is_decided_on_tps_and_the_latency_average(
    tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = decided_runs(DECIDE, tmp_path, results_dir)
    latencies = [r.latency_avg_ms for r in runs]
    assert len(runs) == 6 and all(latency and latency > 0 for latency in latencies)  # round 3
    assert main(["compare", "--results", str(results_dir), "--baseline", "index",
                 "--candidate", "seqscan", "--metric", "latency_avg", "--equivalence",
                 "5%"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "latency_avg" in out and "regressed" in out
    assert "not equivalent within ±5%" in out
