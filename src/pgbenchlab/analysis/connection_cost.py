"""What connecting costs per transaction: a new connection (-C against persistent ones) over
each connection kind, and TLS on top of a new TCP connection; each a difference of run-level
mean times per transaction, with Welch's interval over the repeats."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.comparison import log_half_width, welch_log_difference

KINDS = ("socket", "tcp", "tls")
KIND_NAMES = {"socket": "Unix socket", "tcp": "TCP", "tls": "TLS"}
NEW_CONNECTION, TLS = "new_connection", "tls"


@dataclass(frozen=True)
class ConnectionCost:
    """Milliseconds a transaction costs more with `what` than without: a new connection per
    transaction over a connection kind (`over`), or TLS on top of a new TCP connection."""

    cost_of: str  # NEW_CONNECTION or TLS
    over: str  # the connection kind it is measured over ("tcp" for TLS)
    estimate_ms: float
    ci_low_ms: float | None  # None with fewer than 2 runs on a side
    ci_high_ms: float | None
    runs: tuple[int, int]  # runs without and with it

    @property
    def what(self) -> str:
        if self.cost_of == TLS:
            return "TLS on top of a new TCP connection"
        return f"a new connection per transaction over {KIND_NAMES[self.over]}"


def ms_per_transaction(clients: int, tps: float | None) -> float | None:
    """A client's time per transaction, from pgbench's TPS (which under -C includes
    connecting and disconnecting; its latency average does not)."""
    if not tps or tps <= 0:
        return None
    return 1000.0 * clients / tps


def connection_costs(
    times: Mapping[tuple[str, bool], Sequence[float]], confidence: float
) -> list[ConnectionCost]:
    """From run-level ms per transaction keyed by (connection kind, -C): the cost of a new
    connection per kind, then of TLS on top of a new TCP connection."""
    found = []
    for kind in KINDS:
        if times.get((kind, False)) and times.get((kind, True)):
            found.append(
                _cost(NEW_CONNECTION, kind, times[(kind, False)], times[(kind, True)], confidence)
            )
    if times.get(("tcp", True)) and times.get(("tls", True)):
        found.append(_cost(TLS, "tcp", times[("tcp", True)], times[("tls", True)], confidence))
    return found


def _cost(
    cost_of: str, over: str, without: Sequence[float], with_it: Sequence[float], confidence: float
) -> ConnectionCost:
    estimate = statistics.fmean(with_it) - statistics.fmean(without)
    runs = (len(without), len(with_it))
    if min(runs) < 2:
        return ConnectionCost(cost_of, over, estimate, None, None, runs)
    # Welch's difference of means holds on any scale: here milliseconds, not logarithms.
    diff = welch_log_difference(without, with_it)
    half = log_half_width(diff, confidence)
    return ConnectionCost(cost_of, over, estimate, estimate - half, estimate + half, runs)
