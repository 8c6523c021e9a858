"""The Universal Scalability Law fitted to one series of TPS against clients, where its curve
departs from linear, and which wait events grow there.

    X(N) = λN / (1 + σ(N − 1) + κN(N − 1))

λ is the throughput of one client alone, σ the contention (the serialised share: queueing for
a shared resource), κ the coherency cost (every client paying for every other: throughput
falls past the peak N* = √((1 − σ)/κ)). Fitted by least squares on log TPS (run-to-run noise
is multiplicative: a 2 % wobble at 50,000 TPS and at 500 TPS weigh alike), every run a point,
σ and κ bounded at 0.

Intervals come from the repeats: a stratified bootstrap resamples the runs of each client
count with replacement and refits. The repeats are the only direct measure of run-to-run noise;
a profile-likelihood interval would instead assume the model exact and the residuals normal
and independent, which a curve with a saturating resource in it rarely honours. With two or
three repeats per client count the bootstrap's intervals are narrow rather than conservative.

A fit the data cannot support is refused with the reason: fewer than four client counts
(three parameters), no repeats (no interval), or no curvature (σ's and κ's intervals both
reach 0: linear within the measured range). A κ whose interval reaches 0 gives no peak.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

MIN_CLIENT_COUNTS = 4  # three parameters, and a degree of freedom left
BOOTSTRAP_ROUNDS = 100
CONFIDENCE = 0.95
AT_ZERO = 1e-6  # a bounded parameter's interval reaching this reaches 0
EFFICIENCY_FLOOR = 0.80  # below this share of linear scaling, the curve has departed
WAIT_GROWTH = 0.05  # a wait event's share must grow by 5 points to be named
PEAK_REACH = 10  # a peak whose interval reaches beyond 10× the largest count is not placed


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    @property
    def reaches_zero(self) -> bool:
        return self.low <= AT_ZERO


@dataclass(frozen=True)
class UslFit:
    """The fitted law with intervals, or why the data cannot support one (`refused`)."""

    refused: str | None  # the reason no numbers are given; None for a fit
    clients: tuple[int, ...]  # the client counts with results
    runs: int
    lam: Estimate | None = None
    sigma: Estimate | None = None
    kappa: Estimate | None = None  # None when its interval reaches 0 (no coherency term)
    peak: Estimate | None = None  # N*, when κ > 0
    note: str = ""  # what a reader should know beyond the numbers

    def tps(self, n: float) -> float | None:
        """The fitted curve at n clients."""
        if self.lam is None or self.sigma is None:
            return None
        kappa = self.kappa.value if self.kappa is not None else 0.0
        return usl(np.array([n]), self.lam.value, self.sigma.value, kappa)[0]  # type: ignore[no-any-return]


def usl(n: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))  # type: ignore[no-any-return]


def peak_clients(sigma: float, kappa: float) -> float | None:
    """N* = √((1 − σ)/κ): where throughput peaks (None without coherency or with σ ≥ 1)."""
    if kappa <= 0 or sigma >= 1:
        return None
    return math.sqrt((1 - sigma) / kappa)


Params = tuple[float, float, float]  # λ, σ, κ


def _fit(n: np.ndarray, x: np.ndarray, start: Params | None = None) -> Params:
    """(λ, σ, κ) by least squares on log TPS, from start (a bootstrap starts at the fit)."""
    smallest = n == n.min()
    per_client = float(np.mean(x[smallest] / n[smallest]))
    if start is None:
        start = (per_client, 0.01, 1e-5)
    lower, upper = (per_client * 1e-3, 0.0, 0.0), (per_client * 1e3, np.inf, np.inf)

    def residuals(p: np.ndarray) -> np.ndarray:
        return np.log(usl(n, *p)) - np.log(x)  # type: ignore[no-any-return]

    def jacobian(p: np.ndarray) -> np.ndarray:
        lam, sigma, kappa = p
        d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
        return np.column_stack((np.full_like(n, 1 / lam), -(n - 1) / d, -n * (n - 1) / d))

    scale = [per_client, 0.1, 1e-3]
    begin = np.clip(start, lower, upper)
    found = least_squares(
        residuals,
        begin,
        jac=jacobian,
        bounds=(lower, upper),
        x_scale=scale,
    )
    lam, sigma, kappa = (float(v) for v in found.x)
    return lam, sigma, kappa


def fit_usl(
    points: Sequence[tuple[int, float]], *, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0
) -> UslFit:
    """The law fitted to (clients, TPS) of every successful run of one series."""
    by_n: dict[int, list[float]] = defaultdict(list)
    for n, tps in points:
        if tps > 0:
            by_n[n].append(tps)
    clients = tuple(sorted(by_n))
    runs = sum(len(v) for v in by_n.values())
    if len(clients) < MIN_CLIENT_COUNTS:
        return UslFit(
            f"needs TPS at {MIN_CLIENT_COUNTS} client counts or more to fit 3 parameters; "
            f"has {len(clients)}",
            clients,
            runs,
        )
    if all(len(v) < 2 for v in by_n.values()):
        return UslFit(
            "one run per client count: the intervals come from repeats (repeats ≥ 2)",
            clients,
            runs,
        )
    counts = np.array([c for c in clients for _ in by_n[c]], dtype=float)
    best = _fit(counts, np.array([t for c in clients for t in by_n[c]]))
    draws = np.array(_bootstrap(by_n, best, rounds, seed))
    return _judged(clients, runs, best, draws)


def _bootstrap(
    by_n: Mapping[int, list[float]], best: Params, rounds: int, seed: int
) -> list[Params]:
    rng = np.random.default_rng(seed)
    clients = sorted(by_n)
    n = np.array([c for c in clients for _ in by_n[c]], dtype=float)
    draws = []
    for _ in range(rounds):
        x = np.concatenate([rng.choice(by_n[c], size=len(by_n[c])) for c in clients])
        draws.append(_fit(n, x, best))
    return draws


def _interval(value: float, draws: np.ndarray) -> Estimate:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Estimate(value, float(low), float(high))


def _judged(clients: tuple[int, ...], runs: int, best: Params, draws: np.ndarray) -> UslFit:
    lam, sigma, kappa = (_interval(v, draws[:, i]) for i, v in enumerate(best))
    widest = clients[-1]
    if sigma.reaches_zero and kappa.reaches_zero:
        return UslFit(
            f"no curvature: TPS grows linearly up to {widest} clients (the intervals of "
            "contention σ and coherency κ both reach 0)",
            clients,
            runs,
        )
    if kappa.reaches_zero:
        ceiling = lam.value / sigma.value if sigma.value > 0 else math.inf
        note = (
            f"coherency κ is not distinguishable from 0 (its interval reaches 0): no peak; "
            f"TPS levels off towards λ/σ ≈ {ceiling:,.0f}"
        )
        return UslFit(None, clients, runs, lam, sigma, None, None, note)
    peaks = [p for s, k in draws[:, 1:] if (p := peak_clients(s, k)) is not None]
    peak_value = peak_clients(sigma.value, kappa.value)
    if peak_value is None or len(peaks) < len(draws) * CONFIDENCE:
        return UslFit(None, clients, runs, lam, sigma, kappa, None, "σ ≥ 1: no peak")
    peak = _interval(peak_value, np.array(peaks))
    if peak.high > PEAK_REACH * widest:
        note = (
            f"κ is too small to place the peak: its interval reaches beyond {PEAK_REACH}× the "
            f"largest measured count ({widest})"
        )
        return UslFit(None, clients, runs, lam, sigma, kappa, None, note)
    note = "" if peak.low <= widest else f"the peak lies beyond {widest} clients: extrapolated"
    return UslFit(None, clients, runs, lam, sigma, kappa, peak, note)


# -- where the curve departs from linear, and why ------------------------------------------------


@dataclass(frozen=True)
class Departure:
    """The first client count whose efficiency X(N) ÷ (N · X(N₀)/N₀) falls below the floor."""

    clients: int
    efficiency: float
    before: int  # the count before it (still near linear)
    base: int  # N₀, the fewest clients measured


def departure(means: Mapping[int, float], floor: float = EFFICIENCY_FLOOR) -> Departure | None:
    clients = sorted(n for n, x in means.items() if x > 0)
    if len(clients) < 2:
        return None
    base = clients[0]
    per_client = means[base] / base
    for before, n in itertools.pairwise(clients):
        efficiency = means[n] / (n * per_client)
        if efficiency < floor:
            return Departure(n, efficiency, before, base)
    return None


@dataclass(frozen=True)
class WaitGrowth:
    event: str  # "LWLock:BufferContent"
    share_before: float  # of backend samples at `Departure.before`
    share_after: float  # at the largest client count
    clients_after: int


def growing_wait(
    waits: Mapping[int, Mapping[str, int]], before: int, after: int
) -> WaitGrowth | None:
    """The wait event whose share of backend samples grew most from `before` to `after`
    clients (by 5 points or more), samples summed over each count's runs."""

    def shares(n: int) -> dict[str, float]:
        counted = waits.get(n, {})
        total = sum(counted.values())
        return {e: c / total for e, c in counted.items()} if total else {}

    early, late = shares(before), shares(after)
    if not early or not late:
        return None
    event, grown = max(
        ((e, s - early.get(e, 0.0)) for e, s in late.items()), key=lambda item: item[1]
    )
    if grown < WAIT_GROWTH:
        return None
    return WaitGrowth(event, early.get(event, 0.0), late[event], after)


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %"


def departure_text(found: Departure, growth: WaitGrowth | None) -> str:
    """ "past 4 clients the curve departs from linear: at 8 clients TPS is 62 % of linear
    scaling from 1 client; LWLock:BufferContent rises from 3 % of backend samples at 4 clients
    to 38 % at 16"."""
    base = f"{found.base} client{'' if found.base == 1 else 's'}"
    text = (
        f"past {found.before} clients the curve departs from linear: at {found.clients} clients "
        f"TPS is {_pct(found.efficiency)} of linear scaling from {base}"
    )
    if growth is not None:
        text += (
            f"; {growth.event} rises from {_pct(growth.share_before)} of backend samples at "
            f"{found.before} clients to {_pct(growth.share_after)} at {growth.clients_after}"
        )
    return text
