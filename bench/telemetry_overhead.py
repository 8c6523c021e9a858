"""Telemetry overhead: pgbench with the full telemetry capture beside it against without.

The capture (`telemetry.capture.Capture`): pg_stat_activity 5×/s, the cumulative views and
/proc once a second over one connection, the server log read after the run,
pg_stat_statements when loaded (it is not, here). pgbench runs as pgbenchlab runs it (-P 1,
the per-transaction log sampled as "auto" picks) on one managed server (PostgreSQL 18,
embedded, scale 10).

The cost of one capture is far below this host's run-to-run noise (6–18 %), which drifts over
seconds to minutes. Two designs:

switched (the figure of record): one long pgbench run per workload with the captures started
beside it, their sampling switched on and off second by second (`Capture.pause`/`resume`),
in blocks holding each mode once in a random order. The switch follows pgbench's -P lines:
when the line closing one second arrives, the mode of the next is set, so each progress
interval ran under one mode. Adjacent seconds share the drift, so the per-block ratio
on ÷ off is about 10 % noisy where whole runs are 15 %, and an hour holds thousands of blocks.
Ratios are averaged over batches of consecutive blocks; the t interval is over the batches
(the seconds are autocorrelated, the batches nearly independent). What this design cannot
see is the cost of the capture's idle connection, which exists in both modes.

rounds: whole runs of a few seconds, off / on / on×K, interleaved round by round (the order
rotates), compared as paired ratios (bench/harness.py). It includes the idle connection but
needs hundreds of rounds to resolve 1 %.

Modes: off (no sampling), on (one capture, as in a campaign), on×K (K captures at once: K
times the sampling work, so with costs proportional to the samples taken, on×K ÷ off =
1 - K·c and one capture's cost c = (1 - ratio) / K, with an interval K times narrower).

Usage: .venv/bin/python bench/telemetry_overhead.py [--switched-seconds 1200]
       [--modes off,on,magnified] [--rounds 0] [--seconds 5] [--clients 4] [--magnify 10]
       [--workloads select-only,tpcb-like]
Each run updates its rows (design, workload, clients) in bench/telemetry_overhead.json and
writes bench/telemetry_overhead.md from all of them (--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpuclock import own_cpu_s
from harness import (
    HERE,
    PROC,
    BenchServer,
    Measured,
    Ratio,
    bench_server,
    paired_ratio,
    rotated,
    spec_for,
)
from pgbenchlab import runner
from pgbenchlab.pgbench.progress import ProgressLine, parse_progress_line
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.capture import Capture
from pgbenchlab.telemetry.machine import describe_machine

BATCH_BLOCKS = 10
SETTLE_SECONDS = 5  # the first seconds (connections, caches) are left out


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


# -- the switched design ---------------------------------------------------------------------


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

    blocks: list[dict[str, float]]
    off_tps: float
    busy_share: float  # of all CPUs, by anything: below 100 % the host had idle CPU to lend
    other_share: float
    counters_in_place: float  # share of counter samples stamped inside a sampling interval
    counters_late_ms: float  # the largest distance of the others past the switch
    dropped: int  # blocks left out: an interval not 1 s long (pgbench reported late)


def run_switched(
    bench: BenchServer, workload: str, args: argparse.Namespace, sampling: float | None
) -> Switched:
    per_mode = mode_captures(args.modes, args.magnify)
    captures = [bench.capture() for _ in range(max(per_mode.values()))]
    switcher = Switcher(captures, per_mode, random.Random(f"{workload}-{args.seed}"))
    spec = spec_for(workload, args.clients, args.switched_seconds + SETTLE_SECONDS)
    switcher.begin()
    measured = bench.run(
        spec, sampling=sampling, captures=captures, on_stderr_line=switcher.on_line
    )
    blocks, dropped = _blocks(switcher.intervals, len(per_mode))
    return Switched(
        blocks,
        statistics.median(b["off"] for b in blocks),
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


def batch_ratio(blocks: list[dict[str, float]], mode: str) -> Ratio:
    """mode ÷ off: geometric means over batches of consecutive blocks, t interval over them."""
    off, other = [], []
    for start in range(0, len(blocks) - BATCH_BLOCKS + 1, BATCH_BLOCKS):
        batch = blocks[start : start + BATCH_BLOCKS]
        off.append(statistics.geometric_mean(b["off"] for b in batch))
        other.append(statistics.geometric_mean(b[mode] for b in batch))
    return paired_ratio(off, other)


# -- the rounds design -----------------------------------------------------------------------


def run_rounds(
    bench: BenchServer, workload: str, args: argparse.Namespace, sampling: float | None
) -> dict[str, list[Measured]]:
    spec = spec_for(workload, args.clients, args.seconds)
    captures = mode_captures(["off", "on", "magnified"], args.magnify)
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
    parser.add_argument("--switched-seconds", type=int, default=1200)
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["off", "on", "magnified"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--magnify", type=int, default=10)
    parser.add_argument("--workloads", default="select-only,tpcb-like")
    parser.add_argument("--output", type=Path, default=HERE / "telemetry_overhead.md")
    args = parser.parse_args()
    record = Record(args.output.with_suffix(".json"))
    with bench_server() as bench:
        cost = sampler_cost(bench)
        print(f"sampler: {cost[0]:.2f} ms/s in this process, {cost[1]:.2f} ms/s in its backend")
        record.sampler(cost)
        for workload in args.workloads.split(","):
            warmup = bench.run(spec_for(workload, args.clients, 5), sampling=None).tps
            sampling = runner.sampling_rate(spec_for(workload, args.clients, 5), warmup)
            if args.switched_seconds:
                bench.vacuum()
                row = switched_row(workload, run_switched(bench, workload, args, sampling), args)
                record.add("switched", row)
                print(row, flush=True)
            if args.rounds:
                row = rounds_row(workload, run_rounds(bench, workload, args, sampling), args)
                record.add("rounds", row)
                print(row, flush=True)
    text = record.markdown()
    args.output.write_text(text)
    print(text)


# -- the record ------------------------------------------------------------------------------


def per_capture(magnified: Ratio, k: int) -> Ratio:
    """The TPS ratio one capture allows, from K captures' ratio (costs add up)."""
    return Ratio(*(1 - (1 - r) / k for r in (magnified.value, magnified.low, magnified.high)))


