"""Noise floors: how much a metric moves between identical members of a cell, and which of
them a change beat (docs/statistics.md, "Noise floors").

- Run to run, and restart to restart: the spread of one cell's runs across its rounds (without,
  and with, the server restarted and the page cache dropped between rounds): the standard
  deviation of the runs' logarithms as a relative figure, exp(sd) − 1 (about the CV).
- Build to build: the offset between two builds of the same source that differ only in code
  layout, paired by round: exp(|mean of the per-round log ratios|) − 1. It does not shrink with
  more rounds as a spread's share of an interval does: it is a property of the builds.

A verdict's interval is over the cell's rounds, so a change decided in a campaign beat its
run-to-run floor, and its restart-to-restart floor when the rounds were restarts. It beat the
build-to-build floor only when its whole interval lies beyond ±floor; a change whose interval
reaches inside that floor is not a change of the patch (`judge`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.stats import student_t_quantile

RUN_FLOOR = "run to run"
RESTART_FLOOR = "restart to restart"
BUILD_FLOOR = "build to build"
KINDS = (RUN_FLOOR, RESTART_FLOOR, BUILD_FLOOR)
CONFIDENCE = 0.95


def spread(values: Sequence[float]) -> float | None:
    """exp(sd of the logarithms) − 1 of positive values; None with fewer than two."""
    logs = [math.log(v) for v in values if 0 < v < math.inf]
    if len(logs) < 2:
        return None
    return math.expm1(statistics.stdev(logs))


@dataclass(frozen=True)
class Offset:
    """One build against another of the same source, paired by round."""

    floor: float  # exp(|mean log ratio|) − 1
    change: float  # the signed change, exp(mean log ratio) − 1
    half_width: float  # of the interval of the mean log ratio (inf with one round)
    rounds: int


def build_offset(
    pairs: Sequence[tuple[float, float]], confidence: float = CONFIDENCE
) -> Offset | None:
    """The second build of each (first, second) pair of one round against the first; None
    without a pair of positive values."""
    logs = [math.log(b / a) for a, b in pairs if 0 < a < math.inf and 0 < b < math.inf]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    half = math.inf
    if len(logs) >= 2:
        quantile = student_t_quantile(0.5 + confidence / 2, len(logs) - 1)
        half = quantile * statistics.stdev(logs) / math.sqrt(len(logs))
    return Offset(math.expm1(abs(mean)), math.expm1(mean), half, len(logs))


@dataclass(frozen=True)
class FloorJudgement:
    """Which floors a change beat, and whether the build-to-build floor holds it (then it is
    no change of the patch, whatever the test said)."""

    beaten: tuple[str, ...]
    held: bool


def judge(
    changed: bool,
    change: float,
    ci_low: float | None,
    ci_high: float | None,
    floors: Mapping[str, float],
) -> FloorJudgement:
    """A change (``changed``: its verdict says improved or regressed) against the floors
    measured for its cells (kind → relative floor)."""
    if not changed:
        return FloorJudgement((), held=False)
    beaten = [k for k in (RUN_FLOOR, RESTART_FLOOR) if k in floors]
    build = floors.get(BUILD_FLOOR)
    if build is None:
        return FloorJudgement(tuple(beaten), held=False)
    low, high = (change, change) if ci_low is None or ci_high is None else (ci_low, ci_high)
    if low > build or high < -build:  # the whole interval beyond ±floor
        return FloorJudgement((*beaten, BUILD_FLOOR), held=False)
    return FloorJudgement(tuple(beaten), held=True)


def held_reason(floor: float) -> str:
    return (
        f"within the build-to-build floor: the interval reaches inside ±{floor:.1%}, the "
        "offset two builds of the same source showed"
    )
