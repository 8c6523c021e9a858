"""Capacity search against the naive sweep: wall time to a capacity answer, and the answers.

The same server (the embedded PostgreSQL, a fresh cluster per campaign) and the same workload:
every transaction takes one advisory lock and sleeps ``--sleep-ms`` (10 ms: a ceiling of 100
TPS that holds on a loaded machine). The same SLO (``skipped <= 1%`` with -L 500 ms, the
backlog check). `pgbenchlab capacity` searches with short trials and confirms at full length;
the naive sweep runs every rate of a ladder at full length (`pgbenchlab run` with a `rate`
axis, in ascending order: from half the ceiling to 1.2 × it in steps of the search's
tolerance, a range the naive user is given for free), stops at the first rate that fails, as
a person at the keyboard would, and answers with the highest rate below it, judged by the same
verdict.

Decided before the run:
- Estimator: the median over the rounds of search ÷ sweep wall time, with its distribution-
  free 95 % interval (`figure.median_interval`); the answers' agreement in every round (the
  sweep's answer within the search's bracket widened by one ladder step).
- Design: per round, the two methods in alternating order, each from an empty results
  directory (server start and dataset included).
- Rounds: 6 (the least for a 95 % interval of the median).
- Bar: search ÷ sweep ≤ 0.4 on the interval's upper end; the answers agreeing in every round.

The figure of record: .venv/bin/python bench/capacity.py   (about 50 min: 6 rounds, 30 s runs)
Smoke test: .venv/bin/python bench/capacity.py --rounds 1 --duration 3 --trial 3
--output /tmp/capacity.md
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from figure import Bar, median_interval, verdict_line, write_figure
from harness import HERE, Provenance
from pgbenchlab import plan
from pgbenchlab.analysis.capacity import SearchSettings
from pgbenchlab.analysis.slo import judge, parse_slo
from pgbenchlab.campaign import NullReporter, remove_clusters, run_campaign
from pgbenchlab.campaign.capacity import CapacityOptions, figures, search_capacity
from pgbenchlab.plan import RunSpec
from pgbenchlab.results import RunResult, RunStatus

SLO = "skipped <= 1%"
TOLERANCE = 0.05
RATIO = Bar("search ÷ sweep ≤ 0.4", 0.4, at_most=True)
AGREE = Bar("answers agreeing", 1.0, at_most=False)  # the share of rounds that agree

PLAN = """
[campaign]
name = "{name}"
order = "sequential"
[defaults]
duration = "{duration}s"
warmup = "0s"
vacuum = "none"
checkpoint = false
[[server]]
name = "pg18"
install = "embedded"
[matrix]
scale = [1]
workload = [{{ name = "ceiling", script = "ceiling.sql", define = {{ sleep = "{sleep}" }} }}]
clients = [2]
latency_limit = "500ms"
{rates}
"""


@dataclass(frozen=True)
class Timed:
    method: str
    seconds: float
    runs: int
    answer: float | None
    bracket: tuple[float | None, float | None]


def write_plan(work: Path, name: str, args: argparse.Namespace, rates: list[float]) -> Path:
    (work / "ceiling.sql").write_text("SELECT pg_advisory_xact_lock(1), pg_sleep(:sleep);\n")
    path = work / f"{name}.toml"
    axis = f"rate = {rates}" if rates else ""
    sleep = args.sleep_ms / 1000
    path.write_text(PLAN.format(name=name, duration=args.duration, sleep=sleep, rates=axis))
    return path


def ladder(ceiling: float) -> list[float]:
    rates, rate = [], ceiling / 2
    while rate <= ceiling * 1.2:
        rates.append(round(rate, 1))
        rate += ceiling * TOLERANCE
    return rates


def timed_search(work: Path, args: argparse.Namespace) -> Timed:
    the_plan = plan.load(write_plan(work, "search", args, []))
    options = CapacityOptions(
        parse_slo(SLO), SearchSettings(tolerance=TOLERANCE), trial_s=args.trial
    )
    results = work / "search-results"
    started = time.monotonic()
    try:
        found = search_capacity(the_plan, options, results, NullReporter())
    finally:
        elapsed = time.monotonic() - started
        remove_clusters(results)
    (search,) = found.searches
    answer = search.answer
    assert answer is not None
    return Timed(
        "capacity search",
        elapsed,
        found.outcome.ran,
        answer.rate,
        (answer.highest_pass, answer.lowest_fail),
    )


class StopAtFirstFailure(NullReporter):
    """The naive user's loop: once a rate fails the SLO, the higher ones are not run (the
    campaign stops cleanly after that run is stored, as on Ctrl-C). ``passed``: rate → verdict
    of every rate run."""

    def __init__(self) -> None:
        self.passed: dict[float, bool] = {}

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        ok = result.status == RunStatus.OK and judge(parse_slo(SLO), figures(spec, result)).passed
        self.passed[spec.options.rate or 0.0] = ok
        if not ok:
            raise KeyboardInterrupt


def timed_sweep(work: Path, args: argparse.Namespace, rates: list[float]) -> Timed:
    the_plan = plan.load(write_plan(work, "sweep", args, rates))
    results = work / "sweep-results"
    sweep = StopAtFirstFailure()
    started = time.monotonic()
    try:
        run_campaign(the_plan, results, sweep)
    finally:
        elapsed = time.monotonic() - started
        remove_clusters(results)
    answer, fail = None, None
    for rate in sorted(sweep.passed):
        if not sweep.passed[rate]:
            fail = rate
            break
        answer = rate
    return Timed("naive sweep", elapsed, len(sweep.passed), answer, (answer, fail))


def agree(search: Timed, sweep: Timed, step: float) -> bool:
    low, high = search.bracket
    if sweep.answer is None or low is None:
        return sweep.answer is None and low is None
    return low - step <= sweep.answer <= (high or low) + step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=int, default=30, help="full-length runs, seconds")
    parser.add_argument("--trial", type=int, default=5, help="the search's trials, seconds")
    parser.add_argument("--sleep-ms", type=float, default=10.0)
    parser.add_argument("--output", type=Path, default=HERE / "capacity.md")
    args = parser.parse_args()
    provenance = Provenance.start()
    ceiling = 1000 / args.sleep_ms
    rates = ladder(ceiling)
    rows: list[tuple[int, Timed, Timed]] = []
    for round_no in range(1, args.rounds + 1):
        work = Path(tempfile.mkdtemp(prefix="pgbl-capacity-"))
        try:
            if round_no % 2:
                search, sweep = timed_search(work, args), timed_sweep(work, args, rates)
            else:
                sweep, search = timed_sweep(work, args, rates), timed_search(work, args)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append((round_no, search, sweep))
        print(round_no, search, sweep, flush=True)
    text = markdown(provenance, args, rates, rows, ceiling * TOLERANCE)
    write_figure(args.output, text)
    print(text)


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    rates: list[float],
    rows: list[tuple[int, Timed, Timed]],
    step: float,
) -> str:
    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    table = [
        f"| {n} | {s.seconds:.0f} ({s.runs} runs) | {w.seconds:.0f} ({w.runs} runs) "
        f"| {s.seconds / w.seconds:.3f} | {rate(s.answer)} [{rate(s.bracket[0])} – "
        f"{rate(s.bracket[1])}] | {rate(w.answer)} (first fail {rate(w.bracket[1])}) "
        f"| {'yes' if agree(s, w, step) else 'no'} |"
        for n, s, w in rows
    ]
    ratios = [s.seconds / w.seconds for _, s, w in rows]
    middle, low, high = median_interval(ratios)
    agreed = sum(agree(s, w, step) for _, s, w in rows) / len(rows)
    judged = [(RATIO, RATIO.verdict(low, high)), (AGREE, AGREE.verdict(agreed, agreed))]
    return "\n".join(
        [
            "# Capacity search against the naive sweep",
            "",
            *provenance.header(),
            verdict_line(judged),
            "",
            f"Workload: one advisory lock and pg_sleep({args.sleep_ms:g} ms) per transaction "
            f"(ceiling {1000 / args.sleep_ms:g} TPS); SLO `{SLO}` with -L 500 ms. Full-length "
            f"runs {args.duration} s, search trials {args.trial} s, tolerance "
            f"{TOLERANCE:.0%}; the sweep's ladder: {', '.join(f'{r:g}' for r in rates)}.",
            "",
            "| round | search s | sweep s | search ÷ sweep | search answer [bracket] "
            "| sweep answer | agree |",
            "|---|---|---|---|---|---|---|",
            *table,
            "",
            f"Median search ÷ sweep: {middle:.3f}, distribution-free 95 % interval "
            f"{low:.3f} – {high:.3f} (requirement ≤ 0.4 on its upper end). The sweep stops at "
            "its first failing rate. "
            "Wall time of each campaign from an empty results directory, server start and "
            "dataset included.",
        ]
    )


if __name__ == "__main__":
    main()