def measured_at() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def switched_row(workload: str, result: Switched, args: argparse.Namespace) -> dict[str, str]:
    row = {
        "workload": workload,
        "clients": str(args.clients),
        "measured": f"{measured_at()}, {args.switched_seconds} s",
        "TPS off": f"{result.off_tps:,.0f}",
        "blocks (dropped)": f"{len(result.blocks)} ({result.dropped})",
        "TPS on ÷ off (95 % CI)": "–",
        "K": "–",
        "one capture, from on×K (95 % CI)": "–",
    }
    if "on" in args.modes:
        row["TPS on ÷ off (95 % CI)"] = batch_ratio(result.blocks, "on").text(4)
    if "magnified" in args.modes:
        many = batch_ratio(result.blocks, "magnified")
        row["K"] = str(args.magnify)
        row["one capture, from on×K (95 % CI)"] = per_capture(many, args.magnify).text(4)
    row["counter samples in place"] = (
        f"{result.counters_in_place:.1%}, others ≤ {result.counters_late_ms:.0f} ms late"
    )
    row["host CPU busy"] = f"{result.busy_share:.1%}"
    row["other load"] = f"{result.other_share:.1%}"
    return row


def rounds_row(
    workload: str, per_mode: dict[str, list[Measured]], args: argparse.Namespace
) -> dict[str, str]:
    off, on, magnified = per_mode["off"], per_mode["on"], per_mode["magnified"]
    many = paired_ratio([m.tps for m in off], [m.tps for m in magnified])
    sampler = statistics.median(
        (m.own_us - o.own_us) * m.tps / 1000 for m, o in zip(on, off, strict=True)
    )
    everything = [m for ms in per_mode.values() for m in ms]
    return {
        "workload": workload,
        "clients": str(args.clients),
        "measured": f"{measured_at()}, {args.rounds} × {args.seconds} s",
        "TPS off": f"{statistics.median(m.tps for m in off):,.0f}",
        "TPS on ÷ off (95 % CI)": paired_ratio([m.tps for m in off], [m.tps for m in on]).text(4),
        "K": str(args.magnify),
        "TPS on×K ÷ off (95 % CI)": many.text(4),
        "one capture, from on×K (95 % CI)": per_capture(many, args.magnify).text(4),
        "sampler ms/s": f"{sampler:.2f}",
        "other load": f"{statistics.fmean(m.other_share for m in everything):.1%}",
    }


