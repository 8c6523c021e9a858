"""`repeats = "auto"` on real runs: a known change (forced sequential scans, ~50x slower on
select-only) is decided at the first rounds, in fewer runs than a fixed design needs to reach
the plan's precision with the noise these runs showed."""

from __future__ import annotations

import math
import sqlite3
import statistics
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.analysis.comparison import repeats_for_margin
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from support import INDEX_AGAINST_SEQSCAN, QuietReporter, require_installs

pytestmark = pytest.mark.server

KNOWN_CHANGE = f"""
[campaign]
name = "auto-scan"
repeats = "auto"
min_repeats = 3
max_repeats = 8
precision = "3%"
[defaults]
duration = "1s"
warmup = "0s"
checkpoint = false
{INDEX_AGAINST_SEQSCAN}[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""


def test_a_known_change_is_decided_in_fewer_runs_than_fixed_repeats_need(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    the_plan = plan.parse(KNOWN_CHANGE, "p.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.failed == 0
    assert outcome.answers == ["repeats auto: 1 of 1 answer(s) decided; every answer decided"]
    db = sqlite3.connect(results_dir / RESULTS_DB)
    rows = db.execute("SELECT server, tps FROM latest_runs WHERE status = 'ok'").fetchall()
    db.close()
    logs = {s: [math.log(t) for n, t in rows if n == s] for s in ("index", "seqscan")}
    per_side = len(logs["index"])
    assert per_side == len(logs["seqscan"]) == 3  # decided at the minimum: no round added
    # A fixed design sized for the plan's precision (the usual 80 % rule, with the noise these
    # runs showed, at least 1 %; here about 13 %, so some 300 runs per side) needs more.
    sd = max(0.01, statistics.fmean(statistics.stdev(v) for v in logs.values()))
    fixed = repeats_for_margin(sd, math.log1p(0.03), 0.95)
    assert per_side < fixed, (per_side, fixed, sd)
    change = statistics.fmean(logs["seqscan"]) - statistics.fmean(logs["index"])
    assert change < math.log(0.5)  # the right sign, far beyond noise
