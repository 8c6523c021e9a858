"""Telemetry overhead: pgbench with the full telemetry capture beside it against without.

The capture (`telemetry.capture.Capture`): pg_stat_activity 5×/s, the cumulative views and
/proc once a second over one connection, the server log read after the run,
pg_stat_statements when loaded (it is not, here). pgbench runs as pgbenchlab runs it (-P 1,
the per-transaction log sampled as "auto" picks) on one managed server (PostgreSQL 18,
embedded, scale 10).

The cost of one capture is far below this host's run-to-run noise (6–18 %), which drifts over
seconds to minutes, so whole runs with and without it cannot resolve 1 %. Instead, one long
pgbench run per configuration (workload × clients) with the captures started beside it, their
sampling switched on and off second by second (`Capture.pause`/`resume`), in blocks holding
each mode once in a random order. The switch follows pgbench's -P lines: when the line closing
one second arrives, the mode of the next is set, so each progress interval ran under one mode.
Adjacent seconds share the drift, so the per-block ratio on ÷ off is about 10 % noisy where
whole runs are 15 %. Ratios are averaged over batches of consecutive blocks; the t interval is
over the batches (the seconds are autocorrelated, the batches nearly independent). What this
design cannot see is the cost of the capture's idle connection, which exists in both modes.

Modes: off (no sampling), on (one capture, as in a campaign), on×K (K captures at once: K
times the sampling work, so with costs proportional to the samples taken, on×K ÷ off =
1 - K·c and one capture's cost c = (1 - ratio) / K, with an interval K times narrower).

Decided before the run:
- Estimator: per workload, TPS on ÷ off over the batches of all its client counts pooled: the
  geometric mean of the batches' paired ratios with its t interval over the batches.
- Design: one long run per configuration, sampling switched second by second in random blocks
  (above).
- Rounds: 480 switched seconds per configuration, 4 configurations.
- Bar: on ÷ off ≥ 0.99 for each workload, on the interval's lower end.

One invocation measures every configuration of the figure and writes bench/telemetry_overhead.md
from that run alone (--output elsewhere for a smoke test). The figure of record:
    .venv/bin/python bench/telemetry_overhead.py
select-only and tpcb-like at 4 and 16 clients, 480 s of switched sampling each: about 33 min
(the planned time is printed first). At 480 s the on ÷ off intervals are roughly ±1.5–2 %
wide (earlier runs of 1200 s gave about ±1 %; the width shrinks with the square root of the
time), the one-capture figures from on×K ten times narrower. --quick: 60 s each (about 5 min;
intervals too wide to decide anything, for checking the script); --seconds, --clients (e.g.
4,8,16), --workloads, --modes, --magnify override the defaults.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from cpuclock import own_cpu_s
from figure import Bar, verdict_line, write_figure
from harness import (
    HERE,
    PROC,
    BenchServer,
    Provenance,
    Ratio,
    bench_server,
    duration_text,
    paired_ratio,
    spec_for,
)
from pgbenchlab.campaign.measure import sampling_rate
from pgbenchlab.pgbench.progress import ProgressLine, parse_progress_line
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.capture import Capture

BATCH_BLOCKS = 10
SETTLE_SECONDS = 5  # the first seconds (connections, caches) are left out
WARMUP_SECONDS = 5  # a run without log or capture before each configuration: its TPS sets the
# per-transaction log's sampling rate as "auto" does in a campaign
SECONDS = 480
QUICK_SECONDS = 60
SETUP_ESTIMATE_S = 20  # initdb, pgbench -i at scale 10, the sampler's idle cost


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


def mode_captures(modes: list[str], magnify: int) -> dict[str, int]:
    """How many captures sample in each mode."""
    count = {"off": 0, "on": 1, "magnified": magnify}
    return {mode: count[mode] for mode in modes}


@dataclass
class Switcher:
    """Sets the mode of each progress interval as the line before it arrives."""

    captures: list[Capture]
    per_mode: dict[str, int]
    rng: random.Random
    upcoming: list[str] = field(default_factory=list)
    current: str = "off"
    intervals: list[tuple[ProgressLine, str]] = field(default_factory=list)
    boundaries: list[float] = field(default_factory=list)  # monotonic arrival of each line

    def begin(self) -> None:
        self._switch(self._next_mode())

    def on_line(self, text: str) -> None:
        line = parse_progress_line(text)
        if line is None:
            return
        self.boundaries.append(time.monotonic())
        self.intervals.append((line, self.current))
        self._switch(self._next_mode())

    def _next_mode(self) -> str:
        if len(self.intervals) < SETTLE_SECONDS:
            return "off"
        if not self.upcoming:
            self.upcoming = self.rng.sample(list(self.per_mode), len(self.per_mode))
        return self.upcoming.pop(0)

    def _switch(self, mode: str) -> None:
        sampling = self.per_mode[mode]
        for index, capture in enumerate(self.captures):
            if index < sampling:
                capture.resume()
            else:
                capture.pause()
        self.current = mode


@dataclass(frozen=True)
class Switched:
    """One switched run: the blocks' TPS by mode, and what ran during it."""

    workload: str
    clients: int
    blocks: list[dict[str, float]]
    busy_share: float  # of all CPUs, by anything: below 100 % the host had idle CPU to lend
    other_share: float
    counters_in_place: float  # share of counter samples stamped inside a sampling interval
    counters_late_ms: float  # the largest distance of the others past the switch
    dropped: int  # blocks left out: an interval not 1 s long (pgbench reported late)

    @property
    def off_tps(self) -> float:
        return statistics.median(b["off"] for b in self.blocks) if self.blocks else math.nan


