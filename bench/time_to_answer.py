"""Time to an answer: `repeats = "auto"` against fixed repeats sized for the same precision.

Two servers of the same installation, one with a setting that costs throughput (by default
`log_min_duration_statement = 0`: every statement logged; its cost, measured and reported,
was about 28 % on 1 s select-only runs in the smoke test; `--setting` gives another, such as
one nearer 10 %). Per round, in alternating order:

- **auto**: a campaign with `repeats = "auto"` (min 3, max `--max-repeats`, `--precision`),
  which stops once the comparison is decided; its wall time and runs are measured;
- **fixed**: a campaign with the fixed repeats a user would choose for an interval within
  ±precision: `repeats_for_margin` (the 95 % interval, 80 % of campaigns) with the noise the
  auto campaign measured — the design must be sized before knowing whether anything changed.

The figure: auto's wall time ÷ fixed's (target ≤ 0.6), per round and the median, with both
verdicts. The figure of record: .venv/bin/python bench/time_to_answer.py (5 s runs, 1 s warmup,
precision 5 %, 2 rounds, about 10 min on a quiet machine; the planned time is printed first).
Single-client select-only runs on this virtual machine are fast while other work keeps its
CPUs awake and slower when they idle between transactions: run it alone. Smoke test: --seconds 1
--warmup 0 --rounds 1 --max-repeats 6 --fixed-cap 4 --output /tmp/tta.md.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import HERE, Provenance, duration_text
from pgbenchlab import plan
from pgbenchlab.analysis.comparison import compare, repeats_for_margin
from pgbenchlab.campaign import RESULTS_DB, NullReporter, remove_clusters, run_campaign
from pgbenchlab.store import Store

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
clients = [1]
"""


@dataclass(frozen=True)
class Campaign:
    kind: str
    runs_per_side: int
    wall_s: float
    change: float
    verdict: str
    log_sd: float | None
    decided: bool


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", default="log_min_duration_statement = 0")
    parser.add_argument("--precision", default="5%")
    parser.add_argument("--max-repeats", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
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
        name=name, repeats=repeats, seconds=args.seconds, warmup=args.warmup, setting=args.setting
    )
    return plan.parse(text, f"{name}.toml", base=HERE)


def conduct(kind: str, the_plan: plan.Plan) -> Campaign:
    results = Path(tempfile.mkdtemp(prefix="pgbl-tta-"))
    try:
        started = time.monotonic()
        outcome = run_campaign(the_plan, results, NullReporter())
        wall = time.monotonic() - started
        with Store(results / RESULTS_DB) as store:
            values = store.run_values(outcome.campaign_id)
    finally:
        remove_clusters(results)
    server = {s.cell_id: s.server for s in the_plan.specs}
    tps = {
        side: [v.tps for v in values if v.tps and server[v.cell_id] == side]
        for side in ("base", "changed")
    }
    found = compare(tps["base"], tps["changed"], higher_is_better=True)
    logs = [[math.log(t) for t in side] for side in tps.values()]
    sd = statistics.fmean(statistics.stdev(x) for x in logs) if min(map(len, logs)) > 1 else None
    if kind == "auto":
        decided = bool(outcome.answers) and "every answer decided" in outcome.answers[0]
        verdict = "decided" if decided else "open at the maximum"
    else:
        decided = found.verdict.value != "not_enough_data"
        verdict = found.verdict.value.replace("_", " ")
    return Campaign(kind, len(tps["base"]), wall, found.relative_change, verdict, sd, decided)


def fixed_repeats(auto: Campaign, precision: float) -> int:
    """What a fixed design needs for a ±precision interval with the noise auto measured."""
    if auto.log_sd is None:
        return 3
    return max(3, repeats_for_margin(auto.log_sd, math.log1p(precision), 0.95))


def main() -> None:
    args = parse_args()
    provenance = Provenance.start()
    precision = float(args.precision.rstrip("%")) / 100
    per_run = args.seconds + args.warmup + 2
    print(f"planned: {args.rounds} round(s); each auto campaign ≥ {6 * per_run} s", flush=True)
    rounds: list[tuple[Campaign, Campaign | None]] = []
    for round_no in range(1, args.rounds + 1):
        auto = conduct("auto", auto_plan(args, f"auto{round_no}"))
        if not auto.decided:  # no time to an answer to set against a fixed design
            print(f"round {round_no}: auto {auto}; open: no fixed campaign", flush=True)
            rounds.append((auto, None))
            continue
        repeats = fixed_repeats(auto, precision)
        if args.fixed_cap:
            repeats = min(repeats, args.fixed_cap)
        print(f"round {round_no}: auto {auto}; fixed needs {repeats} per side", flush=True)
        fixed = conduct("fixed", _plan(args, f"fixed{round_no}", f"repeats = {repeats}"))
        rounds.append((auto, fixed))
    text = markdown(provenance, args, rounds)
    args.output.write_text(text)
    print(text)


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    rounds: list[tuple[Campaign, Campaign | None]],
) -> str:
    decided = [a.wall_s / f.wall_s for a, f in rounds if f is not None]
    median = (
        f"Median auto ÷ fixed over the rounds auto decided: {statistics.median(decided):.2f} "
        "(target ≤ 0.6)."
        if decided
        else "Auto decided in no round: no ratio to state (more max_repeats or longer runs)."
    )
    capped = f" Fixed repeats capped at {args.fixed_cap} (a smoke test)." if args.fixed_cap else ""
    lines = [
        "# Time to an answer: repeats = auto against fixed repeats for the same precision",
        "",
        *provenance.header(),
        "",
        f"Embedded PostgreSQL, two servers (one with `{args.setting}`), scale 10, select-only, "
        f"1 client, {args.seconds} s runs ({args.warmup} s warmup); auto: min 3, max "
        f"{args.max_repeats}, precision {args.precision}; fixed: the repeats per side for a 95 % "
        "interval within ±precision in 80 % of campaigns, with the noise auto measured.",
        "",
        "| round | auto runs/side | auto time | fixed runs/side | fixed time | auto ÷ fixed "
        "| change (auto) | auto answer | fixed verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, (auto, fixed) in enumerate(rounds, start=1):
        against = (
            f"{fixed.runs_per_side} | {duration_text(fixed.wall_s)} | "
            f"{auto.wall_s / fixed.wall_s:.2f}"
            if fixed
            else "— | — | —"
        )
        lines.append(
            f"| {i} | {auto.runs_per_side} | {duration_text(auto.wall_s)} | {against} | "
            f"{auto.change:+.1%} | {auto.verdict} | {fixed.verdict if fixed else 'not run'} |"
        )
    lines += ["", median + capped]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
