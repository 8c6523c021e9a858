"""Campaign overhead: wall time of a whole campaign ÷ the time pgbench measured and warmed up.

Everything around the runs counts as overhead: discovering installations, initdb and server
start, `pgbench -i`, vacuum and CHECKPOINT before each run, parsing, log analysis, storing and
compressing raw outputs. The older harness measured here (pgbench-tools) took 2.44× the
configured run time for a small set; the requirement is ≤ 1.15.

Plans: the quickstart (embedded PostgreSQL 18, scale 10, 2 workloads × 3 client counts, 10 s runs
+ 3 s warmups) and a larger one (two major versions, two scales, two workloads, three client
counts, two repeats: 48 runs of 5 s + 1 s warmup). Each starts from an empty results directory,
so initdb and dataset initialisation are included.

Usage: .venv/bin/python bench/campaign_overhead.py [--skip-large]
Writes bench/campaign_overhead.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pgbenchlab import plan, runner
from pgbenchlab.cli import quickstart_plan_path
from pgbenchlab.telemetry.machine import describe_machine

HERE = Path(__file__).parent

LARGER = """
[campaign]
name = "larger"
repeats = 2
[defaults]
duration = "5s"
warmup = "1s"
[[server]]
name = "pg15"
install = "15"
[[server]]
name = "pg18"
install = "embedded"
[matrix]
scale = [1, 10]
workload = ["select-only", "tpcb-like"]
clients = [1, 2, 4]
"""


def measure(the_plan: plan.Plan) -> tuple[float, float, int]:
    """(wall seconds, measured + warmup seconds, failed runs) of one fresh campaign."""
    results = Path(tempfile.mkdtemp(prefix="pgbl-overhead-"))
    started = time.monotonic()
    outcome = runner.run_campaign(the_plan, results, runner.NullReporter())
    wall = time.monotonic() - started
    runner.remove_clusters(results)
    measured = sum((s.options.duration_s or 0) + s.options.warmup_s for s in the_plan.specs)
    return wall, float(measured), outcome.failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    plans = {"quickstart": plan.load(quickstart_plan_path())}
    if not args.skip_large:
        plans["larger"] = plan.parse(LARGER, "larger.toml", base=HERE)
    rows = []
    for name, the_plan in plans.items():
        wall, measured, failed = measure(the_plan)
        rows.append((name, len(the_plan.specs), measured, wall, wall / measured, failed))
        print(rows[-1])
    lines = [
        "# Campaign overhead: wall time ÷ measured time",
        "",
        f"Latest result: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{describe_machine()}. "
        "Script: `bench/campaign_overhead.py` (plans in its docstring). Requirement: ≤ 1.15.",
        "",
        "| plan | runs | measured + warmup s | wall s | ratio | failed runs |",
        "|---|---|---|---|---|---|",
        *(f"| {n} | {r} | {m:.0f} | {w:.1f} | {w / m:.3f} | {f} |" for n, r, m, w, _, f in rows),
        "",
        "Wall time includes installation discovery, initdb and server start, pgbench -i, vacuum",
        "and CHECKPOINT before every run, parsing, log analysis, storing and compression.",
    ]
    (HERE / "campaign_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
