"""Time to an answer: `repeats = "auto"` against fixed repeats sized before the noise is known.

Two servers of the same installation, one with a setting that costs throughput: by default
`log_min_duration_sample = 0` with `log_statement_sample_rate = 0.3`, three statements in ten
logged, about 10 % of select-only TPS at 2 clients here (the known change the figure asks for;
every statement logged cost about 30 % in a calibration run); `--setting` gives another. Per
round, the two designs in alternating order:

- **auto**: a campaign with `repeats = "auto"` (min 3, max `--max-repeats`, `--precision`),
  which stops once the comparison is decided; its wall time and runs are measured;
- **fixed**: the design a careful user follows when the noise is not known in advance (an
  internal pilot): a pilot campaign of 3 runs per server, then the fixed repeats per server
  for a 95 % interval within ±precision in 80 % of campaigns (`repeats_for_margin`), sized with
  the upper 80 % confidence limit of the pilot's standard deviation (a pilot's estimate from
  4 degrees of freedom is too small half the time), at most auto's maximum (a pilot that met
  an outlier asks for hundreds: a user caps it at the budget, as auto is), then a second
  campaign with the runs the pilot lacks. Both campaigns use one results directory, so the
  clusters and dataset are made once; its time is both together and its verdict uses all its
  runs.

Decided before the run:
- Estimator: the median over the rounds of auto's wall time ÷ fixed's, with its
  distribution-free 95 % interval (`figure.median_interval`). A round in which auto did not
  decide counts as infinitely slow (auto gave no answer), never as left out.
- Design: per round, the two designs in alternating order (a drift of the host favours
  neither); each design's clusters and dataset made afresh.
- Rounds: 6 (the least for a 95 % interval of the median: then it spans every round).
- Bar: auto ÷ fixed ≤ 0.6 on the interval's upper end.

The figure of record: .venv/bin/python bench/time_to_answer.py (2 clients, 5 s runs,
1 s warmup, precision 5 %, 6 rounds, about 30 min on a quiet machine). Two clients keep both
CPUs of this virtual machine busy: single-client runs here are bimodal (now and then a run goes
at nearly twice the speed, when other work keeps the CPUs out of their idle states: 3 of 156
runs in a trial with 1 client), and those outliers, not the designs, decided that trial.
Smoke test: --seconds 1 --warmup 0 --rounds 1 --max-repeats 6 --fixed-cap 4 --output /tmp/tta.md.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import scipy.stats

from figure import Bar, median_interval, verdict_line, write_figure
from harness import HERE, Provenance, duration_text
from pgbenchlab import plan
from pgbenchlab.analysis.comparison import compare, repeats_for_margin
from pgbenchlab.campaign import RESULTS_DB, NullReporter, remove_clusters, run_campaign
from pgbenchlab.store import Store

RATIO = Bar("auto ÷ fixed ≤ 0.6", 0.6, at_most=True)
PLAN = """
[campaign]
name = "{name}"
{repeats}
[defaults]
duration = "{seconds}s"
warmup = "{warmup}s"
[[server]]
name = "base"
install = "embedded"
settings = {{ shared_buffers = "256MB" }}
[[server]]
name = "changed"
install = "embedded"
settings = {{ shared_buffers = "256MB", {setting} }}
[matrix]
scale = [10]
workload = ["select-only"]
clients = [{clients}]
"""


PILOT = 3  # runs per server in the fixed design's pilot
SD_LIMIT = 0.80  # the pilot's standard deviation is taken at its upper 80 % confidence limit


@dataclass(frozen=True)
class Campaign:
    kind: str
    runs_per_side: int
    wall_s: float
    change: float
    verdict: str
    log_sd: float | None
    decided: bool


@dataclass(frozen=True)
class Measured:
    """What one or more campaigns in a results directory measured."""

    wall_s: float
    tps: dict[str, list[float]]
    answers: tuple[str, ...]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--setting", default="log_min_duration_sample = 0, log_statement_sample_rate = 0.3"
    )
    parser.add_argument("--precision", default="5%")
    parser.add_argument("--max-repeats", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--fixed-cap", type=int, default=None, help="smoke tests only: at most this many fixed"
    )
    parser.add_argument("--output", type=Path, default=HERE / "time_to_answer.md")
    return parser.parse_args()


def auto_plan(args: argparse.Namespace, name: str) -> plan.Plan:
    repeats = f'repeats = "auto"\nmax_repeats = {args.max_repeats}\nprecision = "{args.precision}"'
    return _plan(args, name, repeats)


def _plan(args: argparse.Namespace, name: str, repeats: str) -> plan.Plan:
    text = PLAN.format(
        name=name,
        repeats=repeats,
        seconds=args.seconds,
        warmup=args.warmup,
        setting=args.setting,
        clients=args.clients,
    )
    return plan.parse(text, f"{name}.toml", base=HERE)


def measure(the_plan: plan.Plan, results: Path) -> Measured:
    started = time.monotonic()
    outcome = run_campaign(the_plan, results, NullReporter())
    wall = time.monotonic() - started
    with Store(results / RESULTS_DB) as store:
        values = store.run_values(outcome.campaign_id)
    server = {s.cell_id: s.server for s in the_plan.specs}
    tps = {
        side: [v.tps for v in values if v.tps and server[v.cell_id] == side]
        for side in ("base", "changed")
    }
    return Measured(wall, tps, tuple(outcome.answers))


def pooled_log_sd(tps: dict[str, list[float]]) -> float | None:
    """The two servers' pooled standard deviation of log TPS (None below two runs each)."""
    logs = [[math.log(t) for t in side] for side in tps.values()]
    if min(map(len, logs)) < 2:
        return None
    return statistics.fmean(statistics.stdev(x) for x in logs)


