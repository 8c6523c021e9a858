"""pgbench's aggregated log files (``--aggregate-interval``), every version's layout.

pgbenchlab itself never asks for them (per-transaction logs give exact percentiles); the parser
reads what users bring from their own runs. The file rules are those of `logs`: one file per
thread, optionally zstd-compressed, a partial last line counted and ignored, anything else that
is malformed a `PgbenchParseError`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench.logs import IntervalStats, read_log_bytes


@dataclass(frozen=True)
class AggregateLogSummary:
    """A run's ``--aggregate-interval`` files, summed across threads by interval start."""

    pg_major: int
    files: tuple[str, ...]
    columns: int  # 6, 10 or 11 (≤14), 15 (15+)
    transactions_include_skipped: bool  # the file's num_transactions counts skipped ones (≤14)
    rate_limited: bool
    interval_s: int | None  # inferred from the starts; None with a single interval
    truncated_lines: int
    successful: int
    skipped: int
    intervals: tuple[IntervalStats, ...]


_AGGREGATE_LINE = re.compile(rb"[0-9]+(?: [0-9]+)*")
_OLD_COLUMNS = (6, 10, 11)  # ≤14: plain, with -R, with -R and -L
_NEW_COLUMNS = 15  # 15+: always


@dataclass(frozen=True)
class _AggregateLine:
    """One interval of one thread (latencies and lags in µs, as pgbench printed them)."""

    start: int
    transactions: int  # as printed: ≤14 includes skipped transactions
    latency: tuple[int, int, int, int]  # sum, sum of squares, min, max
    lag: tuple[int, int, int, int] | None
    skipped: int
    retried: int | None
    retries: int | None
    serialization: int | None
    deadlock: int | None


def analyse_aggregate_logs(
    paths: Iterable[Path | str], *, pg_major: int, rate_limited: bool | None = None
) -> AggregateLogSummary:
    """Intervals from a run's ``--aggregate-interval`` files, summed across thread files.

    ≤14 files have 6, 10 (-R) or 11 (-R -L) columns and count skipped transactions in
    num_transactions; 15+ files always have 15 columns, count successful transactions only, and
    have no column for all failures (only serialization and deadlock ones, with
    --failures-detailed). `rate_limited` matters for 15+ only (its lag columns are zeros without
    -R); None: -R is assumed when any lag column is non-zero."""
    files = tuple(Path(p) for p in paths)
    parsed: list[_AggregateLine] = []
    truncated, widths = 0, set[int]()
    for path in files:
        lines, cut = _aggregate_lines(path, pg_major)
        truncated += cut
        widths.update(width for width, _ in lines)
        parsed.extend(line for _, line in lines)
    if len(widths) > 1:
        raise PgbenchParseError(f"aggregate log files disagree on columns: {sorted(widths)}")
    columns = widths.pop() if widths else (_NEW_COLUMNS if pg_major >= 15 else 6)
    if pg_major < 15:
        rate_limited = columns >= 10
    elif rate_limited is None:
        rate_limited = any(line.lag is not None and any(line.lag) for line in parsed)
    intervals = _sum_intervals(parsed, pg_major, rate_limited)
    starts = [i.start_s for i in intervals]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    return AggregateLogSummary(
        pg_major=pg_major,
        files=tuple(str(f) for f in files),
        columns=columns,
        transactions_include_skipped=pg_major < 15,
        rate_limited=rate_limited,
        interval_s=math.gcd(*gaps) if gaps else None,
        truncated_lines=truncated,
        successful=sum(i.successful for i in intervals),
        skipped=sum(i.skipped for i in intervals),
        intervals=intervals,
    )


