"""Speed and memory of per-transaction log analysis (`pgbenchlab.pgbench.logs`).

    .venv/bin/python bench/log_analysis.py [--runs 5] [--dir /tmp/pgbenchlab-bench] [--no-big]

The figure of record is the command without options (a few minutes once the logs exist;
generating them the first time takes a few more).

Decided before the run:
- Estimator: the median wall time of the `analyse_transaction_logs` call on the 10 M-line log,
  with its distribution-free 95 % interval (two order statistics, `figure.median_interval`);
  peak memory is the largest RSS of the 100 M-line runs, a maximum, judged as measured.
- Design: each run in a fresh child process, after one warm-up run (page cache, imports);
  `wc -l` on the same files timed between the runs, for the ratio.
- Rounds: 8 runs of the 10 M-line log (the sign test's interval needs at least 6 for 95 %),
  3 of the -R log, 1 of the 100 M-line log.
- Bar: 10 M lines ≤ 1.5 s (the whole interval); peak RSS ≤ 1 GiB for 100 M lines.

Generates synthetic pgbench logs in the real line format (4 thread files, 8 clients, ~65k
transactions/s, lognormal latencies with a heavy tail) under --dir, not in the repository:
10 million lines (≈ 330 MB), the same with -R columns (schedule lag, some skipped lines), and
100 million lines (≈ 3.3 GB) for the memory check. Existing files are reused.

The logs are synthetic: the figure is the analysis's speed on a log of real format, not a
measurement of pgbench. Each measurement runs the analysis in a fresh child process, which
reports the wall time of the `analyse_transaction_logs` call and its own peak RSS. `wc -l` on
the same files is timed in the same rounds, interleaved, so that the ratio survives a noisy
machine. Medians are printed and written to bench/log_analysis.md with the command, the machine
and its load; earlier runs' verdicts stay in its History section.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from cpuclock import machine_busy_s, own_cpu_s
from figure import Bar, verdict_line

HERE = Path(__file__).resolve().parent
THREADS, CLIENTS_PER_THREAD, TPS = 4, 2, 65_000
START_US = 1_795_333_837_000_000
CHUNK = 2_000_000


# Synthetic logs ---------------------------------------------------------------------------------


def latencies(rng: np.random.Generator, n: int) -> np.ndarray:
    """Lognormal body around 110 µs; 0.2 % of transactions from a Pareto tail (up to 5 s)."""
    values = rng.lognormal(np.log(110.0), 0.45, n)
    tail = rng.random(n) < 0.002
    values[tail] = 300 + rng.pareto(1.3, int(tail.sum())) * 400
    return np.minimum(np.round(values), 5e6).astype(np.int64)


def thread_chunk(
    rng: np.random.Generator, n: int, clock: int, thread: int, next_no: np.ndarray, rate: bool
) -> tuple[pl.DataFrame, int]:
    """n lines of one thread's file, completions from `clock` on (µs)."""
    done = clock + np.cumsum(rng.exponential(1e6 * THREADS / TPS, n)).astype(np.int64)
    local = rng.integers(0, CLIENTS_PER_THREAD, n)
    numbers = np.empty(n, dtype=np.int64)
    for client in range(CLIENTS_PER_THREAD):
        mine = local == client
        numbers[mine] = next_no[client] + np.arange(int(mine.sum()))
        next_no[client] += int(mine.sum())
    columns: dict[str, object] = {
        "client": local + thread * CLIENTS_PER_THREAD,
        "no": numbers,
        "time": latencies(rng, n),
        "script": np.zeros(n, dtype=np.int64),
        "epoch": done // 1_000_000,
        "us": done % 1_000_000,
    }
    frame = pl.DataFrame(columns)
    if rate:
        lag = np.round(rng.exponential(60.0, n)).astype(np.int64)
        skipped = rng.random(n) < 0.005
        time_text = pl.Series(frame["time"].to_numpy() + lag).cast(pl.String)
        frame = frame.with_columns(
            time=pl.when(pl.Series(skipped)).then(pl.lit("skipped")).otherwise(time_text),
            lag=pl.Series(np.where(skipped, 0, lag)),
        )
    return frame, int(done[-1])


