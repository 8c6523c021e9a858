"""A run's samples (the baseline, one per second, the final one) turned into its per-second
series and its totals over the whole run."""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.records.telemetry import Point, Total
from pgbenchlab.telemetry import osstats


@dataclass
class Sample:
    t: int | None  # the second it closes; None for the baseline
    mono: float
    values: osstats.Snapshot


def changing(series: list[Point], totals: list[Total]) -> list[Point]:
    """The series of metrics that changed during the run: one whose total is 0 was 0 every
    second (all are non-negative), and has no points; gauges have no total and are kept."""
    still = {(t.source, t.metric) for t in totals if t.value == 0}
    return [p for p in series if (p.source, p.metric) not in still]


def points(prev: Sample, cur: Sample) -> list[Point]:
    dt = cur.mono - prev.mono
    assert cur.t is not None
    if dt <= 0:
        return []
    return [
        Point(source, metric, cur.t, value)
        for source, values in cur.values.items()
        for metric, value in osstats.figures(
            source, prev.values.get(source, {}), values, dt, whole=False
        ).items()
    ]


def totals(first: Sample, final: Sample) -> list[Total]:
    dt = final.mono - first.mono
    return [
        Total(source, metric, value)
        for source, values in final.values.items()
        for metric, value in osstats.figures(
            source, first.values.get(source, {}), values, dt, whole=True
        ).items()
    ]
