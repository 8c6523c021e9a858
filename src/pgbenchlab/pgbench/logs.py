"""pgbench's per-transaction log files (``-l``); aggregated ones are in `aggregate_logs`.

pgbench writes one file per thread (``prefix.PID``, ``prefix.PID.1``, …); archived copies may be
zstd-compressed (``.zst``). Both kinds are accepted, with LF or CRLF line ends. A file cut short
by a killed pgbench ends in a partial line: it is ignored and counted in ``truncated_lines``.
Any other line that does not have the expected shape (number of fields, integers where
integers belong, a known word in the time column for that version) raises `PgbenchParseError`;
so do unreadable ``.zst`` files. Nothing else is raised for any file content.

Per-transaction logs are read with polars' streaming engine in one pass whose memory does not
grow with the file: every line becomes a (completion second, key) pair and only the count of
each distinct pair is kept. Latencies are integer µs, so these counts give *exact* nearest-rank
percentiles (`stats.percentile_rank`) and exact per-second figures.

Sampled logs (``--sampling-rate``) are analysed as they are: counts are the raw sampled counts,
never scaled, and their distributions are flagged ``sampled``.

Modules: `log_records` (what is returned), `log_files` (thread files, ``.zst``, cut lines),
`log_lines` (the one-pass count of keys), `log_summary` (distributions, per-second series).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from pgbenchlab.pgbench.log_files import prepare, read_log_bytes, thread_log_files
from pgbenchlab.pgbench.log_lines import check_malformed, count_keys
from pgbenchlab.pgbench.log_records import (
    FAILURE_WORDS,
    MEASURE_DESCRIPTIONS,
    Distribution,
    IntervalStats,
    Measure,
    TransactionLogSummary,
)
from pgbenchlab.pgbench.log_summary import summarise

__all__ = [
    "FAILURE_WORDS",
    "MEASURE_DESCRIPTIONS",
    "Distribution",
    "IntervalStats",
    "Measure",
    "TransactionLogSummary",
    "analyse_transaction_logs",
    "read_log_bytes",
    "thread_log_files",
]


def analyse_transaction_logs(
    paths: Iterable[Path | str],
    *,
    pg_major: int,
    rate_limited: bool,
    has_retries_column: bool,
    sampling_rate: float = 1.0,
    window: tuple[float, float] | None = None,
    clock_offsets_s: Mapping[Path, float] | None = None,
) -> TransactionLogSummary:
    """Counts, exact distributions and a per-second series from a run's ``-l`` files.

    `pg_major`: pgbench's major version (9 for 9.6). `rate_limited`: the run used ``-R`` (lines
    carry a schedule-lag column); `has_retries_column`: 15+ with ``--max-tries`` other than 1.
    `window` = (start, end) in epoch seconds keeps only transactions completed in [start, end),
    e.g. to cut the warmup; lines outside are still checked, and counted apart.
    `clock_offsets_s`: files written on a host whose clock is ahead of ours by that much
    (a load generator's): their completion times are moved onto our clock first."""
    if has_retries_column and pg_major < 15:
        raise ValueError("pgbench logs have a retries column only from 15 on")
    if not 0 < sampling_rate <= 1:
        raise ValueError(f"sampling rate must be in (0, 1], got {sampling_rate}")
    files = tuple(Path(p) for p in paths)
    with tempfile.TemporaryDirectory(prefix="pgbenchlab-logs-") as scratch:
        prepared, truncated = prepare(files, Path(scratch), clock_offsets_s)
        counts = count_keys(prepared, rate_limited, has_retries_column, window)
    check_malformed(counts, pg_major, files)
    return summarise(
        counts,
        files=files,
        pg_major=pg_major,
        rate_limited=rate_limited,
        has_retries=has_retries_column,
        sampling_rate=sampling_rate,
        window=window,
        truncated=truncated,
    )