def generate(prefix: Path, lines: int, rate: bool) -> list[Path]:
    files = [Path(f"{prefix}.4242" + (f".{t}" if t else "")) for t in range(THREADS)]
    marker = Path(f"{prefix}.done")
    if marker.exists() and all(f.exists() for f in files):
        return files
    print(f"generating {lines:,} lines under {prefix} ...", file=sys.stderr)
    rng = np.random.default_rng(20_251_122)
    for thread, path in enumerate(files):
        clock, next_no = START_US, np.ones(CLIENTS_PER_THREAD, dtype=np.int64)
        with path.open("wb") as out:
            for first in range(0, lines // THREADS, CHUNK):
                n = min(CHUNK, lines // THREADS - first)
                frame, clock = thread_chunk(rng, n, clock, thread, next_no, rate)
                frame.write_csv(out, separator=" ", include_header=False, quote_style="never")
    marker.write_text(f"{lines}\n")
    return files


# Measurements ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    seconds: float  # the analyse_transaction_logs call
    cpu_seconds: float  # user + system CPU time of that call, all threads
    process_seconds: float  # the whole child process, interpreter start-up included
    peak_rss_mib: float


def child(files: list[str], rate: bool) -> None:
    """Child mode: analyse, then report the call's time and this process's peak RSS."""
    from pgbenchlab.pgbench.logs import analyse_transaction_logs

    cpu, start = own_cpu_s(), time.perf_counter()
    summary = analyse_transaction_logs(
        files, pg_major=18, rate_limited=rate, has_retries_column=False
    )
    seconds, cpu = time.perf_counter() - start, own_cpu_s() - cpu
    assert summary.latency is not None and summary.per_second
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = {"seconds": seconds, "cpu": cpu, "rss_kib": peak_kib, "lines": summary.lines}
    print(json.dumps(report))


def measure(files: list[Path], rate: bool) -> Sample:
    argv = [sys.executable, __file__, "--child", "rate" if rate else "plain", *map(str, files)]
    start = time.perf_counter()
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    process_seconds = time.perf_counter() - start
    report = json.loads(done.stdout)
    return Sample(report["seconds"], report["cpu"], process_seconds, report["rss_kib"] / 1024)


def wc_seconds(files: list[Path]) -> float:
    start = time.perf_counter()
    subprocess.run(["wc", "-l", *map(str, files)], check=True, capture_output=True)
    return time.perf_counter() - start


class OtherLoad:
    """CPU time used by other processes while the benchmark runs, as a share of all CPUs:
    machine-wide busy time (/proc/stat) minus this script's own and its children's."""

    def __init__(self) -> None:
        self.start = (machine_busy_s(), self._ours(), time.perf_counter())

    @staticmethod
    def _ours() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def share(self) -> float:
        busy0, ours0, wall0 = self.start
        others = (machine_busy_s() - busy0) - (self._ours() - ours0)
        capacity = (os.cpu_count() or 1) * (time.perf_counter() - wall0)
        return max(0.0, others / capacity)


def rounds(files: list[Path], rate: bool, runs: int) -> tuple[list[Sample], list[float]]:
    measure(files, rate)  # warm the page cache and the child's imports
    samples, wc = [], []
    for _ in range(runs):
        wc.append(wc_seconds(files))
        samples.append(measure(files, rate))
    return samples, wc


# Report -------------------------------------------------------------------------------------------


def describe(name: str, samples: list[Sample], wc: list[float], size: int) -> list[str]:
    call = statistics.median(s.seconds for s in samples)
    whole = statistics.median(s.process_seconds for s in samples)
    wc_median = statistics.median(wc)
    ratios = [s.seconds / w for s, w in zip(samples, wc, strict=True)]
    rss = max(s.peak_rss_mib for s in samples)
    cpu = statistics.median(s.cpu_seconds for s in samples)
    return [
        f"| {name} | {size / 2**20:,.0f} MiB | {len(samples)} | {call:.2f} s "
        f"({min(s.seconds for s in samples):.2f}–{max(s.seconds for s in samples):.2f}) "
        f"| {cpu:.2f} s | {whole:.2f} s | {wc_median:.3f} s | {statistics.median(ratios):.1f}× "
        f"| {rss:,.0f} MiB |"
    ]


SPEED = Bar("10 M lines ≤ 1.5 s", 1.5, at_most=True)
MEMORY = Bar("peak RSS ≤ 1 GiB for 100 M lines", 1024.0, at_most=True)


@dataclass(frozen=True)
class Verdict:
    seconds_10m: tuple[float, float, float]  # median and its interval
    rss_100m_mib: float | None

    def judged(self) -> list[tuple[Bar, str]]:
        _, low, high = self.seconds_10m
        rss = self.rss_100m_mib
        return [
            (SPEED, SPEED.verdict(low, high)),
            (MEMORY, "not shown" if rss is None else MEMORY.verdict(rss, rss)),
        ]


def write_markdown(
    provenance: list[str], rows: list[str], load: tuple[float, float, float], verdict: Verdict
) -> str:
    before, after, others = load
    # The load averages count the benchmark's own threads (after) and whatever ran just before
    # it (before, a minute's decay): only other processes' CPU share during the runs says
    # whether the machine was shared.
    loaded = others > 0.10
    condition = (
        f"**Taken under load**: other users of this shared machine used {others:.0%} of its CPU"
        " time during the runs, so absolute times are inflated; compare only figures from one run."
        if loaded
        else f"The machine was quiet (other processes used {others:.0%} of its CPU time)."
    )
    header = (
        "| log | size | runs | analysis call, median (min–max) | its CPU time | whole process "
        "| `wc -l` | call / `wc -l` | peak RSS |"
    )
    median, low, high = verdict.seconds_10m
    memory = (
        "not measured (--no-big)"
        if verdict.rss_100m_mib is None
        else f"{verdict.rss_100m_mib:,.0f} MiB"
    )
    return f"""# Log analysis benchmark

{chr(10).join(provenance)}
{verdict_line(verdict.judged())}

`bench/log_analysis.py` analyses synthetic per-transaction logs in the real pgbench line format
(4 thread files, ~65k transactions/s, lognormal latencies with a heavy tail) into exact
percentiles, distributions and the per-second series, with `analyse_transaction_logs`, each run
in a fresh process. Targets: 10 M lines in ≤ 1.5 s wall, peak RSS ≤ 1 GiB for 100 M lines.

## Result

* software: Python {platform.python_version()}, polars {pl.__version__}
* load: 1-minute load average {before:.2f} before, {after:.2f} after. {condition}
* 10 M lines: median {median:.2f} s (95 % interval {low:.2f} – {high:.2f} s).
  Peak RSS for 100 M lines: {memory}.

{header}
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

"Analysis call" is the wall time of `analyse_transaction_logs` (percentiles, histograms and the
per-second series); "its CPU time" is the user + system time of that call over all threads
(polars keeps both CPUs busy); "whole process" adds interpreter start-up and imports. Peak RSS
is the child's `ru_maxrss` (largest of its runs), imports included: memory stays flat as the
log grows because only counts per (second, value) are kept.

The -R log needs three keys per line (latency from the scheduled start, schedule lag, service
time), so its single pass groups three times as many rows; rate-limited runs are usually far
below 65k transactions/s, so their logs are smaller.
"""


def main() -> None:
    # Imported here, not at the top: the analysis children run this file too, and their time
    # and peak RSS are the figure; the harness would add the server-side modules to both.
    from figure import Provenance, median_interval, write_figure

    provenance = Provenance.start()
    parser = argparse.ArgumentParser(description="log analysis speed and memory")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/pgbenchlab-bench"))
    parser.add_argument("--no-big", action="store_true", help="skip the 100 M-line log")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    logs = [("10 M lines", args.dir / "tx10m", 10_000_000, False, args.runs)]
    logs.append(("10 M lines, -R (lag, skipped)", args.dir / "rate10m", 10_000_000, True, 3))
    if not args.no_big:
        logs.append(("100 M lines", args.dir / "tx100m", 100_000_000, False, 1))
    prepared = [
        (name, generate(prefix, n, rate), rate, runs) for name, prefix, n, rate, runs in logs
    ]
    before, others = os.getloadavg()[0], OtherLoad()
    rows, medians, big_rss = [], {}, None  # medians: (median, low, high) per log
    for name, files, rate, runs in prepared:
        samples, wc = rounds(files, rate, runs)
        size = sum(f.stat().st_size for f in files)
        rows += describe(name, samples, wc, size)
        medians[name] = median_interval([s.seconds for s in samples])
        if name.startswith("100 M"):
            big_rss = max(s.peak_rss_mib for s in samples)
        print(rows[-1])
    load = (before, os.getloadavg()[0], others.share())
    verdict = Verdict(medians["10 M lines"], big_rss)
    text = write_markdown(provenance.header(), rows, load, verdict)
    write_figure(HERE / "log_analysis.md", text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[3:], sys.argv[2] == "rate")
    else:
        main()
