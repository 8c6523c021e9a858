"""A bisection's page (templates/bisection.html): the figure along the commits tested (an
inline SVG: no script, no network), the answer, and every step with its evidence. This module
places the figure's marks; the template draws them."""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.report.views.bisection import BisectionView, BisectPoint

WIDTH, HEIGHT, MARGIN = 720, 260, 48
COLOURS = {
    "good end": "#11602f",
    "like good": "#3f9b5a",
    "bad end": "#a3161b",
    "like bad": "#d9534f",
    "neither": "#c98a00",
    "undecided": "#5b6472",
}


@dataclass(frozen=True)
class Mark:
    point: BisectPoint
    x: float
    y: float | None  # None: skipped, a cross on the axis
    colour: str


@dataclass(frozen=True)
class Chart:
    low: float  # the lowest and highest figure relative to the good end (0 included)
    high: float
    zero: float  # y of 0, of the highest and of the lowest figure
    top: float
    bottom: float
    marks: tuple[Mark, ...]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN
    right: int = WIDTH - MARGIN
    axis: int = HEIGHT - MARGIN  # where skipped commits are marked


def chart(view: BisectionView) -> Chart | None:
    """The figure's geometry; None before any commit is measured."""
    values = [p.relative_to_good for p in view.points if p.relative_to_good is not None]
    if not values:
        return None
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0
    last = max(view.commits - 1, 1)

    def y(value: float) -> float:
        return HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * (value - low) / span

    marks = tuple(
        Mark(
            point,
            MARGIN + (WIDTH - 2 * MARGIN) * point.position / last,
            None if point.relative_to_good is None else y(point.relative_to_good),
            COLOURS.get(point.outcome, "#1d2430"),
        )
        for point in view.points
    )
    return Chart(low, high, y(0), y(high), y(low), marks)
