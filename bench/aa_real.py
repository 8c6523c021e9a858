"""A/A on real runs: two identical servers, every cell interleaved, compared cell by cell.

Both servers are the same installation with the same settings, so every "improved" or
"regressed" verdict is a false alarm. The requirement: fewer than 5 % of comparisons called
changed at the default settings (threshold 2 %, 95 % confidence).

A false-alarm rate says little if nothing is decided: "within noise" needs the estimate inside
±2 % and the whole 95 % interval inside ±10 % (docs/statistics.md §3.5). With a between-run CV
of 6–14 % that takes about 8–12 repeats per side (at CV 6 % and 10 repeats, about half of A/A
cells; at 14 % almost none), so the default is 12 repeats on four cells rather than few repeats
on many; the result counts the comparisons decided (within noise, improved, regressed) against
those with not enough data.

Decided before the run:
- Estimator: the share of comparisons called changed (improved or regressed), with its exact
  (Clopper–Pearson) 95 % interval. The comparisons of one cell (TPS, p50, p99) are not
  independent, so the interval is, if anything, too narrow.
- Design: one campaign, the two servers' runs in random interleaved order (seed 7).
- Rounds: 12 repeats per server and cell, 4 cells, 3 metrics: 12 comparisons.
- Bar: fewer than 5 % called changed, on the interval's upper end. With no false call, that
  takes at least 72 comparisons (its upper end is 1 − 0.025^(1/n)); 12 cannot show it, and the
  verdict says so. The false-call rate at scale is shown in simulation (docs/statistics.md).

The figure of record: .venv/bin/python bench/aa_real.py
select-only and tpcb-like at 1 and 4 clients, 12 repeats per side of 10 s runs (2 s warmup):
96 runs, about 22 min. --repeats, --seconds, --warmup, --clients, --workloads override the
defaults; the planned time is printed first. Writes bench/aa_real.md (--output elsewhere for a
smoke test).
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from scipy.stats import binomtest

from figure import Bar, verdict_line, write_figure
from harness import HERE, Provenance, duration_text
from pgbenchlab import plan
from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.campaign import RESULTS_DB, NullReporter, remove_clusters, run_campaign
from pgbenchlab.cli import run_seconds
from pgbenchlab.report.views import compare
from pgbenchlab.report.views.compare import CellChange
from pgbenchlab.report.views.metrics import METRICS
from pgbenchlab.store import Store

SETUP_ESTIMATE_S = 20  # two initdbs and two scale-10 datasets
VERDICTS = (
    ComparisonVerdict.WITHIN_NOISE,
    ComparisonVerdict.IMPROVED,
    ComparisonVerdict.REGRESSED,
    ComparisonVerdict.NOT_ENOUGH_DATA,
)
FALSE_CALLS = Bar("< 5 % called changed", 0.05, at_most=True)

PLAN = """
[campaign]
name = "aa"
repeats = {repeats}
order = "random"
seed = 7
[defaults]
duration = "{seconds}s"
warmup = "{warmup}s"
[[server]]
name = "a"
install = "embedded"
settings = {{ shared_buffers = "256MB" }}
[[server]]
name = "b"
install = "embedded"
settings = {{ shared_buffers = "256MB" }}
[matrix]
scale = [10]
workload = {workloads}
clients = {clients}
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=12, help="runs per cell and server")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--workloads", default="select-only,tpcb-like")
    parser.add_argument("--clients", default="1,4")
    parser.add_argument("--output", type=Path, default=HERE / "aa_real.md")
    return parser.parse_args()


def the_plan(args: argparse.Namespace) -> plan.Plan:
    text = PLAN.format(
        repeats=args.repeats,
        seconds=args.seconds,
        warmup=args.warmup,
        workloads=[w.strip() for w in args.workloads.split(",")],  # a TOML list of strings
        clients=[int(c) for c in args.clients.split(",")],
    )
    return plan.parse(text, "aa.toml", base=HERE)


