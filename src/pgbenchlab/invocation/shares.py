"""The report of a run split across load generators: the sum of each generator's own.

Counts (clients, threads, transactions, failures, skipped, late) and TPS add up; averages are
weighted by each generator's transactions (the latency stddev pooled the same way); maxima are
the largest. Per-script and per-statement tables are per generator only (in its stdout).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from pgbenchlab.invocation.command import Completed
from pgbenchlab.pgbench.report import PgbenchReport, parse_report

N = TypeVar("N", int, float)


def total_report(done: Completed) -> PgbenchReport:
    """The run's report: pgbench's own, or the sum of its load generators' (PgbenchParseError
    when one of them printed none)."""
    if not done.shares:
        return parse_report(done.stdout)
    return sum_reports([parse_report(share.completed.stdout) for share in done.shares])


def sum_reports(reports: Sequence[PgbenchReport]) -> PgbenchReport:
    transactions = sum(r.transactions for r in reports)
    failed = _sum([r.failed for r in reports])
    skipped = _sum([r.skipped for r in reports])
    late, late_of = _sum([r.late for r in reports]), _sum([r.late_of for r in reports])
    latency = _weighted(reports, [r.latency_avg_ms for r in reports])
    return replace(
        reports[0],
        clients=sum(r.clients for r in reports),
        threads=sum(r.threads for r in reports),
        transactions=transactions,
        transactions_planned=_sum([r.transactions_planned for r in reports]),
        failed=failed,
        failed_pct=_pct(failed, transactions + (failed or 0)),
        serialization_failures=_sum([r.serialization_failures for r in reports]),
        serialization_failures_pct=None,
        deadlock_failures=_sum([r.deadlock_failures for r in reports]),
        deadlock_failures_pct=None,
        retried=_sum([r.retried for r in reports]),
        retried_pct=None,
        retries=_sum([r.retries for r in reports]),
        skipped=skipped,
        skipped_pct=_pct(skipped, transactions + (skipped or 0)),
        late=late,
        late_of=late_of,
        late_pct=_pct(late, late_of),
        latency_avg_ms=latency,
        latency_avg_measured=all(r.latency_avg_measured for r in reports),
        latency_stddev_ms=_pooled_stddev(reports, latency),
        lag_avg_ms=_weighted(reports, [r.lag_avg_ms for r in reports]),
        lag_max_ms=_max([r.lag_max_ms for r in reports]),
        initial_connection_time_ms=_max([r.initial_connection_time_ms for r in reports]),
        average_connection_time_ms=_weighted(
            reports, [r.average_connection_time_ms for r in reports]
        ),
        tps=_sum([r.tps for r in reports]),
        tps_including_connections=_sum([r.tps_including_connections for r in reports]),
        scripts=(),
        statements=(),
    )


def _sum(values: Sequence[N | None]) -> N | None:
    """The sum, or None when a generator's report lacks the figure."""
    present = [v for v in values if v is not None]
    if len(present) < len(values):
        return None
    total = present[0]
    for value in present[1:]:
        total += value
    return total


def _max(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if len(present) == len(values) else None


def _pct(part: int | None, whole: int | None) -> float | None:
    return None if part is None or not whole else 100.0 * part / whole


def _weighted(reports: Sequence[PgbenchReport], values: list[float | None]) -> float | None:
    """The mean over all transactions of a per-generator mean."""
    total = sum(r.transactions for r in reports)
    if total == 0 or any(v is None for v in values):
        return None
    return (
        sum(r.transactions * v for r, v in zip(reports, values, strict=True) if v is not None)
        / total
    )


def _pooled_stddev(reports: Sequence[PgbenchReport], mean: float | None) -> float | None:
    """The stddev of all transactions' latencies from each generator's count, mean and stddev."""
    total = sum(r.transactions for r in reports)
    if mean is None or total == 0:
        return None
    square_sum = 0.0
    for r in reports:
        if r.latency_stddev_ms is None or r.latency_avg_ms is None:
            return None
        square_sum += r.transactions * (r.latency_stddev_ms**2 + r.latency_avg_ms**2)
    return math.sqrt(max(0.0, square_sum / total - mean**2))