NOTES = {
    "switched": [
        "Blocks: one second of each mode in a random order; intervals: batches of "
        f"{BATCH_BLOCKS} consecutive blocks. Counter samples in place: the share of the first "
        "capture's once-a-second samples stamped inside a second it sampled in, and how late "
        "past the switch the others were (a sample is stamped after that tick's "
        "pg_stat_activity query, so one begun before the switch can be stamped after it). Host CPU "
        "busy: all CPU used on the host, share of all CPUs; below 100 % the sampler could take "
        "idle CPU instead of pgbench's or the server's. Other load: CPU of processes outside the "
        "measurement.",
    ],
    "rounds": [
        "Sampler ms/s: this process's extra CPU per second of run with one capture on (the "
        "sampler thread), while pgbench runs. Other load: as above, mean over the runs.",
    ],
}
TITLES = {
    "switched": "Switched (the figure of record): sampling on and off second by second in one run",
    "rounds": "Rounds: whole runs off / on / on×K, interleaved round by round",
}


@dataclass
class Record:
    """The latest row per design, workload and client count, kept in a JSON file beside the
    Markdown so runs of different configurations add up to one table."""

    path: Path

    def _read(self) -> dict[str, Any]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")

    def sampler(self, cost: tuple[float, float]) -> None:
        data = self._read()
        data["sampler"] = {
            "measured": measured_at(),
            "machine": describe_machine(),
            "process_ms_per_s": round(cost[0], 2),
            "backend_ms_per_s": round(cost[1], 2),
        }
        self._write(data)

    def add(self, design: str, row: dict[str, str]) -> None:
        data = self._read()
        data.setdefault(design, {})[f"{row['workload']}/{row['clients']}"] = row
        self._write(data)

    def markdown(self) -> str:
        data = self._read()
        cost = data["sampler"]
        lines = [
            "# Telemetry overhead: pgbench with the full telemetry capture against without",
            "",
            f"Machine: {cost['machine']}; PostgreSQL 18 embedded, scale 10.",
            "Script: `bench/telemetry_overhead.py` (its docstring describes both designs); "
            "each row is the latest run of its configuration (all rows: "
            f"`{self.path.name}`).",
            "Requirement: TPS with full telemetry ÷ without ≥ 0.99.",
            "",
            f"Sampler cost beside an idle server ({cost['measured']}): "
            f"{cost['process_ms_per_s']:.2f} ms of CPU per second in this process and "
            f"{cost['backend_ms_per_s']:.2f} ms/s in its backend.",
        ]
        for design in ("switched", "rounds"):
            rows = sorted(
                data.get(design, {}).values(), key=lambda r: (r["workload"], int(r["clients"]))
            )
            if not rows:
                continue
            columns = list(rows[0])
            lines += [
                "",
                f"## {TITLES[design]}",
                "",
                "| " + " | ".join(columns) + " |",
                "|" + "---|" * len(columns),
                *("| " + " | ".join(row.get(c, "–") for c in columns) + " |" for row in rows),
                "",
                *NOTES[design],
            ]
        lines += [
            "",
            "One capture, from on×K: 1 - (1 - ratio) / K for the ratio and both ends of its "
            "interval.",
        ]
        return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