def main() -> None:
    args = parse_args()
    provenance = Provenance.start()
    aa = the_plan(args)
    planned = SETUP_ESTIMATE_S + sum(run_seconds(s) for s in aa.specs)
    print(f"planned: {len(aa.specs)} runs, about {duration_text(planned)}", flush=True)
    results = Path(tempfile.mkdtemp(prefix="pgbl-aa-"))
    try:
        outcome = run_campaign(aa, results, NullReporter())
        with Store(results / RESULTS_DB) as store:
            changes = compare.within_campaign(store, "aa", "a", "b", threshold=0.02)
    finally:
        remove_clusters(results)
    text = markdown(provenance, args, len(aa.specs), outcome.failed, changes)
    write_figure(args.output, text)
    print(text)


def verdict_table(changes: list[CellChange]) -> list[str]:
    """Comparisons by metric and verdict, with the decided ones (not "not enough data")."""
    lines = [
        "| metric | " + " | ".join(v.replace("_", " ") for v in VERDICTS) + " | decided |",
        "|---|" + "---|" * (len(VERDICTS) + 1),
    ]
    compared = dict.fromkeys(c.metric for c in changes)  # in the comparison's order
    groups = [(METRICS[m].label, [c for c in changes if c.metric == m]) for m in compared]
    for label, mine in [*groups, ("all", changes)]:
        counts = Counter(c.verdict for c in mine)
        decided = len(mine) - counts[ComparisonVerdict.NOT_ENOUGH_DATA]
        lines.append(
            f"| {label} | " + " | ".join(str(counts[v]) for v in VERDICTS) + f" | {decided} of "
            f"{len(mine)} |"
        )
    return lines


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    runs: int,
    failed: int,
    changes: list[CellChange],
) -> str:
    counts = Counter(c.verdict for c in changes)
    called = counts[ComparisonVerdict.IMPROVED] + counts[ComparisonVerdict.REGRESSED]
    decided = len(changes) - counts[ComparisonVerdict.NOT_ENOUGH_DATA]
    share = f"{called / len(changes):.1%}" if changes else "–"
    interval = binomtest(called, len(changes)).proportion_ci(0.95) if changes else None
    # The bar is strict (< 5 %): an upper end of exactly 5 % does not meet it.
    verdict = (
        "not shown"
        if interval is None
        else FALSE_CALLS.verdict(interval.low, interval.high)
        if interval.high != FALSE_CALLS.limit
        else "not shown"
    )
    bounds = f"{interval.low:.1%} – {interval.high:.1%}" if interval else "–"
    lines = [
        "# A/A on real runs: identical servers compared cell by cell",
        "",
        *provenance.header(),
        verdict_line([(FALSE_CALLS, verdict)]),
        "",
        "Two identical embedded PostgreSQL 18 servers, scale 10, workloads "
        f"{args.workloads.replace(',', ', ')}; clients {args.clients.replace(',', ', ')}; "
        f"{args.repeats} repeats per server of {args.seconds} s runs ({args.warmup} s warmup) in "
        f"random interleaved order: {runs} runs, {failed} failed. All figures are from this run "
        "of `bench/aa_real.py`.",
        "",
        f"Comparisons (cells × metrics TPS, p50, p99): {len(changes)}; called changed: "
        f"{called} ({share}; exact 95 % interval {bounds}). Requirement: < 5 %, judged on the "
        "interval's upper end. Decided (within noise, "
        f"improved or regressed): {decided} of {len(changes)}; within noise: "
        f"{counts[ComparisonVerdict.WITHIN_NOISE]}.",
        "",
        *verdict_table(changes),
        "",
        "Within noise: estimate inside ±2 % and the whole 95 % interval inside ±10 %; not enough "
        "data: neither that nor a change beyond 2 % shown (docs/statistics.md §3.5).",
        "",
        "```",
        compare.as_text(changes, "a", "b"),
        "```",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
