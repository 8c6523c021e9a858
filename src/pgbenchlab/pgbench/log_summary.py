"""Counts of (second, key) pairs turned into exact distributions and a per-second series."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_rank
from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench.log_lines import (
    LAG,
    LIMIT,
    OUTSIDE,
    RETRIES,
    SERVICE,
    measure_rows,
    word_counts,
)
from pgbenchlab.pgbench.log_records import (
    FAILURE_WORDS,
    Distribution,
    IntervalStats,
    Measure,
    TransactionLogSummary,
)

_MAX_SECONDS = 10_000_000  # a per-second series longer than this is a parsing mistake


@dataclass(frozen=True)
class ExactCounts:
    """A measure's distinct values (ascending) with their counts, over the whole window."""

    values: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    @classmethod
    def of(cls, rows: pl.DataFrame) -> ExactCounts:
        merged = rows.group_by("value").agg(pl.col("n").sum()).sort("value")
        return cls(merged["value"].to_numpy(), merged["n"].to_numpy())

    def histogram(self) -> LatencyHistogram:
        return LatencyHistogram.from_arrays(self.values, self.counts)

    def distribution(self, measure: Measure, sampled: bool) -> Distribution | None:
        """Exact nearest-rank percentiles: ranks taken on the cumulative counts."""
        if self.values.size == 0:
            return None
        n = int(self.counts.sum())
        cumulative = np.cumsum(self.counts)
        percentiles = tuple(
            (p, int(self.values[np.searchsorted(cumulative, percentile_rank(n, p))]) / 1000)
            for p in STANDARD_PERCENTILES
        )
        mean = self.histogram().total / n  # exact integer sum
        variance = float(np.dot(self.counts, (self.values - mean) ** 2)) / n
        return Distribution(
            measure=measure,
            sampled=sampled,
            count=n,
            min_ms=int(self.values[0]) / 1000,
            max_ms=int(self.values[-1]) / 1000,
            mean_ms=mean / 1000,
            stddev_ms=math.sqrt(variance) / 1000,
            percentiles_ms=percentiles,
        )


@dataclass(frozen=True)
class Counted:
    """What a log's lines counted, however they were read (whole here, or reduced on the host
    that wrote them): the measures' exact values, the line words, retries and seconds."""

    files: tuple[str, ...]
    lines: int
    outside: int
    truncated: int
    latency: ExactCounts
    lag: ExactCounts | None
    service: ExactCounts | None
    words: dict[str, int]
    retried: int | None
    retries: int | None
    per_second: tuple[IntervalStats, ...]


def summary_of(
    counted: Counted,
    *,
    pg_major: int,
    rate_limited: bool,
    sampling_rate: float,
    window: tuple[float, float] | None,
) -> TransactionLogSummary:
    """The summary of what a log's lines counted (both reading paths end here)."""
    sampled = sampling_rate < 1.0
    latency, lag, service, words = counted.latency, counted.lag, counted.service, counted.words
    return TransactionLogSummary(
        pg_major=pg_major,
        files=counted.files,
        sampling_rate=sampling_rate,
        rate_limited=rate_limited,
        window=window,
        lines=counted.lines,
        lines_outside_window=counted.outside,
        truncated_lines=counted.truncated,
        successful=int(latency.counts.sum()),
        skipped=words["skipped"],
        failed=sum(words[w] for w in FAILURE_WORDS),
        serialization_failures=words["serialization"],
        deadlock_failures=words["deadlock"],
        retried=counted.retried,
        retries=counted.retries,
        latency=latency.distribution(
            "latency_from_schedule" if rate_limited else "latency", sampled
        ),
        latency_histogram=latency.histogram(),
        lag=None if lag is None else lag.distribution("schedule_lag", sampled),
        service_time=None if service is None else service.distribution("service_time", sampled),
        service_time_histogram=None if service is None else service.histogram(),
        per_second=counted.per_second,
    )


def summarise(
    counts: pl.DataFrame,
    *,
    files: tuple[Path, ...],
    pg_major: int,
    rate_limited: bool,
    has_retries: bool,
    sampling_rate: float,
    window: tuple[float, float] | None,
    truncated: int,
) -> TransactionLogSummary:
    retries = measure_rows(counts, RETRIES) if has_retries else None
    counted = Counted(
        files=tuple(str(f) for f in files),
        lines=int(counts.filter(pl.col("key").is_between(-4, LIMIT))["n"].sum()),
        outside=int(counts.filter(pl.col("key") == OUTSIDE)["n"].sum()),
        truncated=truncated,
        latency=ExactCounts.of(measure_rows(counts, 0)),
        lag=ExactCounts.of(measure_rows(counts, LAG)) if rate_limited else None,
        service=ExactCounts.of(measure_rows(counts, SERVICE)) if rate_limited else None,
        words=word_counts(counts),
        retried=None if retries is None else int(retries.filter(pl.col("value") > 0)["n"].sum()),
        retries=None if retries is None else int((retries["value"] * retries["n"]).sum()),
        per_second=_per_second(counts, rate_limited, has_retries, pg_major),
    )
    return summary_of(
        counted,
        pg_major=pg_major,
        rate_limited=rate_limited,
        sampling_rate=sampling_rate,
        window=window,
    )


