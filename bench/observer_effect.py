"""Observer effect: pgbench as pgbenchlab runs it, against bare pgbench with the same options.

Configurations, interleaved round by round (the order rotates) on one managed server
(PostgreSQL 18, embedded, scale 10):
  bare       pgbench -n -c C -j J -M prepared -T D -b WORKLOAD       (what a user would type;
             pgbench then does not time transactions: its latency average is derived)
  bare-P1    the same with -P 1: pgbench times every transaction (latency measured)
  lab        the argv pgbenchlab builds: -P 1 and its per-transaction log at the sampling rate
             "auto" picks from the warmup TPS (campaign.measure.LOG_LINES_PER_SECOND)

Per workload and configuration, against bare and bare-P1, as paired ratios over the rounds
with 95 % intervals (bench/harness.py):
  - TPS ratio, the direct measure (wide on this host);
  - pgbench's CPU per transaction (wait4), the cost itself;
  - throughput implied by CPU accounting: all CPU per transaction (pgbench + server) of the
    reference ÷ that of the configuration, the TPS ratio of a CPU-bound host like this one.

Decided before the run:
- Estimator: per workload, TPS lab ÷ bare as the median of the rounds' paired ratios with its
  distribution-free 95 % interval (`harness.paired_median`); the geometric means and the CPU
  accounting beside it.
- Design: the three configurations in rotating order, round by round, on one server.
- Rounds: 30 of 6 s per configuration and workload.
- Bar: lab ÷ bare ≥ 0.98 for each workload on the interval's lower end: against pgbench as
  users run it by hand, without -P.

The figure of record: .venv/bin/python bench/observer_effect.py
(30 rounds of 6 s per configuration and workload, 4 clients: 180 runs, about 22 min);
--rounds, --seconds, --clients override the defaults. Writes bench/observer_effect.md from
that one run (--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from figure import Bar, verdict_line, write_figure
from harness import (
    HERE,
    BenchServer,
    Measured,
    Provenance,
    bench_server,
    busy_note,
    paired_median,
    paired_ratio,
    rotated,
    spec_for,
)
from pgbenchlab.campaign.measure import LOG_LINES_PER_SECOND, sampling_rate

MODES = ("bare", "bare-P1", "lab")
REFERENCES = ("bare", "bare-P1")


def run_workload(
    bench: BenchServer, workload: str, args: argparse.Namespace
) -> dict[str, list[Measured]]:
    spec = spec_for(workload, args.clients, args.seconds)
    warmup_tps = bench.run(spec_for(workload, args.clients, 5), sampling=None, progress=False).tps
    lab_sampling = sampling_rate(spec, warmup_tps)
    per_mode: dict[str, list[Measured]] = {mode: [] for mode in MODES}
    for round_no in range(args.rounds):
        for mode in rotated(MODES, round_no):
            bench.vacuum()
            if mode == "lab":
                measured = bench.run(spec, sampling=lab_sampling)
            else:
                measured = bench.run(spec, sampling=None, progress=mode == "bare-P1")
            per_mode[mode].append(measured)
        print(
            workload, round_no + 1, {m: round(v[-1].tps) for m, v in per_mode.items()}, flush=True
        )
    print(workload, "lab sampling rate", lab_sampling)
    return per_mode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--output", type=Path, default=HERE / "observer_effect.md")
    args = parser.parse_args()
    provenance = Provenance.start()
    with bench_server() as bench:
        results = {w: run_workload(bench, w, args) for w in ("select-only", "tpcb-like")}
    write_markdown(provenance, args, results)


def rows(workload: str, per_mode: dict[str, list[Measured]]) -> list[str]:
    found = []
    for mode in MODES[1:]:
        ms = per_mode[mode]
        for ref in REFERENCES:
            if ref == mode:
                continue
            base = per_mode[ref]
            tps = paired_ratio([m.tps for m in base], [m.tps for m in ms])
            client = paired_ratio([m.client_us for m in base], [m.client_us for m in ms])
            implied = paired_ratio([m.total_us for m in ms], [m.total_us for m in base])
            found.append(
                f"| {workload} | {mode} ÷ {ref} | {tps.text()} | {client.text()} | "
                f"{implied.text()} |"
            )
    return found


def write_markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    results: dict[str, dict[str, list[Measured]]],
) -> None:
    everything = [m for per_mode in results.values() for ms in per_mode.values() for m in ms]
    judged, medians = [], []
    for workload, per_mode in results.items():
        bar = Bar(f"{workload} TPS ≥ 0.98 of bare", 0.98, at_most=False)
        ratio = paired_median([m.tps for m in per_mode["bare"]], [m.tps for m in per_mode["lab"]])
        judged.append((bar, bar.verdict(ratio.low, ratio.high)))
        medians.append(f"{workload} {ratio.text()}")
    lines = [
        "# Observer effect: pgbenchlab's measurement against bare pgbench",
        "",
        *provenance.header(),
        verdict_line(judged),
        "",
        f"Ran: PostgreSQL 18 embedded, scale 10, {args.clients} clients, {args.rounds} "
        f"interleaved rounds of {args.seconds} s per configuration; the log budget is "
        f"{LOG_LINES_PER_SECOND:,} lines/s. All figures are from this run of "
        "`bench/observer_effect.py` (its docstring describes the configurations).",
        "Requirement: TPS lab ÷ bare ≥ 0.98 (bare pgbench without -P, as users run it), the "
        "median of the rounds' paired ratios on its interval's lower end: "
        + "; ".join(medians)
        + ".",
        "",
        *busy_note(everything),
        "",
        "Paired ratios over the rounds, geometric mean (95 % interval):",
        "",
        "| workload | configuration | TPS ratio | pgbench CPU/tx ratio "
        "| throughput implied by CPU/tx |",
        "|---|---|---|---|---|",
    ]
    for workload, per_mode in results.items():
        lines += rows(workload, per_mode)
    lines += [
        "",
        "Medians per configuration:",
        "",
        "| workload | configuration | TPS | pgbench µs/tx | server µs/tx |",
        "|---|---|---|---|---|",
    ]
    for workload, per_mode in results.items():
        for mode, ms in per_mode.items():
            lines.append(
                f"| {workload} | {mode} | {statistics.median(m.tps for m in ms):,.0f} | "
                f"{statistics.median(m.client_us for m in ms):.2f} | "
                f"{statistics.median(m.server_us for m in ms):.2f} |"
            )
    lines += [
        "",
        "pgbench's CPU per transaction is its user + system time from wait4 ÷ transactions;",
        "server CPU is the postmaster's and its backends' time from /proc/<pid>/schedstat. On",
        "this 2-core host server and pgbench share the CPUs, so the throughput a configuration",
        "allows is inversely proportional to the total CPU per transaction: that ratio resolves",
        "differences the TPS ratio's interval (run-to-run noise) cannot.",
    ]
    write_figure(args.output, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
