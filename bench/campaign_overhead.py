"""Campaign overhead: wall time of a whole campaign as a user runs it ÷ the time pgbench ran.

The campaign runs through the real command line (`pgbenchlab run PLAN` / `pgbenchlab
quickstart`, a fresh process on an empty results directory), so the wall time holds everything
a user waits for: interpreter start, discovering installations, initdb and server start,
`pgbench -i`, vacuum and CHECKPOINT before each run, parsing, log analysis, storing and
compressing raw outputs, the summary, and the HTML report the command writes at the end. The
report's share is timed too: from the summary's arrival on stdout to the process's exit.

Two denominators: the measured time (the sum of the runs' durations, what the results are
about) and the measured + warmup time (pgbench also runs during warmups, measuring nothing).
The older harness measured here (pgbench-tools) took 2.44× the configured run time for a small
set; the requirement is ≤ 1.15.

Plans: the quickstart (embedded PostgreSQL 18, scale 10, 2 workloads × 3 client counts, 10 s
runs + 3 s warmups) and a larger one (two major versions, two scales, two workloads, three
client counts, two repeats: 48 runs of 5 s + 1 s warmup).

Decided before the run:
- Estimator: wall ÷ (measured + warmup) of the quickstart, the median over the rounds with its
  distribution-free 95 % interval (`figure.median_interval`); the larger plan, run once, is
  shown beside it without a verdict. Wall ÷ measured alone is shown too.
- Design: each campaign from an empty results directory, through the command line.
- Rounds: 6 quickstarts (the least for a 95 % interval of the median), then the larger plan.
- Bar: wall ÷ (measured + warmup) ≤ 1.15 on the interval's upper end (the time pgbench ran,
  warmups included: pgbench runs then too).

The figure of record: .venv/bin/python bench/campaign_overhead.py   (about 15 min)
--skip-large: the quickstarts alone; --rounds N. Writes bench/campaign_overhead.md
(--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from figure import Bar, median_interval, verdict_line, write_figure
from harness import HERE, Provenance
from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, remove_clusters
from pgbenchlab.cli import quickstart_plan_path
from pgbenchlab.results import FAILED
from pgbenchlab.store import Store

CLI = Path(sys.executable).with_name("pgbenchlab")  # the virtualenv's entry point
OVERHEAD = Bar("wall ÷ (measured + warmup) ≤ 1.15", 1.15, at_most=True)

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


@dataclass(frozen=True)
class Row:
    name: str
    command: str  # the pgbenchlab command, with placeholders for temporary paths
    runs: int
    measured_s: float
    warmup_s: float
    wall_s: float
    report_s: float  # from the summary on stdout to the process's exit: the HTML report
    failed: int

    @property
    def ratio(self) -> float:
        """Wall time ÷ the time pgbench ran (measured and warmup)."""
        return self.wall_s / (self.measured_s + self.warmup_s)

    def cells(self) -> list[str]:
        return [
            self.name,
            f"`{self.command}`",
            str(self.runs),
            f"{self.measured_s:.0f}",
            f"{self.warmup_s:.0f}",
            f"{self.wall_s:.1f}",
            f"{self.report_s:.1f}",
            f"{self.wall_s / self.measured_s:.3f}",
            f"{self.ratio:.3f}",
            str(self.failed),
        ]


def timed_cli(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, seconds after the last stdout line) of one CLI process. Unbuffered, the
    summary reaches the pipe when printed, just before the HTML report is written."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile("w+") as errors:
        started = time.monotonic()
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        assert process.stdout is not None
        last_line = None
        for _ in process.stdout:
            last_line = time.monotonic()
        code = process.wait()
        ended = time.monotonic()
        errors.seek(0)
        if code not in (0, 1) or last_line is None:  # 1: some runs failed, counted later
            raise SystemExit(f"{argv} exited {code} (no summary?):\n{errors.read()}")
    return ended - started, ended - last_line


def failed_runs(results: Path, campaign: str) -> int:
    with Store(results / RESULTS_DB) as store:
        return sum(r.status == FAILED for r in store.run_records(store.campaign_id(campaign)))


def measure(name: str, plan_path: Path | None, the_plan: plan.Plan) -> Row:
    """One campaign from an empty results directory, through the CLI (``plan_path`` None:
    `pgbenchlab quickstart`); clusters and results are removed afterwards, outside the time."""
    results = Path(tempfile.mkdtemp(prefix="pgbl-overhead-"))
    args = ["quickstart"] if plan_path is None else ["run", str(plan_path)]
    shown = ["quickstart"] if plan_path is None else ["run", plan_path.name]
    try:
        wall, report = timed_cli([str(CLI), *args, "--results", str(results), "-q"])
        failed = failed_runs(results, the_plan.name)
    finally:
        remove_clusters(results)
        shutil.rmtree(results, ignore_errors=True)
    specs = the_plan.specs
    return Row(
        name,
        " ".join(["pgbenchlab", *shown, "--results", "EMPTY_DIR", "-q"]),
        len(specs),
        sum(s.options.duration_s or 0 for s in specs),
        sum(s.options.warmup_s for s in specs),
        wall,
        report,
        failed,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-large", action="store_true", help="the quickstarts alone")
    parser.add_argument("--rounds", type=int, default=6, help="quickstarts")
    parser.add_argument("--output", type=Path, default=HERE / "campaign_overhead.md")
    args = parser.parse_args()
    provenance = Provenance.start()
    quickstart = plan.load(quickstart_plan_path())
    rows = [measure(f"quickstart {n + 1}", None, quickstart) for n in range(args.rounds)]
    if not args.skip_large:
        with tempfile.TemporaryDirectory() as work:
            larger = Path(work) / "larger.toml"
            larger.write_text(LARGER)
            rows.append(measure("larger", larger, plan.load(larger)))
    for found in rows:
        print(found, flush=True)
    text = markdown(provenance, rows)
    write_figure(args.output, text)
    print(text)


def markdown(provenance: Provenance, rows: list[Row]) -> str:
    header = (
        "| plan | command | runs | measured s | warmup s | wall s | of which the HTML report s "
        "| wall ÷ measured | wall ÷ (measured + warmup) | failed runs |"
    )
    quick = [r.ratio for r in rows if r.name.startswith("quickstart")]
    middle, low, high = median_interval(quick)
    lines = [
        "# Campaign overhead: wall time ÷ the time pgbench ran",
        "",
        *provenance.header(),
        verdict_line([(OVERHEAD, OVERHEAD.verdict(low, high))]),
        "",
        "Each campaign ran through the command line on an empty results directory; all "
        "rows are from this run of `bench/campaign_overhead.py` (plans, estimator, rounds and "
        "bar in its docstring, decided before the run).",
        "",
        f"Quickstart, wall ÷ (measured + warmup) over {len(quick)} rounds: median "
        f"{middle:.3f}, distribution-free 95 % interval {low:.3f} – {high:.3f}.",
        "",
        header,
        "|" + "---|" * 10,
        *("| " + " | ".join(r.cells()) + " |" for r in rows),
        "",
        "Wall time: the whole `pgbenchlab` process, from start to exit: installation discovery,",
        "initdb and server start, pgbench -i, vacuum and CHECKPOINT before every run, parsing,",
        "log analysis, storing and compression, the summary and the HTML report (its share: from",
        "the summary's arrival on stdout to the exit). Measured: the runs' configured durations;",
        "warmup: their warmups, during which pgbench runs but measures nothing.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
