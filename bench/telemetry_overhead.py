"""Telemetry overhead: pgbench with the full telemetry capture beside it against without.

The capture (`telemetry.capture.Capture`): pg_stat_activity 5×/s, the cumulative views and
/proc once a second over one connection, the server log read after the run,
pg_stat_statements when loaded (it is not, here). pgbench runs as pgbenchlab runs it (-P 1,
the per-transaction log sampled as "auto" picks) on one managed server (PostgreSQL 18,
embedded, scale 10). Three configurations, interleaved round by round (the order rotates):

  off    no capture
  on     one capture, as in a campaign
  on×K   K captures at once (K connections and sampler threads): K times the sampling work

The cost of one capture is far below this host's run-to-run noise (6–14 %), so its TPS ratio
on ÷ off cannot be resolved to 1 % without hundreds of rounds. Magnifying it can: with
sampling costs proportional to the samples taken, on×K ÷ off = 1 - K·c for a capture costing
c, so c = (1 - ratio) / K, and the interval of the ratio gives an interval for c K times
narrower. (Costs that do not grow with K, a thread and an idle connection, are in on×K once.)
Paired ratios over the rounds with 95 % t intervals (bench/harness.py). The sampler's own
steady CPU is measured first, beside an idle server.

Usage: .venv/bin/python bench/telemetry_overhead.py [--rounds 20] [--seconds 5] [--clients 4]
       [--magnify 10] [--workloads select-only,tpcb-like]
Writes bench/telemetry_overhead.md (--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from cpuclock import own_cpu_s
from harness import (
    HERE,
    PROC,
    BenchServer,
    Measured,
    Ratio,
    bench_server,
    busy_note,
    paired_ratio,
    rotated,
    spec_for,
)
from pgbenchlab import runner
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.machine import describe_machine


def sampler_cost(bench: BenchServer, seconds: float = 10.0) -> tuple[float, float]:
    """(this process's, the sampler backend's) CPU in ms per second of steady sampling."""
    capture = bench.capture().start()
    assert capture.conn is not None
    backend = str(capture.conn.info.backend_pid)
    capture.pgbench_started(os.getpid())  # something to watch: ourselves
    time.sleep(0.5)
    backend_before = osstats.schedstat(PROC, backend)
    before, started = own_cpu_s(), time.monotonic()
    time.sleep(seconds)
    own, wall = own_cpu_s() - before, time.monotonic() - started
    backend_after = osstats.schedstat(PROC, backend)
    capture.stop()
    assert backend_before is not None and backend_after is not None
    return own * 1000 / wall, (backend_after[0] - backend_before[0]) * 1000 / wall


def run_workload(
    bench: BenchServer, workload: str, args: argparse.Namespace
) -> dict[str, list[Measured]]:
    spec = spec_for(workload, args.clients, args.seconds)
    warmup_tps = bench.run(spec_for(workload, args.clients, 5), sampling=None).tps
    sampling = runner.sampling_rate(spec, warmup_tps)
    captures = {"off": 0, "on": 1, "magnified": args.magnify}
    per_mode: dict[str, list[Measured]] = {mode: [] for mode in captures}
    for round_no in range(args.rounds):
        for mode in rotated(list(captures), round_no):
            bench.vacuum()
            beside = [bench.capture() for _ in range(captures[mode])]
            per_mode[mode].append(bench.run(spec, sampling=sampling, captures=beside))
        print(
            workload, round_no + 1, {m: round(v[-1].tps) for m, v in per_mode.items()}, flush=True
        )
    return per_mode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--magnify", type=int, default=10)
    parser.add_argument("--workloads", default="select-only,tpcb-like")
    parser.add_argument("--output", type=Path, default=HERE / "telemetry_overhead.md")
    args = parser.parse_args()
    with bench_server() as bench:
        cost = sampler_cost(bench)
        print(f"sampler: {cost[0]:.2f} ms/s in this process, {cost[1]:.2f} ms/s in its backend")
        results = {w: run_workload(bench, w, args) for w in args.workloads.split(",")}
    write_markdown(args, cost, results)


def per_capture(magnified: Ratio, k: int) -> Ratio:
    """The TPS ratio one capture allows, from K captures' ratio (costs add up)."""
    return Ratio(*(1 - (1 - r) / k for r in (magnified.value, magnified.low, magnified.high)))


def write_markdown(
    args: argparse.Namespace,
    cost: tuple[float, float],
    results: dict[str, dict[str, list[Measured]]],
) -> None:
    everything = [m for per_mode in results.values() for ms in per_mode.values() for m in ms]
    k = args.magnify
    lines = [
        "# Telemetry overhead: pgbench with the full telemetry capture against without",
        "",
        f"Latest result: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{describe_machine()}, PostgreSQL 18 embedded, scale 10, {args.clients} clients, "
        f"{args.rounds} interleaved rounds of {args.seconds} s per configuration.",
        "",
        "Script: `bench/telemetry_overhead.py` (its docstring describes the design).",
        "Requirement: TPS with full telemetry ÷ without ≥ 0.99.",
        "",
        *busy_note(everything),
        "",
        f"Sampler cost beside an idle server: {cost[0]:.2f} ms of CPU per second in this process "
        f"and {cost[1]:.2f} ms/s in its backend: {sum(cost) / 10:.2f} % of one CPU.",
        "",
        f"| workload | TPS off | TPS on ÷ off (95 % CI) | TPS on×{k} ÷ off (95 % CI) "
        f"| one capture, from on×{k} (95 % CI) | sampler ms/s |",
        "|---|---|---|---|---|---|",
    ]
    for workload, per_mode in results.items():
        off, on, magnified = per_mode["off"], per_mode["on"], per_mode["magnified"]
        direct = paired_ratio([m.tps for m in off], [m.tps for m in on])
        many = paired_ratio([m.tps for m in off], [m.tps for m in magnified])
        sampler = statistics.median(
            (m.own_us - o.own_us) * m.tps / 1000 for m, o in zip(on, off, strict=True)
        )
        lines.append(
            f"| {workload} | {statistics.median(m.tps for m in off):,.0f} | {direct.text(4)} | "
            f"{many.text(4)} | {per_capture(many, k).text(4)} | {sampler:.2f} |"
        )
    lines += [
        "",
        "One capture, from on×K: 1 - (1 - ratio) / K for the ratio and both ends of its interval.",
        "Sampler ms/s: this process's extra CPU per second of run with one capture on (the",
        "sampler thread), while pgbench runs; its start and stop lie outside the run, as in a",
        "campaign.",
    ]
    args.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
