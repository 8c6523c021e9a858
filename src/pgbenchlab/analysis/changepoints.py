"""Steps in an ordered series (versions, commits, a setting's values) of run-level values.

Segmentation on the logarithms. In a segment, every stretch between two boundaries of the
series is scored by how well "runs inside the stretch against runs outside it" explains the
variance (a stretch reaching an end of the segment is a single step, one in the middle is a
change and its reversal). The best stretch counts when a permutation test of the largest score
is significant and each of its steps has an interval beyond the threshold band; the pieces are
then searched again. docs/statistics.md gives the details and the simulated error rates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD, ComparisonVerdict, log_values
from pgbenchlab.analysis.stats import student_t_quantile

# A scan tests every boundary of every segment; the stricter level keeps false alarms in a
# flat history near 1 %, because each one sends somebody bisecting.
DEFAULT_SERIES_CONFIDENCE = 0.99
DEFAULT_PERMUTATIONS = 999

Floats = NDArray[np.float64]


@dataclass(frozen=True)
class ChangePoint:
    """Performance moved between ``previous_label`` and ``label`` (series index ``index``).

    ``before``/``after`` are geometric means of the segments either side; ``relative_step`` is
    after / before - 1 with its interval ``ci_low``..``ci_high``; ``p_value`` is the permutation
    p-value with which the step was detected.
    """

    index: int
    label: str
    previous_label: str
    before: float
    after: float
    relative_step: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: ComparisonVerdict


def smallest_p_value(run_counts: Sequence[int], permutations: int = DEFAULT_PERMUTATIONS) -> float:
    """The expected p-value of the clearest possible step in a series with these runs per point.

    A step with no noise at all puts the low runs in a set of points that is a stretch or the
    complement of one; a shuffle scores as high only by putting the low runs back into such a
    set of the same size. The chance of that bounds what the permutation test can show: at or
    above ``1 - confidence``, no step can be found, however large (3 points of 3 runs: 0.037).
    """
    bounds = list(itertools.accumulate(run_counts, initial=0))
    total, groups = bounds[-1], len(run_counts)
    if groups < 2 or total < 3:
        return 1.0
    # Run counts of the distinct sets of points a stretch can separate: every stretch, and the
    # complement of each middle stretch (a complement of an end stretch is a stretch already).
    sizes: dict[int, int] = {}
    for start, stop in itertools.combinations(range(groups + 1), 2):
        inside = bounds[stop] - bounds[start]
        if inside < total:
            sizes[inside] = sizes.get(inside, 0) + 1
        if start > 0 and stop < groups:
            sizes[total - inside] = sizes.get(total - inside, 0) + 1
    chance = min(sizes[bounds[g]] / math.comb(total, bounds[g]) for g in range(1, groups))
    return (1 + permutations * chance) / (1 + permutations)


@dataclass(frozen=True)
class _Stretch:
    start: int  # group indices: the stretch is start..stop-1
    stop: int
    p_value: float


def change_points(
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    higher_is_better: bool,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_SERIES_CONFIDENCE,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> list[ChangePoint]:
    """Change points of a series of (label, run-level values), in series order.

    Every point needs at least one positive value. The result is deterministic for a ``seed``.
    """
    if not 0 < confidence < 1 or threshold < 0 or permutations < 1:
        raise ValueError("need 0 < confidence < 1, threshold >= 0 and permutations >= 1")
    logs = [np.array(log_values(values)) for _, values in series]
    starts = np.concatenate([[0], np.cumsum([len(x) for x in logs])]).astype(np.int64)
    flat = np.concatenate(logs) if logs else np.zeros(0)
    rng = np.random.default_rng(seed)
    band = math.log1p(threshold)
    found: dict[int, float] = {}  # group index of each step -> p-value of its detection
    pending = [(0, len(logs))]
    while pending:
        first, stop = pending.pop()
        stretch = _best_stretch(flat, starts, first, stop, rng, permutations)
        if stretch is None or stretch.p_value >= significance(confidence):
            continue
        edges = [first, stretch.start, stretch.stop, stop]
        kept = [
            edges[k]
            for k in (1, 2)
            if first < edges[k] < stop
            and _beyond_band(flat, starts, (edges[k - 1], edges[k], edges[k + 1]), band, confidence)
        ]
        found.update((group, stretch.p_value) for group in kept)
        pieces = [first, *kept, stop]
        pending += list(itertools.pairwise(pieces)) if kept else []
    splits = _prune(flat, starts, sorted(found.items()), band, confidence)
    steps = _measure(flat, starts, [group for group, _ in splits], confidence)
    return _describe(series, splits, steps, higher_is_better)


def significance(confidence: float) -> float:
    """1 - confidence without the rounding that would let p = 0.01 pass at 0.99 (0.0100...09)."""
    return round(1 - confidence, 12)


def _best_stretch(
    flat: Floats,
    starts: NDArray[np.int64],
    first: int,
    stop: int,
    rng: np.random.Generator,
    permutations: int,
) -> _Stretch | None:
    """The best-scoring stretch of groups first..stop, with its permutation p-value."""
    runs = flat[starts[first] : starts[stop]]
    edges = starts[first : stop + 1] - starts[first]  # run offsets of the group boundaries
    spread = float(np.std(runs)) if len(runs) else 0.0
    if stop - first < 2 or len(runs) < 3 or spread == 0:
        return None
    runs = (runs - runs.mean()) / spread  # scores need centred runs; scaling keeps sums tame
    inner, outer = np.triu_indices(len(edges), k=1)
    keep = (inner > 0) | (outer < len(edges) - 1)  # the whole segment is not a stretch
    pairs = (inner[keep], outer[keep])
    observed = _scores(runs[np.newaxis, :], edges, pairs)[0]
    # Under "no change" the runs of a segment are exchangeable; shuffling them gives the
    # distribution of the largest score, which accounts for trying every stretch.
    best = float(observed.max())
    exceed = 0
    batch = max(1, 2_000_000 // len(observed))  # bounds memory for long series
    for done in range(0, permutations, batch):
        size = min(batch, permutations - done)
        shuffled = rng.permuted(np.tile(runs, (size, 1)), axis=1)
        null_max = _scores(shuffled, edges, pairs).max(axis=1)
        exceed += int(np.count_nonzero(null_max >= best * (1 - 1e-9)))
    top = int(observed.argmax())
    start, end = int(pairs[0][top]), int(pairs[1][top])
    return _Stretch(first + start, first + end, (1 + exceed) / (1 + permutations))


def _scores(
    rows: Floats, edges: NDArray[np.int64], pairs: tuple[NDArray[np.intp], NDArray[np.intp]]
) -> Floats:
    """Between-groups sum of squares of inside-versus-outside, for each row and stretch.

    With centred runs of fixed total variance, the two-sample t statistic of a stretch grows
    with s^2 / (m (n - m)), where s is the sum inside and m the runs inside: that is the score.
    """
    n = rows.shape[1]
    sums = np.concatenate([np.zeros((rows.shape[0], 1)), np.cumsum(rows, axis=1)], axis=1)
    at_edges = sums[:, edges]
    inside = at_edges[:, pairs[1]] - at_edges[:, pairs[0]]
    count = (edges[pairs[1]] - edges[pairs[0]]).astype(np.float64)
    result: Floats = inside**2 / (count * (n - count))
    return result


@dataclass(frozen=True)
class _Step:
    before: float  # mean log
    after: float
    half: float  # half-width of the interval of after - before


def _step(left: Floats, right: Floats, df: int, variance: float, confidence: float) -> _Step:
    """Means of log values either side, and the t interval of their difference."""
    se = math.sqrt(variance * (1 / len(left) + 1 / len(right)))
    half = student_t_quantile(0.5 + confidence / 2, df) * se if df >= 1 else math.inf
    return _Step(float(left.mean()), float(right.mean()), half)


def _beyond_band(
    flat: Floats,
    starts: NDArray[np.int64],
    bounds: tuple[int, int, int],
    band: float,
    confidence: float,
) -> bool:
    """Whether the step at bounds[1], within bounds[0]..bounds[2], clears the threshold band."""
    left = flat[starts[bounds[0]] : starts[bounds[1]]]
    right = flat[starts[bounds[1]] : starts[bounds[2]]]
    df = len(left) + len(right) - 2
    residual = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
    step = _step(left, right, df, residual / max(df, 1), confidence)
    return abs(step.after - step.before) - step.half > band


def _measure(
    flat: Floats, starts: NDArray[np.int64], groups: list[int], confidence: float
) -> list[_Step]:
    """Each step between its neighbouring segments, with the noise of the whole fit."""
    if not groups:
        return []
    bounds = [0, *groups, len(starts) - 1]
    segments = [flat[starts[a] : starts[b]] for a, b in itertools.pairwise(bounds)]
    df = len(flat) - len(segments)
    residual = sum(float(((x - x.mean()) ** 2).sum()) for x in segments)
    variance = residual / df if df >= 1 else math.inf
    return [
        _step(left, right, df, variance, confidence) for left, right in itertools.pairwise(segments)
    ]


def _prune(
    flat: Floats,
    starts: NDArray[np.int64],
    splits: list[tuple[int, float]],
    band: float,
    confidence: float,
) -> list[tuple[int, float]]:
    """The steps whose final interval clears the band, dropping the weakest first.

    A boundary is kept against the neighbours of its piece; a later split can leave it between
    segments that hardly differ (a middle stretch whose other edge was not kept, say).
    """
    while splits:
        steps = _measure(flat, starts, [group for group, _ in splits], confidence)
        margins = [abs(s.after - s.before) - s.half - band for s in steps]
        weakest = min(range(len(margins)), key=margins.__getitem__)
        if margins[weakest] > 0:
            break
        splits = splits[:weakest] + splits[weakest + 1 :]
    return splits


def _describe(
    series: Sequence[tuple[str, Sequence[float]]],
    splits: list[tuple[int, float]],
    steps: list[_Step],
    higher_is_better: bool,
) -> list[ChangePoint]:
    points = []
    for (group, p_value), step in zip(splits, steps, strict=True):
        change = step.after - step.before
        improved = (change > 0) == higher_is_better
        points.append(
            ChangePoint(
                index=group,
                label=series[group][0],
                previous_label=series[group - 1][0],
                before=math.exp(step.before),
                after=math.exp(step.after),
                relative_step=math.expm1(change),
                ci_low=math.expm1(change - step.half),
                ci_high=math.expm1(change + step.half),
                p_value=p_value,
                verdict=ComparisonVerdict.IMPROVED if improved else ComparisonVerdict.REGRESSED,
            )
        )
    return points