def upper_limit(sd: float, runs_per_side: int) -> float:
    """The upper SD_LIMIT confidence limit of a pooled standard deviation (chi-square)."""
    freedom = 2 * (runs_per_side - 1)
    return sd * math.sqrt(freedom / scipy.stats.chi2.ppf(1 - SD_LIMIT, freedom))


def summarise(kind: str, found: Measured, decided: bool, verdict: str) -> Campaign:
    change = compare(found.tps["base"], found.tps["changed"], higher_is_better=True)
    sd = pooled_log_sd(found.tps)
    return Campaign(
        kind, len(found.tps["base"]), found.wall_s, change.relative_change, verdict, sd, decided
    )


def conduct_auto(args: argparse.Namespace, round_no: int) -> Campaign:
    results = Path(tempfile.mkdtemp(prefix="pgbl-tta-"))
    try:
        found = measure(auto_plan(args, f"auto{round_no}"), results)
    finally:
        remove_clusters(results)
    decided = bool(found.answers) and "every answer decided" in found.answers[0]
    return summarise("auto", found, decided, "decided" if decided else "open at the maximum")


def conduct_fixed(args: argparse.Namespace, round_no: int, precision: float) -> Campaign:
    results = Path(tempfile.mkdtemp(prefix="pgbl-tta-"))
    try:
        pilot = measure(_plan(args, f"pilot{round_no}", f"repeats = {PILOT}"), results)
        sized = fixed_repeats(pilot, precision)
        repeats = min(sized, args.fixed_cap or args.max_repeats)  # auto's budget, at most
        print(f"round {round_no}: fixed design sized at {sized}, runs {repeats}", flush=True)
        found = pilot
        if repeats > PILOT:
            rest = measure(_plan(args, f"fixed{round_no}", f"repeats = {repeats - PILOT}"), results)
            both = {k: pilot.tps[k] + rest.tps[k] for k in pilot.tps}
            found = Measured(pilot.wall_s + rest.wall_s, both, ())
    finally:
        remove_clusters(results)
    verdict = compare(found.tps["base"], found.tps["changed"], higher_is_better=True).verdict
    return summarise(
        "fixed", found, verdict.value != "not_enough_data", verdict.value.replace("_", " ")
    )


def fixed_repeats(pilot: Measured, precision: float) -> int:
    """Runs per server for a ±precision interval, sized with the pilot's upper noise limit."""
    sd = pooled_log_sd(pilot.tps)
    if sd is None:
        return PILOT
    limit = upper_limit(sd, min(map(len, pilot.tps.values())))
    return max(PILOT, repeats_for_margin(limit, math.log1p(precision), 0.95))


def main() -> None:
    args = parse_args()
    provenance = Provenance.start()
    precision = float(args.precision.rstrip("%")) / 100
    per_run = args.seconds + args.warmup + 2
    print(f"planned: {args.rounds} round(s); each auto campaign ≥ {6 * per_run} s", flush=True)
    rounds: list[tuple[Campaign, Campaign]] = []
    for round_no in range(1, args.rounds + 1):
        if round_no % 2:  # alternating order, so a drift of the host favours neither design
            auto = conduct_auto(args, round_no)
            fixed = conduct_fixed(args, round_no, precision)
        else:
            fixed = conduct_fixed(args, round_no, precision)
            auto = conduct_auto(args, round_no)
        print(f"round {round_no}: {auto}\n         {fixed}", flush=True)
        rounds.append((auto, fixed))
    text = markdown(provenance, args, rounds)
    write_figure(args.output, text)
    print(text)


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    rounds: list[tuple[Campaign, Campaign]],
) -> str:
    ratios = [a.wall_s / f.wall_s if a.decided else math.inf for a, f in rounds]
    middle, low, high = median_interval(ratios)
    verdict = RATIO.verdict(low, high)
    median = (
        f"Median auto ÷ fixed over all {len(rounds)} rounds: {middle:.2f}, distribution-free "
        f"95 % interval {low:.2f} – {high:.2f} (an undecided auto round counts as infinite)."
    )
    capped = f" Fixed repeats capped at {args.fixed_cap} (a smoke test)." if args.fixed_cap else ""
    lines = [
        "# Time to an answer: repeats = auto against fixed repeats for the same precision",
        "",
        *provenance.header(),
        verdict_line([(RATIO, verdict)]),
        "",
        f"Embedded PostgreSQL, two servers (one with `{args.setting}`), scale 10, select-only, "
        f"{args.clients} clients, {args.seconds} s runs ({args.warmup} s warmup); auto: min 3, max "
        f"{args.max_repeats}, precision {args.precision}; fixed: the repeats per side for a 95 % "
        "interval within ±precision in 80 % of campaigns, sized after a pilot of "
        f"{PILOT} runs per server with the upper {SD_LIMIT:.0%} confidence limit of its standard "
        "deviation, at most auto's maximum (the pilot's runs count, and its time).",
        "",
        "| round | auto runs/side | auto time | fixed runs/side | fixed time | auto ÷ fixed "
        "| change (auto) | auto answer | fixed verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, (auto, fixed) in enumerate(rounds, start=1):
        against = (
            f"{fixed.runs_per_side} | {duration_text(fixed.wall_s)} | "
            f"{auto.wall_s / fixed.wall_s:.2f}"
        )
        lines.append(
            f"| {i} | {auto.runs_per_side} | {duration_text(auto.wall_s)} | {against} | "
            f"{auto.change:+.1%} | {auto.verdict} | {fixed.verdict} |"
        )
    lines += ["", median + capped]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