def _aggregate_lines(path: Path, pg_major: int) -> tuple[list[tuple[int, _AggregateLine]], int]:
    """(column count, line) for each complete line, and 1 if the file ends in a partial line."""
    text = read_log_bytes(path)
    rows = text.split(b"\n")
    truncated = 1 if rows[-1] else 0
    parsed = []
    for number, line in enumerate(rows[:-1], start=1):
        row = line.removesuffix(b"\r")  # Windows builds write text-mode files
        if not _AGGREGATE_LINE.fullmatch(row):
            raise PgbenchParseError(f"{path}:{number}: not an aggregate log line: {row[:80]!r}")
        fields = [int(f) for f in row.split(b" ")]
        parsed.append((len(fields), _aggregate_line(fields, pg_major, f"{path}:{number}")))
    return parsed, truncated


def _aggregate_line(fields: list[int], pg_major: int, where: str) -> _AggregateLine:
    expected = (_NEW_COLUMNS,) if pg_major >= 15 else _OLD_COLUMNS
    if len(fields) not in expected:
        raise PgbenchParseError(
            f"{where}: {len(fields)} columns; pgbench {pg_major} writes {expected}"
        )
    start, count, lat_sum, lat_sum2, lat_min, lat_max, *rest = fields
    lag = (rest[0], rest[1], rest[2], rest[3]) if len(rest) >= 4 else None
    new = pg_major >= 15
    return _AggregateLine(
        start=start,
        transactions=count,
        latency=(lat_sum, lat_sum2, lat_min, lat_max),
        lag=lag,
        skipped=rest[4] if len(rest) >= 5 else 0,
        retried=rest[5] if new else None,
        retries=rest[6] if new else None,
        serialization=rest[7] if new else None,
        deadlock=rest[8] if new else None,
    )


def _sum_intervals(
    lines: list[_AggregateLine], pg_major: int, rate_limited: bool
) -> tuple[IntervalStats, ...]:
    by_start: dict[int, list[_AggregateLine]] = {}
    for line in lines:
        by_start.setdefault(line.start, []).append(line)
    return tuple(_interval(by_start[s], pg_major, rate_limited) for s in sorted(by_start))


def _interval(lines: list[_AggregateLine], pg_major: int, rate_limited: bool) -> IntervalStats:
    """Thread lines of one interval summed. ≤14 sums latency over executed transactions only,
    so the latency count there is num_transactions minus skipped."""
    skipped = sum(line.skipped for line in lines)
    measured = [
        (line.transactions - (line.skipped if pg_major < 15 else 0), line) for line in lines
    ]
    successful = sum(n for n, _ in measured)
    latency = _moments(successful, [(n, line.latency) for n, line in measured])
    lag = _moments(successful, [(n, line.lag) for n, line in measured if line.lag is not None])
    new = pg_major >= 15
    return IntervalStats(
        start_s=lines[0].start,
        successful=successful,
        skipped=skipped,
        failed=None if new else 0,  # 15+ records no total; ≤14 has no failed transactions
        latency_mean_ms=latency[0],
        latency_stddev_ms=latency[1],
        latency_min_ms=latency[2],
        latency_max_ms=latency[3],
        lag_mean_ms=lag[0] if rate_limited else None,
        lag_max_ms=lag[3] if rate_limited else None,
        serialization_failures=sum(line.serialization or 0 for line in lines) if new else None,
        deadlock_failures=sum(line.deadlock or 0 for line in lines) if new else None,
        retried=sum(line.retried or 0 for line in lines) if new else None,
        retries=sum(line.retries or 0 for line in lines) if new else None,
    )


_NO_MOMENTS: tuple[None, None, None, None] = (None, None, None, None)


def _moments(
    n: int, parts: list[tuple[int, tuple[int, int, int, int]]]
) -> tuple[float, float, float, float] | tuple[None, None, None, None]:
    """Mean, population stddev, min and max in ms from per-thread sums (exact integers)."""
    parts = [(count, sums) for count, sums in parts if count > 0]
    if n <= 0 or not parts:
        return _NO_MOMENTS
    total = sum(sums[0] for _, sums in parts)
    squares = sum(sums[1] for _, sums in parts)
    variance = max(0, n * squares - total * total) / (n * n)
    low = min(sums[2] for _, sums in parts)
    high = max(sums[3] for _, sums in parts)
    return total / n / 1000, math.sqrt(variance) / 1000, low / 1000, high / 1000