def run_configuration(
    bench: BenchServer, workload: str, clients: int, args: argparse.Namespace
) -> Switched:
    """The warmup that sets the log's sampling rate, then one switched run."""
    warmup_spec = spec_for(workload, clients, WARMUP_SECONDS)
    warmup = bench.run(warmup_spec, sampling=None).tps
    sampling = sampling_rate(warmup_spec, warmup)
    bench.vacuum()
    per_mode = mode_captures(args.modes, args.magnify)
    captures = [bench.capture() for _ in range(max(per_mode.values()))]
    switcher = Switcher(captures, per_mode, random.Random(f"{workload}-{clients}-{args.seed}"))
    spec = spec_for(workload, clients, args.seconds + SETTLE_SECONDS)
    switcher.begin()
    measured = bench.run(
        spec, sampling=sampling, captures=captures, on_stderr_line=switcher.on_line
    )
    blocks, dropped = _blocks(switcher.intervals, len(per_mode))
    return Switched(
        workload,
        clients,
        blocks,
        measured.busy_share,
        measured.other_share,
        *_counters_in_place(captures, switcher),
        dropped,
    )


def _blocks(
    intervals: list[tuple[ProgressLine, str]], size: int
) -> tuple[list[dict[str, float]], int]:
    """Consecutive groups of ``size`` intervals holding each mode once, each 1 s long."""
    timed = [
        (line.tps, mode, (line.elapsed_s or 0) - (prev.elapsed_s or 0))
        for (prev, _), (line, mode) in itertools.pairwise(intervals)
    ][SETTLE_SECONDS - 1 :]
    blocks, dropped = [], 0
    for start in range(0, len(timed) - size + 1, size):
        group = timed[start : start + size]
        if all(abs(length - 1.0) < 0.05 for _, _, length in group):
            blocks.append({mode: tps for tps, mode, _ in group})
        else:
            dropped += 1
    return blocks, dropped


