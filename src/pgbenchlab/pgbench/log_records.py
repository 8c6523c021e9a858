"""What a run's per-transaction log files say: the records `analyse_transaction_logs` returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pgbenchlab.analysis.histogram import LatencyHistogram

Measure = Literal["latency", "latency_from_schedule", "schedule_lag", "service_time"]
MEASURE_DESCRIPTIONS: dict[str, str] = {
    "latency": "transaction latency",
    "latency_from_schedule": "latency counted from the scheduled start (-R; includes schedule lag)",
    "schedule_lag": "schedule lag: actual start minus scheduled start (-R)",
    "service_time": "service time: latency minus schedule lag (-R)",
}
FAILURE_WORDS = ("failed", "serialization", "deadlock")  # 15+


@dataclass(frozen=True)
class Distribution:
    """Exact distribution of one measure over successful transactions, in ms."""

    measure: Measure
    sampled: bool  # from a --sampling-rate sample, not every transaction
    count: int
    min_ms: float
    max_ms: float
    mean_ms: float
    stddev_ms: float  # population standard deviation, as pgbench computes it
    percentiles_ms: tuple[tuple[str, float], ...]  # (p, value) for STANDARD_PERCENTILES

    @property
    def description(self) -> str:
        return MEASURE_DESCRIPTIONS[self.measure] + (" (sampled)" if self.sampled else "")

    def percentile_ms(self, p: str) -> float:
        return dict(self.percentiles_ms)[p]


@dataclass(frozen=True)
class IntervalStats:
    """One interval (one second for per-transaction logs) of a run, by completion time.

    Latency figures are over successful transactions and None when there were none; a field
    the source does not record is None."""

    start_s: int
    successful: int
    skipped: int
    failed: int | None
    latency_mean_ms: float | None
    latency_stddev_ms: float | None
    latency_min_ms: float | None
    latency_max_ms: float | None
    lag_mean_ms: float | None = None
    lag_max_ms: float | None = None
    serialization_failures: int | None = None
    deadlock_failures: int | None = None
    retried: int | None = None
    retries: int | None = None


@dataclass(frozen=True)
class TransactionLogSummary:
    """What a run's per-transaction log files say (raw counts; see `sampling_rate`)."""

    pg_major: int
    files: tuple[str, ...]
    sampling_rate: float
    rate_limited: bool
    window: tuple[float, float] | None
    lines: int  # complete lines in the window (all of them without one)
    lines_outside_window: int
    truncated_lines: int
    successful: int
    skipped: int
    failed: int  # all failures; the next two are the --failures-detailed share
    serialization_failures: int
    deadlock_failures: int
    retried: int | None  # lines with retries > 0 (None without a retries column)
    retries: int | None
    latency: Distribution | None  # measure "latency_from_schedule" under -R
    latency_histogram: LatencyHistogram
    lag: Distribution | None
    service_time: Distribution | None
    service_time_histogram: LatencyHistogram | None
    per_second: tuple[IntervalStats, ...]  # every second from the first to the last line

    @property
    def sampled(self) -> bool:
        return self.sampling_rate < 1.0
