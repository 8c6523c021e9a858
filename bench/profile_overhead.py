"""Profile overhead: pgbench with perf profiling against without, and the size of a report
with the flame graphs of 100 profiled runs.

    .venv/bin/python bench/profile_overhead.py [--rounds 12] [--seconds 30] [--clients 4]

One managed server (PostgreSQL 18, embedded, scale 10; bench/harness.py), select-only at the
given clients. Each round runs two modes once, in an alternating order: "off" (pgbench alone,
as an unprofiled run) and "profiled" (`telemetry.profiler.RunProfiler` beside it exactly as a
campaign runs it by default: one `perf record -a -e cpu-clock -F 499 -g` of every CPU, from
which the server's processes and pgbench's are both picked out, this being the server's host;
started before the run, folded after it, the folding outside the measured time as in a
campaign). Profiling the server alone or the server and pgbench is the same recording here,
so it has one cost. The figure informs `profile = "auto"`, which keeps its profiled repeat out
of the cell's statistics in every case.

Then a synthetic campaign of 100 runs (no PostgreSQL ran for them: 2 servers × 2 scales × 25
client counts, tests/conftest_report.py), each carrying the real profiles captured in the last
profiled round (the server's and pgbench's, their counts varied per run: two flame graphs per
cell), is written through the real Store; the report's size is measured with and without the
profiles (the budget: 5 MB for any report, bench/report_size.md).

Decided before the run:
- Estimator: the median of the rounds' paired TPS ratios profiled ÷ off, with its
  distribution-free 95 % interval (`harness.paired_median`), beside the run-to-run noise of
  the off runs (their coefficient of variation); the report's size, the same every time, as
  measured.
- Design: one server; the two modes alternate which goes first, round by round.
- Rounds: 12 of 30 s runs (the sign test's interval needs at least 6 for 95 %).
- Bar: the report of 100 profiled runs ≤ 5 MB. The overhead has no bar: it is reported with
  its interval, for `profile = "auto"`.

Writes bench/profile_overhead.md (--output elsewhere for a smoke test: --rounds 1 --seconds 3).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from figure import Bar, verdict_line, write_figure
from harness import HERE, Provenance, bench_server, paired_median, rotated, spec_for

sys.path.insert(0, str(HERE.parent / "tests"))

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.profiles import Profile, RunProfiles
from pgbenchlab.report import write_report
from pgbenchlab.store import Store
from pgbenchlab.store.profiles import write_profile
from pgbenchlab.telemetry.profiler import PgbenchTarget, Profiler, RunProfiler, check_perf
from pgbenchlab.telemetry.symbols import symbols_note

MODES = ("off", "profiled")
REPORT = Bar("report of 100 profiled runs ≤ 5 MB", 5_000_000, at_most=True)


def measure(rounds: int, seconds: int, clients: int) -> tuple[dict[str, list[float]], RunProfiles]:
    tps: dict[str, list[float]] = {mode: [] for mode in MODES}
    last = RunProfiles()
    spec = spec_for("select-only", clients, seconds)
    with bench_server() as bench:
        bench.run(spec_for("select-only", clients, 2), sampling=None)  # warm the cache
        client = PgbenchTarget(bench.binary, LOCAL_HOST, symbols_note(bench.binary), "bench")
        for round_no in range(rounds):
            for mode in rotated(MODES, round_no):
                profiler = None
                if mode == "profiled":
                    server = Profiler(bench.postmaster(), bench.logs, label="bench")
                    profiler = RunProfiler(server, client)
                    profiler.start()
                try:
                    started = profiler.pgbench_started if profiler else None
                    measured = bench.run(spec, sampling=None, on_start=started)
                finally:
                    if profiler is not None:
                        profiler.measured()
                        found = profiler.stop()
                        last = found if found.pgbench else last
                        profiler.close()
                tps[mode].append(measured.tps)
                print(f"round {round_no + 1} {mode}: {measured.tps:,.0f} tps", file=sys.stderr)
    assert last.server is not None and last.pgbench is not None, "perf recorded nothing"
    return tps, last


def hundred_profiled_runs(work: Path, profiles: RunProfiles) -> tuple[int, int]:
    """The report's size for 100 runs without and with both profiles each."""
    plan = SyntheticPlan(
        name="profiled",
        servers=(
            FakeServer("base", "18.1", 1.0, {"shared_buffers": "64MB"}),
            FakeServer("patched", "18.1", 1.1, {"shared_buffers": "64MB"}),
        ),
        scales=(1, 10),
        workloads=("select-only",),
        clients=tuple(range(1, 26)),
        repeats=1,
    )
    db = write_synthetic(work / "results", plan)
    plain = write_report(db, output=work / "plain.html")
    rng = random.Random(1)
    with Store(db) as store:
        records = store.run_records(store.campaign_id(None))
        with store.transaction():
            for record in records:
                for profile in (profiles.server, profiles.pgbench):
                    assert profile is not None
                    write_profile(store.db, record.id, varied(profile, rng))
    profiled = write_report(db, output=work / "profiled.html")
    assert isinstance(plain, Path) and isinstance(profiled, Path)
    return plain.stat().st_size, profiled.stat().st_size