def _counters_in_place(captures: list[Capture], switcher: Switcher) -> tuple[float, float]:
    """Of the first capture's counter samples during the run, the share stamped inside an
    interval it sampled in, and how far past the switch the others were (largest, ms)."""
    if not captures:  # only "off" was asked for: nothing sampled
        return math.nan, 0.0
    ends = switcher.boundaries
    late_ms, inside, count = [0.0], 0, 0
    for sample in captures[0].state.samples:
        index = bisect.bisect_right(ends, sample.mono)
        if sample.t is None or index in (0, len(ends)):
            continue  # the baseline, or outside the run's progress intervals
        count += 1
        if switcher.per_mode[switcher.intervals[index][1]] > 0:
            inside += 1
        else:
            late_ms.append((sample.mono - ends[index - 1]) * 1000)
    return (inside / count if count else math.nan), max(late_ms)


# -- ratios ----------------------------------------------------------------------------------


def batches(blocks: list[dict[str, float]], mode: str) -> tuple[list[float], list[float]]:
    """(off, mode): geometric mean TPS of each batch of consecutive blocks."""
    off, other = [], []
    for start in range(0, len(blocks) - BATCH_BLOCKS + 1, BATCH_BLOCKS):
        batch = blocks[start : start + BATCH_BLOCKS]
        off.append(statistics.geometric_mean(b["off"] for b in batch))
        other.append(statistics.geometric_mean(b[mode] for b in batch))
    return off, other


def ratio_text(results: list[Switched], mode: str, magnify: int) -> str:
    """`ratio_of` as text, "–" when the mode did not run or no batch ended."""
    ratio = ratio_of(results, mode, magnify)
    return "–" if ratio is None else ratio.text(4)


def ratio_of(results: list[Switched], mode: str, magnify: int) -> Ratio | None:
    """mode ÷ off over the batches of ``results`` (paired, t interval over the batches); for
    on×K, converted to one capture's ratio. None when the mode did not run or no batch ended."""
    off: list[float] = []
    other: list[float] = []
    for result in results:
        if result.blocks and mode in result.blocks[0]:
            pair = batches(result.blocks, mode)
            off += pair[0]
            other += pair[1]
    if not off:
        return None
    ratio = paired_ratio(off, other)
    return per_capture(ratio, magnify) if mode == "magnified" else ratio


def per_capture(magnified: Ratio, k: int) -> Ratio:
    """The TPS ratio one capture allows, from K captures' ratio (costs add up)."""
    return Ratio(*(1 - (1 - r) / k for r in (magnified.value, magnified.low, magnified.high)))


# -- the run and its record --------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=int, default=None, help=f"switched seconds per configuration ({SECONDS})"
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SECONDS} s each")
    parser.add_argument("--workloads", default="select-only,tpcb-like")
    parser.add_argument("--clients", default="4,16")
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["off", "on", "magnified"])
    parser.add_argument("--magnify", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=HERE / "telemetry_overhead.md")
    args = parser.parse_args()
    if "off" not in args.modes or not set(args.modes) <= {"off", "on", "magnified"}:
        parser.error("--modes: off and any of on, magnified (every ratio is against off)")
    if args.seconds is None:
        args.seconds = QUICK_SECONDS if args.quick else SECONDS
    args.workload_list = args.workloads.split(",")
    args.client_list = [int(c) for c in args.clients.split(",")]
    return args


def planned_s(args: argparse.Namespace) -> float:
    """The run time to expect: every configuration's warmup, settling and switched seconds."""
    configurations = len(args.workload_list) * len(args.client_list)
    each = WARMUP_SECONDS + SETTLE_SECONDS + args.seconds + 2  # + vacuum
    return float(SETUP_ESTIMATE_S + configurations * each)


def main() -> None:
    args = parse_args()
    provenance = Provenance.start()
    print(f"planned: about {duration_text(planned_s(args))}", flush=True)
    results = []
    with bench_server() as bench:
        cost = sampler_cost(bench)
        print(f"sampler: {cost[0]:.2f} ms/s in this process, {cost[1]:.2f} ms/s in its backend")
        for workload in args.workload_list:
            for clients in args.client_list:
                results.append(run_configuration(bench, workload, clients, args))
                print(row(results[-1], args), flush=True)
    text = markdown(provenance, args, cost, results)
    write_figure(args.output, text)
    print(text)


