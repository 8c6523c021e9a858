"""Small effects: the runs needed to decide a known small CPU cost, counted and timed.

    .venv/bin/python bench/small_effect.py [--spin 200] [--max-rounds 40] [--seconds 5]

Two builds of Debian's `postgresql-13` source (optimised, the build tests' configure options):
the base, and the same with a noinline loop of `--spin` iterations at every commit
(`tests/patches/0003-commit-spin.patch` with its count changed: once per select-only
transaction; 200 iterations are about 3 % of one, as counted). Three campaigns on one results
directory, each `repeats = "auto"` deciding on one metric, in this order:

- **instructions_per_tx**: the servers under callgrind (`count = "instructions"`), 300
  transactions per run, 1 client;
- **server_cpu_us_per_tx**: timed runs of `--seconds`, 2 clients, the server's CPU per
  committed transaction;
- **tps**: the same timed runs, deciding on TPS.

Decided before the run (this method replaces the first run's, 2026-11-28 12:13, kept in the
figure's History: it counted any answer as deciding the cost, and TPS and CPU time were
"decided" in 5 and 9 runs per side as within noise at the default ±10 % resolution, +1.12 % and
-1.68 %: answers to "is it beyond 10 %?", not a detection of the 3 % cost):
- Estimator: per metric, the runs per side until `repeats = "auto"` called the spin build
  **regressed** (the known truth); a campaign that ended otherwise (its maximum reached, or
  another answer: a wrong one) did not decide it, and its answer is shown. Every campaign asks
  for the narrowest precision the plan allows, 2.5 % (just wider than the 2 % threshold under
  which a change is noise), so "within noise" is answered only for an interval inside ±2.5 %,
  not for a 3 % cost hidden in a ±10 % one. The figure is runs on instructions ÷ runs on TPS
  (when TPS did not decide, at most runs on instructions ÷ `--max-rounds`: the interval [0,
  that]), and the wall time of each campaign.
- Design: one campaign per metric, in the order above, the two servers interleaved run by run
  within each (the campaign's own order); builds made once and cached before the first.
- Rounds: one decision per metric (min 3 runs per side; at most 6 counted, `--max-rounds`
  timed).
- Bar: runs on instructions ÷ runs on TPS ≤ 0.1 on the interval's upper end (the issue's goal:
  a tenth of what TPS needs).

The figure of record is the command without options: about 30 minutes on 2 cores alone when
the builds are cached (TPS at 3 % on this host rarely decides before its maximum).
Smoke test: --seconds 1 --max-rounds 3 --transactions 50 --output /tmp/small.md
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from figure import Bar, verdict_line, write_figure
from harness import HERE, Provenance, duration_text
from pgbenchlab import plan
from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.analysis.sequential import sequential_compare
from pgbenchlab.campaign import RESULTS_DB, NullReporter, remove_clusters, run_campaign
from pgbenchlab.store import Store

RATIO = Bar("runs on instructions ÷ runs on TPS ≤ 0.1", 0.1, at_most=True)
TEST_PATCH = HERE.parent / "tests" / "patches" / "0003-commit-spin.patch"
CONFIGURE = '["--without-readline", "--without-icu", "--without-zlib"]'
COUNTED_MAX = 6
PRECISION = 0.025  # the narrowest `precision` a plan may ask: wider than the 2 % threshold
BUILDS = """
[build.base]
source = "debian:postgresql-13"
configure = {configure}
[build.spin]
from = "base"
patches = ["{patch}"]
[[server]]
name = "base"
install = {{ build = "base" }}
settings = {{ shared_buffers = "64MB" }}
[[server]]
name = "spin"
install = {{ build = "spin" }}
settings = {{ shared_buffers = "64MB" }}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [{clients}]
"""
COUNTED = """
[campaign]
name = "counted"
repeats = "auto"
min_repeats = 3
max_repeats = {max_repeats}
precision = "{precision}"
decide = ["instructions_per_tx"]
[defaults]
transactions = {transactions}
warmup = "0s"
count = "instructions"
vacuum = "none"
checkpoint = false
"""
TIMED = """
[campaign]
name = "{metric}"
repeats = "auto"
min_repeats = 3
max_repeats = {max_repeats}
precision = "{precision}"
decide = ["{metric}"]
[defaults]
duration = "{seconds}s"
warmup = "1s"
"""
METRICS = (("instructions_per_tx", False), ("server_cpu_us_per_tx", False), ("tps", True))


@dataclass(frozen=True)
class Decision:
    metric: str
    runs_per_side: int
    verdict: ComparisonVerdict  # as `repeats = "auto"` judged the runs it made
    change: float
    wall_s: float

    @property
    def decided(self) -> bool:
        """The known cost detected: the spin build called regressed."""
        return self.verdict is ComparisonVerdict.REGRESSED


def spin_patch(iterations: int, where: Path) -> Path:
    """The test patch with its loop count changed (its text says the count twice more)."""
    text = TEST_PATCH.read_text().replace("500", str(iterations))
    path = where / f"commit-spin-{iterations}.patch"
    path.write_text(text)
    return path


def plan_text(args: argparse.Namespace, metric: str, patch: Path) -> str:
    if metric == "instructions_per_tx":
        head = COUNTED.format(
            max_repeats=COUNTED_MAX, precision=f"{PRECISION:.1%}", transactions=args.transactions
        )
        clients = 1
    else:
        head = TIMED.format(
            metric=metric,
            max_repeats=args.max_rounds,
            precision=f"{PRECISION:.1%}",
            seconds=args.seconds,
        )
        clients = 2
    return head + BUILDS.format(configure=CONFIGURE, patch=patch, clients=clients)


def decide(args: argparse.Namespace, metric: str, higher: bool, scratch: Path) -> Decision:
    text = plan_text(args, metric, spin_patch(args.spin, scratch))
    the_plan = plan.parse(text, f"{metric}.toml", base=scratch)
    started = time.monotonic()
    outcome = run_campaign(the_plan, scratch / "results", NullReporter())
    wall = time.monotonic() - started
    with Store(scratch / "results" / RESULTS_DB) as store:
        runs = store.run_records(outcome.campaign_id)
    by_repeat = {
        side: {r.repeat: float(r[metric]) for r in runs if r["server"] == side and r[metric]}
        for side in ("base", "spin")
    }
    paired = sorted(set(by_repeat["base"]) & set(by_repeat["spin"]))
    judged = sequential_compare(
        [(by_repeat["base"][k], by_repeat["spin"][k]) for k in paired],
        higher_is_better=higher,
        resolution=PRECISION,
    )
    done = Decision(metric, len(paired), judged.verdict, judged.relative_change, wall)
    print(f"{metric}: {done.runs_per_side} runs per side, {judged.reason}: {judged.verdict}")
    return done


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spin", type=int, default=200, help="loop iterations per commit")
    parser.add_argument("--max-rounds", type=int, default=40, help="timed runs per side, at most")
    parser.add_argument("--seconds", type=int, default=5, help="seconds a timed run measures")
    parser.add_argument("--transactions", type=int, default=300, help="per counted run")
    parser.add_argument("--output", type=Path, default=HERE / "small_effect.md")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    provenance = Provenance.start()
    scratch = Path(tempfile.mkdtemp(prefix="pgbl-small-effect-"))
    decisions: list[Decision] = []
    try:
        for metric, higher in METRICS:
            decisions.append(decide(args, metric, higher, scratch))
    finally:
        remove_clusters(scratch / "results")
    text = markdown(provenance, args, decisions)
    write_figure(args.output, text)
    print(text)


def ratio_interval(counted: Decision, tps: Decision, max_rounds: int) -> tuple[float, float]:
    """Runs on instructions ÷ runs on TPS: exact when both decided; an undecided TPS took more
    than its maximum, so the ratio lies below counted ÷ maximum."""
    if not counted.decided:
        return (counted.runs_per_side / max_rounds, float("inf"))
    if tps.decided:
        value = counted.runs_per_side / tps.runs_per_side
        return (value, value)
    return (0.0, counted.runs_per_side / max_rounds)


def markdown(provenance: Provenance, args: argparse.Namespace, found: list[Decision]) -> str:
    by_metric = {d.metric: d for d in found}
    low, high = ratio_interval(by_metric["instructions_per_tx"], by_metric["tps"], args.max_rounds)
    counted = by_metric["instructions_per_tx"]
    lines = [
        "# Small effects: runs to decide a known CPU cost, counted and timed",
        "",
        *provenance.header(),
        verdict_line([(RATIO, RATIO.verdict(low, high))]),
        "",
        f"Debian's `postgresql-13` built with configure {CONFIGURE}, and the same with a loop of "
        f"{args.spin} iterations at every commit: counted, it costs {counted.change:+.2%} "
        "instructions per select-only transaction (the calibrated effect). Each metric decided "
        'by its own `repeats = "auto"` campaign: counted runs of '
        f"{args.transactions} transactions at 1 client under callgrind (at most {COUNTED_MAX} "
        f"per side); timed runs of {args.seconds} s after 1 s of warmup at 2 clients (at most "
        f"{args.max_rounds} per side); each asking a precision of {PRECISION:.1%}, so only "
        '"regressed" decides the cost.',
        "",
        "| metric | runs per side | answer | change | wall time |",
        "|---|---|---|---|---|",
    ]
    for d in found:
        lines.append(
            f"| {d.metric} | {d.runs_per_side} | {d.verdict} | {d.change:+.2%} | "
            f"{duration_text(d.wall_s)} |"
        )
    shown = f"{low:.3f} – {high:.3f}" if low != high else f"{low:.3f}"
    lines += ["", f"Runs on instructions ÷ runs on TPS: {shown}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
