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
three repeats per client count a bootstrap reproduces only (k − 1)/k of the runs' variance:
the percentile interval is widened about the estimate by √(k/(k − 1)) (k the harmonic mean of
the repeats per count). It still covers less than 95 %: in simulation (7 client counts, 3 %
noise) σ 92–93 % and κ and N* 85 % of the time with 4 repeats, 75–80 % with 2.

A fit the data cannot support is refused with the reason: fewer than four client counts
(three parameters), no repeats (no interval), or no curvature (σ's and κ's intervals both
reach 0: linear within the measured range). A κ whose interval reaches 0 gives no peak.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

MIN_CLIENT_COUNTS = 4  # three parameters, and a degree of freedom left
BOOTSTRAP_ROUNDS = 200
CONFIDENCE = 0.95
AT_ZERO = 1e-6  # a bounded parameter's estimate this small prints as 0
# A term whose lower bound changes TPS at the largest measured count by less than this is not
# told apart from 0: run-to-run noise is of that order.
NEGLIGIBLE_EFFECT = 0.05
EFFICIENCY_FLOOR = 0.80  # below this share of linear scaling, the curve has departed
WAIT_GROWTH = 0.05  # a wait event's share must grow by 5 points to be named
PEAK_REACH = 10  # a peak whose interval reaches beyond 10× the largest count is not placed


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float


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
        return float(usl(np.array([n]), self.lam.value, self.sigma.value, kappa)[0])


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
    draws = _bootstrap(by_n, best, rounds, seed)
    repeats = statistics.harmonic_mean([len(v) for v in by_n.values()])
    widen = math.sqrt(repeats / (repeats - 1)) if repeats > 1 else 2.0
    return _judged(clients, runs, best, draws, widen)


def _bootstrap(by_n: Mapping[int, list[float]], best: Params, rounds: int, seed: int) -> np.ndarray:
    """(λ, σ, κ) of every resample, rows: each client count's runs drawn with replacement."""
    rng = np.random.default_rng(seed)
    clients = sorted(by_n)
    n = np.array([c for c in clients for _ in by_n[c]], dtype=float)
    x = np.concatenate(
        [
            np.asarray(by_n[c])[rng.integers(0, len(by_n[c]), size=(rounds, len(by_n[c])))]
            for c in clients
        ],
        axis=1,
    )
    return _fit_many(n, x, best)


def _fit_many(n: np.ndarray, x: np.ndarray, start: Params, steps: int = 40) -> np.ndarray:
    """The same least squares for many resamples at once (rows of x): Levenberg–Marquardt
    steps on (log λ, σ, κ), σ and κ projected onto ≥ 0, each row damped on its own. A report
    fits every series of its campaign, so this must take milliseconds, not a solver call per
    resample."""
    rows = x.shape[0]
    p = np.tile([math.log(start[0]), start[1], start[2]], (rows, 1))
    scale = np.array([1.0, 0.1, 1e-3])
    damping = np.full(rows, 1e-3)
    log_x = np.log(x)

    def residuals(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = 1 + q[:, 1:2] * (n - 1) + q[:, 2:3] * n * (n - 1)
        return q[:, 0:1] + np.log(n) - np.log(d) - log_x, d

    r, d = residuals(p)
    cost = (r**2).sum(axis=1)
    for _ in range(steps):
        jac = np.stack([np.ones_like(d), -(n - 1) / d, -n * (n - 1) / d], axis=2) * scale
        transposed = jac.transpose(0, 2, 1)
        normal = transposed @ jac
        diagonal = normal[:, range(3), range(3)]
        normal[:, range(3), range(3)] += damping[:, None] * (diagonal + 1e-12)
        step = np.linalg.solve(normal, -(transposed @ r[..., None]))[..., 0]
        trial = p + step * scale
        trial[:, 1:] = np.maximum(trial[:, 1:], 0.0)
        r_trial, d_trial = residuals(trial)
        cost_trial = (r_trial**2).sum(axis=1)
        better = cost_trial < cost
        settled = np.where(better, cost - cost_trial <= 1e-8 * cost, damping > 1e4)
        p[better], r[better], d[better], cost[better] = (
            trial[better],
            r_trial[better],
            d_trial[better],
            cost_trial[better],
        )
        damping = np.where(better, damping / 3, damping * 4)
        if settled.all():
            break
    p[:, 0] = np.exp(p[:, 0])
    return p


def _interval(value: float, draws: np.ndarray, widen: float) -> Estimate:
    """The bootstrap percentile interval, widened about the estimate by `widen` (resampling
    k runs reproduces only (k − 1)/k of their variance), never below 0."""
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    low = max(0.0, min(value, value - widen * (value - float(low))))
    # a parameter at its bound of 0 can sit a rounding error outside its own draws
    high = max(value, value + widen * (float(high) - value))
    return Estimate(value, low, high)


def _judged(
    clients: tuple[int, ...], runs: int, best: Params, draws: np.ndarray, widen: float
) -> UslFit:
    lam, sigma, kappa = (_interval(v, draws[:, i], widen) for i, v in enumerate(best))
    widest = clients[-1]
    no_sigma = sigma.low * (widest - 1) < NEGLIGIBLE_EFFECT
    no_kappa = kappa.low * widest * (widest - 1) < NEGLIGIBLE_EFFECT
    if no_sigma and no_kappa:
        return UslFit(
            f"no curvature: TPS grows linearly up to {widest} clients (the intervals of "
            "contention σ and coherency κ both reach values too small to tell from 0)",
            clients,
            runs,
        )
    if no_kappa:
        ceiling = lam.value / sigma.value if sigma.value > 0 else math.inf
        note = (
            f"coherency κ is not told apart from 0 (its interval reaches it): no peak; "
            f"TPS levels off towards λ/σ ≈ {ceiling:,.0f}"
        )
        return UslFit(None, clients, runs, lam, sigma, None, None, note)
    peaks = [p for s, k in draws[:, 1:] if (p := peak_clients(s, k)) is not None]
    peak_value = peak_clients(sigma.value, kappa.value)
    if peak_value is None or len(peaks) < len(draws) * CONFIDENCE:
        return UslFit(None, clients, runs, lam, sigma, kappa, None, "σ ≥ 1: no peak")
    peak = _interval(peak_value, np.array(peaks), widen)
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


def _clients(n: int) -> str:
    return f"{n} client{'' if n == 1 else 's'}"


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %"


def departure_text(found: Departure, growth: WaitGrowth | None) -> str:
    """ "past 4 clients the curve departs from linear: at 8 clients TPS is 62 % of linear
    scaling from 1 client; LWLock:BufferContent rises from 3 % of backend samples at 4 clients
    to 38 % at 16"."""
    base = _clients(found.base)
    text = (
        f"past {_clients(found.before)} the curve departs from linear: at {found.clients} clients "
        f"TPS is {_pct(found.efficiency)} of linear scaling from {base}"
    )
    if growth is not None:
        text += (
            f"; {growth.event} rises from {_pct(growth.share_before)} of backend samples at "
            f"{_clients(found.before)} to {_pct(growth.share_after)} at {growth.clients_after}"
        )
    return text