COLUMNS = (
    "workload",
    "clients",
    "TPS off",
    "blocks (dropped)",
    "TPS on ÷ off (95 % CI)",
    "one capture, from on×K (95 % CI)",
    "counter samples in place",
    "host CPU busy",
    "other load",
)


def row(result: Switched, args: argparse.Namespace) -> list[str]:
    return [
        result.workload,
        str(result.clients),
        f"{result.off_tps:,.0f}",
        f"{len(result.blocks)} ({result.dropped})",
        ratio_text([result], "on", args.magnify),
        ratio_text([result], "magnified", args.magnify),
        f"{result.counters_in_place:.1%}, others ≤ {result.counters_late_ms:.0f} ms late",
        f"{result.busy_share:.1%}",
        f"{result.other_share:.1%}",
    ]


def pooled_rows(results: list[Switched], args: argparse.Namespace) -> list[str]:
    """Per workload, the batches of all its client counts together: the average cost."""
    lines = []
    for workload in args.workload_list:
        mine = [r for r in results if r.workload == workload]
        count = sum(len(batches(r.blocks, "off")[0]) for r in mine)
        lines.append(
            f"| {workload} | {args.clients.replace(',', ', ')} | {count} | "
            f"{ratio_text(mine, 'on', args.magnify)} | "
            f"{ratio_text(mine, 'magnified', args.magnify)} |"
        )
    return lines


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    cost: tuple[float, float],
    results: list[Switched],
) -> str:
    modes = ", ".join("on×K" if m == "magnified" else m for m in args.modes)
    judged = []
    for workload in args.workload_list:
        bar = Bar(f"{workload} TPS ≥ 0.99", 0.99, at_most=False)
        pooled = ratio_of([r for r in results if r.workload == workload], "on", args.magnify)
        judged.append(
            (bar, "not shown" if pooled is None else bar.verdict(pooled.low, pooled.high))
        )
    lines = [
        "# Telemetry overhead: pgbench with the full telemetry capture against without",
        "",
        *provenance.header(),
        verdict_line(judged),
        "",
        f"Ran: PostgreSQL 18 embedded, scale 10; workloads {', '.join(args.workload_list)} at "
        f"{args.clients.replace(',', ', ')} clients; per configuration one pgbench run of "
        f"{args.seconds} s (after {SETTLE_SECONDS} s of settling) with sampling switched second "
        f"by second between {modes} (K = {args.magnify}). All rows are from this one run of "
        "the script (`bench/telemetry_overhead.py`; its docstring describes the design).",
        "Requirement: TPS with full telemetry ÷ without ≥ 0.99, per workload (its client counts "
        "pooled), on the interval's lower end.",
        "",
        f"Sampler cost beside an idle server: {cost[0]:.2f} ms of CPU per second in this "
        f"process and {cost[1]:.2f} ms/s in its backend.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(row(r, args)) + " |" for r in results),
        "",
        "All client counts of a workload pooled (their batches together):",
        "",
        "| workload | clients | batches | TPS on ÷ off (95 % CI) | one capture, from on×K |",
        "|---|---|---|---|---|",
        *pooled_rows(results, args),
        "",
        f"Blocks: one second of each mode in a random order; intervals: batches of {BATCH_BLOCKS} "
        "consecutive blocks (– when no batch ended). One capture, from on×K: 1 - (1 - ratio) / K "
        "for the ratio and both ends of its interval. Counter samples in place: the share of the "
        "first capture's once-a-second samples stamped inside a second it sampled in, and how "
        "late past the switch the others were (a sample is stamped after that tick's "
        "pg_stat_activity query, so one begun before the switch can be stamped after it). Host "
        "CPU busy: all CPU used on the host, share of all CPUs; below 100 % the sampler could "
        "take idle CPU instead of pgbench's or the server's. Other load: CPU of processes outside "
        "the measurement.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
