"""A service-level objective and whether one run met it.

An SLO is a comma-separated list of upper bounds: ``"p99 <= 10ms, late <= 1%, skipped <= 0.1%"``.
Latency metrics (``p50 p90 p95 p99 p99.9 mean``) take a time with its unit (``us``, ``ms``,
``s``); the shares ``late`` (transactions over the latency limit, of those that ran, as pgbench
counts them) and ``skipped`` (transactions pgbench skipped as already late, of all scheduled)
take a percentage or a fraction. A run also fails when its latency, counted from each
transaction's scheduled start, grows through the run: the backlog grows (in pgbench's schedule
lag when every client is busy, in the server's queues otherwise), the server fell behind the
offered rate, and a longer run would have been later still.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgbenchlab.errors import UserError

LATENCY_METRICS: dict[str, str] = {
    "p50": "50",
    "p90": "90",
    "p95": "95",
    "p99": "99",
    "p99.9": "99.9",
    "p999": "99.9",
    "mean": "mean",
}
SHARE_METRICS = ("late", "skipped")
_TIME_UNITS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}
_CLAUSE = re.compile(r"^\s*(?P<metric>[a-z0-9.]+)\s*(?P<op><=|≤|<)\s*(?P<value>\S+)\s*$", re.I)
_NUMBER = re.compile(r"^(?P<number>\d+(?:\.\d+)?|\.\d+)(?P<unit>[a-zµ%]*)$", re.I)

# A queue that keeps up is stationary; one that does not is later with every second: by
# (offered − served) ÷ offered seconds per second. The backlog grows when the slope of the
# per-second latency (from the schedule) is over LAG_SLOPE and the last third of the run is later
# than the first by a floor (this share of the run's -L, or of the SLO's latency bound; at least
# 1 ms), which keeps a brief stall from counting.
LAG_SLOPE = 0.02
LAG_GROWTH_FLOOR_SHARE = 0.1


class SloError(UserError):
    """The --slo text cannot be read."""


@dataclass(frozen=True)
class Bound:
    metric: str  # a key of LATENCY_METRICS, or late / skipped
    limit: float  # ms for latency metrics, a fraction for shares

    @property
    def is_latency(self) -> bool:
        return self.metric in LATENCY_METRICS

    def text(self) -> str:
        if self.is_latency:
            return f"{self.metric} <= {self.limit:g}ms"
        return f"{self.metric} <= {self.limit * 100:g}%"


@dataclass(frozen=True)
class Slo:
    bounds: tuple[Bound, ...]

    @property
    def text(self) -> str:
        return ", ".join(b.text() for b in self.bounds)

    @property
    def latency_bound_ms(self) -> float | None:
        """The loosest latency bound: the default -L, so that `late` means late for the SLO."""
        limits = [b.limit for b in self.bounds if b.is_latency]
        return max(limits) if limits else None

    @property
    def needs_limit(self) -> bool:
        return any(not b.is_latency for b in self.bounds)


def parse_slo(text: str) -> Slo:
    clauses = [c for c in text.split(",") if c.strip()]
    if not clauses:
        raise SloError("--slo: empty; give bounds such as 'p99 <= 10ms, late <= 1%'")
    bounds = tuple(_parse_clause(c.strip()) for c in clauses)
    seen = [b.metric for b in bounds]
    if len(set(seen)) != len(seen):
        raise SloError(f"--slo: a metric is bounded twice in '{text}'")
    return Slo(bounds)


def _parse_clause(clause: str) -> Bound:
    match = _CLAUSE.match(clause)
    if match is None:
        raise SloError(f"--slo: cannot read '{clause}': write METRIC <= VALUE, e.g. p99 <= 10ms")
    metric = match["metric"].lower()
    if metric not in LATENCY_METRICS and metric not in SHARE_METRICS:
        known = ", ".join([*LATENCY_METRICS, *SHARE_METRICS])
        raise SloError(f"--slo: unknown metric '{match['metric']}' (known: {known})")
    number = _NUMBER.match(match["value"])
    if number is None:
        raise SloError(f"--slo: '{match['value']}' in '{clause}' is not a number with a unit")
    value, unit = float(number["number"]), number["unit"].lower()
    if metric in LATENCY_METRICS:
        if unit not in _TIME_UNITS:
            raise SloError(f"--slo: '{clause}' needs a time unit (us, ms, s), e.g. 10ms")
        limit = value * _TIME_UNITS[unit]
    elif unit == "%":
        limit = value / 100
    elif unit == "" and value <= 1:
        limit = value
    else:
        raise SloError(f"--slo: '{clause}' needs a percentage (1%) or a fraction (0.01)")
    if not math.isfinite(limit) or limit <= 0 or (metric in SHARE_METRICS and limit > 1):
        raise SloError(f"--slo: '{clause}' is out of range")
    return Bound(metric, limit)


@dataclass(frozen=True)
class RunFigures:
    """What a verdict reads of one open-loop run."""

    offered: float  # -R, transactions per second
    achieved: float | None  # pgbench's TPS
    transactions: int  # successful
    skipped: int
    failed: int
    late: int | None
    latency_ms: Mapping[str, float]  # LATENCY_METRICS values → ms ("mean" included)
    latency_series_ms: Sequence[float]  # per second, the mean latency from the schedule
    clients: int
    ok: bool = True
    error: str | None = None
    latency_limit_ms: float | None = None  # the run's -L

    @property
    def scheduled(self) -> int:
        return self.transactions + self.skipped + self.failed

    def share(self, metric: str) -> float | None:
        if metric == "skipped":
            return self.skipped / self.scheduled if self.scheduled else None
        if self.late is None or not self.transactions:
            return None
        return self.late / self.transactions

    @property
    def client_busy(self) -> float | None:
        """Little's law: the share of the clients busy on average (1: every client always)."""
        mean = self.latency_ms.get("mean")
        if mean is None or not self.achieved or not self.clients:
            return None
        return self.achieved * mean / 1000 / self.clients


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]  # why it failed (empty when it passed), or notes

    @property
    def text(self) -> str:
        return ("pass" if self.passed else "fail") + (
            f" ({'; '.join(self.reasons)})" if self.reasons else ""
        )