def varied(profile: Profile, rng: random.Random) -> Profile:
    """The same stacks with counts varied by up to ±50 % (every run's tree its own)."""
    lines = []
    for frames, count in profile.stacks():
        lines.append(f"{';'.join(frames)} {max(1, round(count * rng.uniform(0.5, 1.5)))}\n")
    return replace(profile, folded="".join(lines))


def written(
    provenance: Provenance,
    args: argparse.Namespace,
    tps: dict[str, list[float]],
    profiles: RunProfiles,
    sizes: tuple[int, int],
) -> str:
    off = tps["off"]
    noise = statistics.stdev(off) / statistics.fmean(off) if len(off) > 1 else float("nan")
    server, client = profiles.server, profiles.pgbench
    assert server is not None and client is not None
    plain, profiled = sizes
    ratio = paired_median(off, tps["profiled"])
    below = len(off) > 1 and ratio.low >= 1 - noise
    report = REPORT.verdict(profiled, profiled)
    return "\n".join(
        [
            "# Profile overhead: TPS with perf against without, and the report's size",
            "",
            *provenance.header(),
            verdict_line([(REPORT, report)]),
            "",
            f"select-only, {args.clients} clients, scale 10, {args.seconds} s runs, "
            f"{args.rounds} interleaved rounds (bench/profile_overhead.py; its docstring gives "
            "the estimator, design, rounds and bar decided before the run).",
            "",
            "| measure | value |",
            "|---|---:|",
            f"| TPS without profiling (median) | {statistics.median(off):,.0f} |",
            f"| TPS profiled: perf of every CPU, server and pgbench (median) | "
            f"{statistics.median(tps['profiled']):,.0f} |",
            f"| profiled ÷ off, median of paired ratios (95 % interval) | {ratio.text()} |",
            f"| run-to-run noise of the off runs (CV) | {noise:.1%} |",
            f"| samples in the last profiled run, server ({server.frequency_hz} Hz) | "
            f"{server.samples:,} ({server.lost:,} lost) |",
            f"| samples in the last profiled run, pgbench | "
            f"{client.samples:,} ({client.lost:,} lost) |",
            f"| report, 100 synthetic runs, no profiles | {plain / 1e6:.2f} MB |",
            f"| report, 100 synthetic runs with real profiles, two flame graphs each | "
            f"{profiled / 1e6:.2f} MB |",
            "",
            "Overhead below the noise (the interval's low end above 1 − CV): "
            f"{'yes' if below else 'no'}. "
            '`profile = "auto"` keeps its profiled repeat out of the cell\'s statistics either '
            "way: the overhead grows with the stacks' depth and the sample rate, so a figure "
            "from one workload does not vouch for every cell.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--output", type=Path, default=HERE / "profile_overhead.md")
    args = parser.parse_args()
    check_perf()
    provenance = Provenance.start()
    tps, profiles = measure(args.rounds, args.seconds, args.clients)
    with tempfile.TemporaryDirectory(prefix="pgbl-profile-bench-") as work:
        sizes = hundred_profiled_runs(Path(work), profiles)
    text = written(provenance, args, tps, profiles, sizes)
    print(text)
    write_figure(args.output, text)


if __name__ == "__main__":
    main()
