"""A service-level objective and whether one run met it.

An SLO is a comma-separated list of upper bounds: ``"p99 <= 10ms, late <= 1%, skipped <= 0.1%"``.
Latency metrics (``p50 p90 p95 p99 p99.9 mean``: one spelling each) take a time with its unit
(``us``, ``ms``, ``s``), a whole number of microseconds (pgbench's resolution: its log and its
-L, which truncates to whole microseconds and takes 0 as no limit at all) up to an hour; the
shares ``late`` (transactions over the latency limit, of those that ran, as pgbench counts
them) and ``skipped`` (transactions pgbench skipped as already late, of all scheduled) take a
percentage with its % sign (``late <= 1`` could mean 1 % or 100 %). A skipped transaction has
no latency, and a failed one (an error pgbench counted, retries exhausted) served no one within
any bound: every latency bound counts both as over (`RunFigures.latency_over_scheduled`). A run
also fails when its latency, counted from each transaction's scheduled start, grows through the
run: the backlog grows (in pgbench's schedule lag when every client is busy, in the server's
queues otherwise), the server fell behind the offered rate, and a longer run would have been
later still.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.analysis.stats import percentile_rank
from pgbenchlab.errors import UserError

LATENCY_METRICS: dict[str, str] = {
    "p50": "50",
    "p90": "90",
    "p95": "95",
    "p99": "99",
    "p99.9": "99.9",
    "mean": "mean",
}
LEGACY_SPELLINGS = {"p999": "p99.9"}  # read in SLOs stored by older searches, refused in new ones
SHARE_METRICS = ("late", "skipped")
_MICROSECONDS = {"us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}
MAX_BOUND_US = 3600 * 1_000_000  # an hour: no OLTP run measures a longer latency
_CLAUSE = re.compile(r"^\s*(?P<metric>[a-z0-9.]+)\s*(?P<op><=|≤|<)\s*(?P<value>\S+)\s*$", re.I)
_NUMBER = re.compile(r"^(?P<number>\d+(?:\.\d+)?|\.\d+)(?P<unit>us|µs|ms|s|%)?$", re.I)

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
            return f"{self.metric} <= {ms_text(self.limit)}ms"
        return f"{self.metric} <= {self.limit * 100:g}%"


def ms_text(ms: float) -> str:
    """Milliseconds written exactly to the microsecond (":g" keeps six digits: 1234.567 ms
    would read 1234.57)."""
    if ms * 1000 != round(ms * 1000):
        return f"{ms:g}"  # finer than a microsecond: only in an older search's stored SLO
    return f"{ms:.3f}".rstrip("0").rstrip(".")


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


def parse_slo(text: str, *, stored: bool = False) -> Slo:
    """The SLO of --slo, refused in one line when it is not exactly one reading; ``stored``:
    the text an older search stored, read as it was then (p999, any positive bound)."""
    clauses = [c for c in text.split(",") if c.strip()]
    if not clauses:
        raise SloError("--slo: empty; give bounds such as 'p99 <= 10ms, late <= 1%'")
    bounds = tuple(_parse_clause(c.strip(), stored) for c in clauses)
    seen = [b.metric for b in bounds]
    if len(set(seen)) != len(seen):
        raise SloError(f"--slo: a metric is bounded twice in '{text}'")
    return Slo(bounds)


def _parse_clause(clause: str, stored: bool) -> Bound:
    match = _CLAUSE.match(clause)
    if match is None:
        raise SloError(f"--slo: cannot read '{clause}': write METRIC <= VALUE, e.g. p99 <= 10ms")
    metric = _metric(match["metric"].lower(), stored)
    number = _NUMBER.match(match["value"])
    if number is None:
        raise SloError(
            f"--slo: '{match['value']}' in '{clause}' is not a number with a unit "
            "(us, ms, s; % for a share), e.g. 10ms"
        )
    value, unit = Fraction(number["number"]), (number["unit"] or "").lower()
    if value <= 0:
        raise SloError(f"--slo: '{clause}': a bound must be above 0")
    if metric in LATENCY_METRICS:
        return Bound(metric, _latency_ms(clause, value, unit, stored))
    if unit != "%":
        raise SloError(
            f"--slo: '{clause}': a share needs its % sign: write {metric} <= {number['number']}% "
            f"(or {metric} <= {float(value * 100):g}% for the fraction {number['number']})"
        )
    if value > 100:
        raise SloError(f"--slo: '{clause}': a share is at most 100%")
    return Bound(metric, float(value / 100))


def _metric(name: str, stored: bool) -> str:
    if stored and name in LEGACY_SPELLINGS:
        return LEGACY_SPELLINGS[name]
    if name in LATENCY_METRICS or name in SHARE_METRICS:
        return name
    known = ", ".join([*LATENCY_METRICS, *SHARE_METRICS])
    fix = f": write {LEGACY_SPELLINGS[name]}" if name in LEGACY_SPELLINGS else ""
    raise SloError(f"--slo: unknown metric '{name}'{fix} (known: {known})")


def _latency_ms(clause: str, value: Fraction, unit: str, stored: bool) -> float:
    """A latency bound in ms: a whole number of microseconds from 1 µs to an hour."""
    if unit not in _MICROSECONDS:
        raise SloError(f"--slo: '{clause}' needs a time unit (us, ms, s), e.g. 10ms")
    micros = value * _MICROSECONDS[unit]
    if not stored and micros.denominator != 1:
        raise SloError(
            f"--slo: '{clause}' is finer than pgbench measures (whole microseconds: its log, "
            "and its -L, which would take it as no limit or another one): give whole us"
        )
    if not stored and micros > MAX_BOUND_US:
        raise SloError(
            f"--slo: '{clause}' is over an hour: no run measures such a latency; give a bound "
            "up to 3600s"
        )
    return float(micros / 1000)


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
    histogram: LatencyHistogram | None = None  # the latencies of the transactions that ran (µs)

    @property
    def scheduled(self) -> int:
        return self.transactions + self.skipped + self.failed

    @property
    def unserved(self) -> int:
        """Scheduled transactions with no latency within any bound: skipped or failed."""
        return self.skipped + self.failed

    def unserved_text(self) -> str:
        parts = [f"{self.skipped} skipped"] if self.skipped else []
        parts += [f"{self.failed} failed"] if self.failed else []
        return " and ".join(parts)

    def latency_over_scheduled(self, metric: str) -> float | None:
        """A latency metric (ms) over every scheduled transaction: those that ran, and those
        pgbench skipped or that failed, each of these over every bound: a percentile whose rank
        falls among them is infinite, a mean is unknown (None), and one among those that ran is
        read at that rank in their histogram (None without one)."""
        key = LATENCY_METRICS[metric]
        value = self.latency_ms.get(key)
        if not self.unserved or value is None:
            return value
        if key == "mean" or self.histogram is None or not self.histogram.count:
            return None
        ran = self.histogram.count
        rank = percentile_rank(ran + self.unserved, key)
        return math.inf if rank > ran else self.histogram.value_at_rank(rank) / 1000

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
        return _latency_breach(bound, run)
    share = run.share(bound.metric)
    if share is None:
        return f"{bound.metric} share unknown"
    if share <= bound.limit:
        return None
    return f"{bound.metric} {share:.2%} > {bound.limit:.2%}"


def _latency_breach(bound: Bound, run: RunFigures) -> str | None:
    value = run.latency_over_scheduled(bound.metric)
    limit = f"{ms_text(bound.limit)}ms"
    if value is None:
        if run.unserved and LATENCY_METRICS[bound.metric] in run.latency_ms:
            why = "have no latency" if bound.metric == "mean" else "and no latency histogram"
            return f"{bound.metric} unknown: {run.unserved_text()} transactions {why}"
        return f"{bound.metric} unknown (no per-transaction log)"
    if value == math.inf:
        return (
            f"{bound.metric} over every bound: {run.unserved_text()} of {run.scheduled} "
            f"scheduled transactions ({run.unserved / run.scheduled:.2%})"
        )
    if value <= bound.limit:
        return None
    counted_over = f" ({run.unserved_text()} transactions counted as over)" if run.unserved else ""
    return f"{bound.metric} {value:g}ms > {limit}{counted_over}"


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
