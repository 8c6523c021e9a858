"""A run's per-transaction logs reduced on the hosts that wrote them (`log_reducer`), merged
and summarised into the same `TransactionLogSummary` the whole-log path gives: the same exact
distributions (from the exact value counts), histograms and per-second series."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench.log_records import (
    FAILURE_WORDS,
    IntervalStats,
    TransactionLogSummary,
)
from pgbenchlab.pgbench.log_reducer import SECOND_FIELDS, Reduction
from pgbenchlab.pgbench.log_summary import Counted, ExactCounts, summary_of

REDUCTION_SUFFIX = ".reduction.json"  # a host's reduction among a run's artifacts


def read_reduction(path: Path) -> Reduction:
    """A reduction brought back from a host (PgbenchParseError when it is not one)."""
    try:
        return Reduction.from_json(path.read_text())
    except ValueError as exc:
        raise PgbenchParseError(f"{path.name}: {exc}") from None


def merge_reductions(parts: Sequence[Reduction]) -> Reduction:
    merged = Reduction()
    for part in parts:
        merged = merged.merge(part)
    return merged


def summarise_reduction(
    reduction: Reduction,
    *,
    pg_major: int,
    rate_limited: bool,
    has_retries: bool,
    sampling_rate: float,
    window: tuple[float, float] | None,
) -> TransactionLogSummary:
    """The summary of a (merged) reduction; PgbenchParseError when its logs had malformed
    lines, as the whole-log path raises."""
    _check(reduction, pg_major)
    retries = reduction.values["retries"]
    counted = Counted(
        files=tuple(reduction.files),
        lines=reduction.lines,
        outside=reduction.outside,
        truncated=reduction.truncated,
        latency=_exact(reduction, "latency"),
        lag=_exact(reduction, "lag") if rate_limited else None,
        service=_exact(reduction, "service") if rate_limited else None,
        words=dict(reduction.words),
        retried=sum(n for v, n in retries.items() if v > 0) if has_retries else None,
        retries=sum(v * n for v, n in retries.items()) if has_retries else None,
        per_second=_per_second(reduction, rate_limited, has_retries, pg_major),
    )
    return summary_of(
        counted,
        pg_major=pg_major,
        rate_limited=rate_limited,
        sampling_rate=sampling_rate,
        window=window,
    )


def _check(reduction: Reduction, pg_major: int) -> None:
    bad = reduction.malformed
    if pg_major < 15:  # no failures before 15: such a word is malformed there
        bad += sum(reduction.words[w] for w in FAILURE_WORDS)
    if bad:
        names = ", ".join(reduction.files)
        raise PgbenchParseError(
            f"{bad} malformed pgbench {pg_major} log lines in {names}"
            " (missing fields, negative numbers, or unknown words in the time column)"
        )


def _exact(reduction: Reduction, measure: str) -> ExactCounts:
    pairs = sorted(reduction.values[measure].items())
    return ExactCounts(
        np.array([v for v, _ in pairs], dtype=np.int64),
        np.array([n for _, n in pairs], dtype=np.int64),
    )


def _per_second(
    reduction: Reduction, rate_limited: bool, has_retries: bool, pg_major: int
) -> tuple[IntervalStats, ...]:
    """Every second from the first to the last line in the window; seconds without lines are
    zeros (as `log_summary` gives them)."""
    if not reduction.seconds:
        return ()
    first, last = min(reduction.seconds), max(reduction.seconds)
    failures_exist = pg_major >= 15
    empty = [0] * len(SECOND_FIELDS)
    series = []
    for start in range(first, last + 1):
        second = dict(zip(SECOND_FIELDS, reduction.seconds.get(start, empty), strict=True))
        series.append(_interval(start, second, rate_limited, has_retries, failures_exist))
    return tuple(series)


def _interval(
    start: int,
    second: dict[str, int | None],
    rate_limited: bool,
    has_retries: bool,
    failures_exist: bool,
) -> IntervalStats:
    def count(name: str) -> int:
        return second[name] or 0

    n, total, squares = count("successful"), count("latency_sum"), count("latency_squares")
    return IntervalStats(
        start_s=start,
        successful=n,
        skipped=count("skipped"),
        failed=sum(count(w) for w in FAILURE_WORDS),
        latency_mean_ms=total / n / 1000 if n else None,
        latency_stddev_ms=math.sqrt(n * squares - total * total) / n / 1000 if n else None,
        latency_min_ms=_ms(second["latency_min"]),
        latency_max_ms=_ms(second["latency_max"]),
        lag_mean_ms=count("lag_sum") / n / 1000 if rate_limited and n else None,
        lag_max_ms=_ms(second["lag_max"]) if rate_limited else None,
        serialization_failures=count("serialization") if failures_exist else None,
        deadlock_failures=count("deadlock") if failures_exist else None,
        retried=count("retried") if has_retries else None,
        retries=count("retries") if has_retries else None,
    )


def _ms(value: int | None) -> float | None:
    return None if value is None else value / 1000