def judge(slo: Slo, run: RunFigures) -> Verdict:
    """Whether the run met every bound of the SLO and kept up with its schedule."""
    if not run.ok:
        return Verdict(False, (f"run did not complete: {run.error or 'no result'}",))
    if run.transactions == 0:
        return Verdict(False, ("no transaction completed",))
    reasons = [r for b in slo.bounds if (r := _breach(b, run)) is not None]
    limit = run.latency_limit_ms or slo.latency_bound_ms or 0.0
    floor = max(1.0, LAG_GROWTH_FLOOR_SHARE * limit)
    growth = backlog_growth(run.latency_series_ms, floor)
    if growth is not None:
        reasons.append(growth)
    busy = run.client_busy
    if reasons and busy is not None and busy > 0.8:
        reasons.append(f"clients {busy:.0%} busy: the client may be the limit")
    return Verdict(not reasons, tuple(reasons))


def _breach(bound: Bound, run: RunFigures) -> str | None:
    if bound.is_latency:
        value = run.latency_ms.get(LATENCY_METRICS[bound.metric])
        if value is None:
            return f"{bound.metric} unknown (no per-transaction log)"
        return None if value <= bound.limit else f"{bound.metric} {value:g}ms > {bound.limit:g}ms"
    share = run.share(bound.metric)
    if share is None:
        return f"{bound.metric} share unknown"
    if share <= bound.limit:
        return None
    return f"{bound.metric} {share:.2%} > {bound.limit:.2%}"


def backlog_growth(latency_ms: Sequence[float], floor_ms: float = 1.0) -> str | None:
    """Why the backlog grew through the run (None: it did not, or too few seconds): the
    per-second latency's least-squares slope says the server fell behind by more than
    `LAG_SLOPE` of the offered load, and it rose from the first third to the last by more than
    the floor."""
    n = len(latency_ms)
    if n < 3:
        return None
    third = n // 3
    first = sum(latency_ms[:third]) / third
    last = sum(latency_ms[-third:]) / third
    mean_t, mean_ms = (n - 1) / 2, sum(latency_ms) / n
    spread = sum((t - mean_t) ** 2 for t in range(n))
    slope = sum((t - mean_t) * (v - mean_ms) for t, v in enumerate(latency_ms)) / spread
    if slope / 1000 > LAG_SLOPE and last - first > floor_ms:
        return f"backlog grew: latency {first:.1f}ms → {last:.1f}ms, {slope:.0f}ms per s"
    return None
