"""Telemetry overhead: the same pgbench run with and without the full telemetry capture.

Two configurations, interleaved round by round (the order alternates) on one managed server
(PostgreSQL 18, embedded, scale 10):
  off   pgbench as pgbenchlab runs it (-P 1, the per-transaction log sampled as "auto" picks)
  on    the same, with `telemetry.capture.Capture` beside it: pg_stat_activity 5×/s, the
        cumulative views and /proc once a second over one connection, the server log read
        after the run, pg_stat_statements when loaded (it is not, here)

Per workload, paired ratios on/off over the rounds with 95 % intervals (bench/harness.py): the
TPS ratio, and the throughput implied by CPU accounting, the CPU per transaction of everything
the measurement involves (server processes including the sampler's backend, pgbench, and this
process, i.e. the sampler thread) off ÷ on. Only the time pgbench runs is accounted: the
capture's connection and its reading of the server log happen before and after. First it
measures the sampler's own steady cost beside an idle server for 10 s.

Usage: .venv/bin/python bench/telemetry_overhead.py [--rounds 30] [--seconds 5] [--clients 4]
       [--workloads select-only,tpcb-like]
Writes bench/telemetry_overhead.md (--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from harness import (
    HERE,
    PROC,
    BenchServer,
    Measured,
    bench_server,
    busy_note,
    own_cpu_s,
    paired_ratio,
    rotated,
    spec_for,
)
from pgbenchlab import runner
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.machine import describe_machine

MODES = ("off", "on")


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
    per_mode: dict[str, list[Measured]] = {mode: [] for mode in MODES}
    for round_no in range(args.rounds):
        for mode in rotated(MODES, round_no):
            bench.vacuum()
            capture = bench.capture() if mode == "on" else None
            per_mode[mode].append(bench.run(spec, sampling=sampling, capture=capture))
        print(
            workload, round_no + 1, {m: round(v[-1].tps) for m, v in per_mode.items()}, flush=True
        )
    return per_mode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workloads", default="select-only,tpcb-like")
    parser.add_argument("--output", type=Path, default=HERE / "telemetry_overhead.md")
    args = parser.parse_args()
    with bench_server() as bench:
        cost = sampler_cost(bench)
        print(f"sampler: {cost[0]:.2f} ms/s in this process, {cost[1]:.2f} ms/s in its backend")
        results = {w: run_workload(bench, w, args) for w in args.workloads.split(",")}
    write_markdown(args, cost, results)


def write_markdown(
    args: argparse.Namespace,
    cost: tuple[float, float],
    results: dict[str, dict[str, list[Measured]]],
) -> None:
    everything = [m for per_mode in results.values() for ms in per_mode.values() for m in ms]
    lines = [
        "# Telemetry overhead: a run with the full telemetry capture against one without",
        "",
        f"Latest result: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{describe_machine()}, PostgreSQL 18 embedded, scale 10, {args.clients} clients, "
        f"{args.rounds} interleaved rounds of {args.seconds} s per configuration.",
        "",
        "Script: `bench/telemetry_overhead.py` (its docstring describes the configurations).",
        "Requirement: TPS with full telemetry ÷ without ≥ 0.99.",
        "",
        *busy_note(everything),
        "",
        f"Sampler cost beside an idle server: {cost[0]:.2f} ms of CPU per second in this process "
        f"and {cost[1]:.2f} ms/s in its backend: {sum(cost) / 10:.2f} % of one CPU.",
        "",
        "| workload | TPS off | TPS on | TPS on ÷ off (95 % CI) | throughput implied by CPU/tx "
        "(95 % CI) | sampler ms/s |",
        "|---|---|---|---|---|---|",
    ]
    for workload, per_mode in results.items():
        off, on = per_mode["off"], per_mode["on"]
        tps = paired_ratio([m.tps for m in off], [m.tps for m in on])
        implied = paired_ratio([m.total_us for m in on], [m.total_us for m in off])
        sampler = statistics.median(
            (m.own_us - o.own_us) * m.tps / 1000 for m, o in zip(on, off, strict=True)
        )
        lines.append(
            f"| {workload} | {statistics.median(m.tps for m in off):,.0f} | "
            f"{statistics.median(m.tps for m in on):,.0f} | {tps.text(4)} | {implied.text(4)} | "
            f"{sampler:.2f} |"
        )
    lines += [
        "",
        "CPU per transaction: the server's processes (postmaster, backends and the sampler's",
        "backend, from /proc/<pid>/schedstat), pgbench (wait4) and this process (the sampler",
        "thread) while pgbench runs, ÷ transactions. Server, pgbench and sampler share the two",
        "CPUs, so the throughput a configuration allows is inversely proportional to it.",
        "Sampler ms/s: this process's extra CPU per second of run with the capture on.",
    ]
    args.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
