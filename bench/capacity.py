"""Capacity search against the naive sweep: wall time to a capacity answer, and the answers.

The same server (the embedded PostgreSQL, a fresh cluster per campaign) and the same workload:
every transaction takes one advisory lock and sleeps ``--sleep-ms`` (10 ms: a ceiling of 100
TPS that holds on a loaded machine). The same SLO (``skipped <= 1%`` with -L 500 ms, the
backlog check). `pgbenchlab capacity` searches with short trials and confirms at full length;
the naive sweep runs every rate of a ladder at full length (`pgbenchlab run` with a `rate`
axis: from half the ceiling to 1.2 × it in steps of the search's tolerance, a range the naive
user is given for free) and answers with the highest rate below the first that fails, judged
by the same verdict. Rounds alternate which goes first. Requirement: search ÷ sweep ≤ 0.4,
the two answers agreeing (the sweep's answer within the search's bracket widened by one
ladder step).

The figure of record: .venv/bin/python bench/capacity.py   (about 25 min: 2 rounds, 30 s runs)
Smoke test: .venv/bin/python bench/capacity.py --rounds 1 --duration 3 --trial 3
--output /tmp/capacity.md
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import HERE, Provenance
from pgbenchlab import plan
from pgbenchlab.analysis.capacity import SearchSettings
from pgbenchlab.analysis.slo import judge, parse_slo
from pgbenchlab.campaign import NullReporter, remove_clusters, run_campaign
from pgbenchlab.campaign.capacity import CapacityOptions, figures, search_capacity
from pgbenchlab.results import RunStatus

SLO = "skipped <= 1%"
TOLERANCE = 0.05

PLAN = """
[campaign]
name = "{name}"
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


def timed_sweep(work: Path, args: argparse.Namespace, rates: list[float]) -> Timed:
    the_plan = plan.load(write_plan(work, "sweep", args, rates))
    slo = parse_slo(SLO)
    results = work / "sweep-results"
    started = time.monotonic()
    try:
        outcome = run_campaign(the_plan, results, NullReporter())
    finally:
        elapsed = time.monotonic() - started
        remove_clusters(results)
    passed = {}
    for result in outcome.results:
        spec = next(s for s in the_plan.specs if s.run_key == result.run_key)
        ok = result.status == RunStatus.OK and judge(slo, figures(spec, result)).passed
        passed[spec.options.rate or 0.0] = ok
    answer, fail = None, None
    for rate in sorted(passed):
        if not passed[rate]:
            fail = rate
            break
        answer = rate
    return Timed("naive sweep", elapsed, len(outcome.results), answer, (answer, fail))


def agree(search: Timed, sweep: Timed, step: float) -> bool:
    low, high = search.bracket
    if sweep.answer is None or low is None:
        return sweep.answer is None and low is None
    return low - step <= sweep.answer <= (high or low) + step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
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
    args.output.write_text(text)
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
    return "\n".join(
        [
            "# Capacity search against the naive sweep",
            "",
            *provenance.header(),
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
            f"Median search ÷ sweep: {statistics.median(ratios):.3f} (requirement ≤ 0.4). "
            "Wall time of each campaign from an empty results directory, server start and "
            "dataset included.",
        ]
    )


if __name__ == "__main__":
    main()