def _per_second(
    counts: pl.DataFrame, rate_limited: bool, has_retries: bool, pg_major: int
) -> tuple[IntervalStats, ...]:
    """Every second from the first to the last completion; seconds without lines are zeros."""
    kept = counts.filter(pl.col("key").is_between(-4, LIMIT))["epoch"]  # a line each
    if kept.is_empty():
        return ()
    first, last = int(kept.min()), int(kept.max())  # type: ignore[arg-type]
    if last - first >= _MAX_SECONDS:
        raise PgbenchParseError(f"log completion times span {last - first} s: not one run")
    table = pl.DataFrame({"epoch": pl.int_range(first, last + 1, eager=True)})
    parts = [_latency_by_second(measure_rows(counts, 0)), _status_by_second(counts)]
    if rate_limited:
        parts.append(_lag_by_second(measure_rows(counts, LAG)))
    if has_retries:
        parts.append(_retries_by_second(measure_rows(counts, RETRIES)))
    for part in parts:
        table = table.join(part, on="epoch", how="left")
    columns = table.sort("epoch").to_dict(as_series=False)
    return tuple(_second(columns, i, pg_major) for i in range(table.height))


def _latency_by_second(latency: pl.DataFrame) -> pl.DataFrame:
    value, n = pl.col("value"), pl.col("n")
    stats = latency.group_by("epoch").agg(
        successful=n.sum(),
        mean=(value.cast(pl.Float64) * n).sum() / n.sum(),
        min=value.min(),
        max=value.max(),
    )
    deviations = latency.join(stats.select("epoch", "mean"), on="epoch")
    spread = deviations.group_by("epoch").agg(squares=((value - pl.col("mean")) ** 2 * n).sum())
    return stats.join(spread, on="epoch").select(
        "epoch",
        "successful",
        "mean",
        "min",
        "max",
        std=(pl.col("squares") / pl.col("successful")).sqrt(),
    )


def _status_by_second(counts: pl.DataFrame) -> pl.DataFrame:
    key, n = pl.col("key"), pl.col("n").cast(pl.Int64)
    words = counts.filter(key.is_between(-4, -1))
    return words.group_by("epoch").agg(
        skipped=n.filter(key == -1).sum(),
        failed=n.filter(key.is_between(-4, -2)).sum(),
        serialization=n.filter(key == -3).sum(),
        deadlock=n.filter(key == -4).sum(),
    )


def _lag_by_second(lag: pl.DataFrame) -> pl.DataFrame:
    value, n = pl.col("value"), pl.col("n")
    return lag.group_by("epoch").agg(
        lag_mean=(value.cast(pl.Float64) * n).sum() / n.sum(), lag_max=value.max()
    )


def _retries_by_second(retries: pl.DataFrame) -> pl.DataFrame:
    value, n = pl.col("value"), pl.col("n")
    return retries.group_by("epoch").agg(
        retried=n.filter(value > 0).sum(), retries=(value * n).sum()
    )


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) / 1000


def _second(columns: dict[str, list[Any]], i: int, pg_major: int) -> IntervalStats:
    def count(name: str) -> int:
        value = columns[name][i] if name in columns else None
        return 0 if value is None else int(value)

    def optional(name: str, present: bool) -> int | None:
        return count(name) if present else None

    failures_exist = pg_major >= 15
    has_retries = "retried" in columns
    return IntervalStats(
        start_s=int(columns["epoch"][i]),
        successful=count("successful"),
        skipped=count("skipped"),
        failed=count("failed"),
        latency_mean_ms=_ms(columns["mean"][i]),
        latency_stddev_ms=_ms(columns["std"][i]),
        latency_min_ms=_ms(columns["min"][i]),
        latency_max_ms=_ms(columns["max"][i]),
        lag_mean_ms=_ms(columns["lag_mean"][i]) if "lag_mean" in columns else None,
        lag_max_ms=_ms(columns["lag_max"][i]) if "lag_max" in columns else None,
        serialization_failures=optional("serialization", failures_exist),
        deadlock_failures=optional("deadlock", failures_exist),
        retried=optional("retried", has_retries),
        retries=optional("retries", has_retries),
    )
