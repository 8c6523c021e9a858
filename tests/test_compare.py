"""Comparisons on real runs: a known change is found with the right sign, and the command's
exit code gates CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.report.views import compare
from pgbenchlab.store import Store
from support import INDEX_AGAINST_SEQSCAN, QuietReporter, require_installs, run_errors

pytestmark = pytest.mark.server

# A change far beyond this host's noise (run-to-run CV up to 14 %): with index scans disabled
# every select-only transaction reads the whole accounts table, about 50x slower.
KNOWN_CHANGE = f"""
[campaign]
name = "scan"
repeats = 4
[defaults]
duration = "1s"
warmup = "0s"
{INDEX_AGAINST_SEQSCAN}[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""


def compare_cli(results: Path, baseline: str, candidate: str, *options: str) -> Any:
    argv = [sys.executable, "-m", "pgbenchlab.cli", "compare", "--results", str(results)]
    argv += ["--baseline", baseline, "--candidate", candidate, *options]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_forced_sequential_scans_regress_against_index_scans(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    the_plan = plan.parse(KNOWN_CHANGE, "p.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        changes = compare.within_campaign(store, "scan", "index", "seqscan", threshold=0.02)
    by_metric = {c.metric: c for c in changes}
    tps = by_metric["tps"]
    assert tps.relative_change < -0.5, tps
    assert tps.verdict == "regressed", tps.reason
    assert tps.ci_high is not None and tps.ci_high < 0
    # Swapped roles, the same evidence says "improved".
    with Store(results_dir / RESULTS_DB) as store:
        swapped = compare.within_campaign(store, "scan", "seqscan", "index", threshold=0.02)
    assert {c.metric: c.verdict for c in swapped}["tps"] == "improved"
    gate = compare_cli(results_dir, "index", "seqscan", "--fail-on-regression", "--json")
    assert gate.returncode == 1, gate.stderr
    assert '"verdict": "regressed"' in gate.stdout
    bad = compare_cli(results_dir, "index", "nope")
    assert bad.returncode == 2 and "no server 'nope'" in bad.stderr
