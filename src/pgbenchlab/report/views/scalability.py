"""The scalability model per series of TPS against clients: every group of cells that differ
only in clients gets the Universal Scalability Law fitted to its runs, the fitted curve over
the measured range, and the sentence saying where it departs from linear and which wait event
grows there (`analysis.scalability`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from pgbenchlab.analysis.scalability import (
    UslFit,
    departure,
    departure_text,
    fit_usl,
    growing_wait,
)
from pgbenchlab.report.views.model import Axis, CellView, Pairs, RunView, ScalabilityView

CURVE_POINTS = 40


def scalability(
    cells: Sequence[CellView], runs: Sequence[RunView], axes: Sequence[Axis]
) -> tuple[ScalabilityView, ...]:
    by_id = {r.id: r for r in runs}
    series: dict[Pairs, list[CellView]] = {}
    for cell in cells:
        series.setdefault(tuple(d for d in cell.dims if d[0] != "clients"), []).append(cell)
    keys = [a.key for a in axes]
    return tuple(
        one_series(dims, line, by_id, keys)
        for dims, line in series.items()
        if len({c.clients for c in line}) > 1
    )


def one_series(
    dims: Pairs, line: Sequence[CellView], runs: dict[int, RunView], keys: Sequence[str]
) -> ScalabilityView:
    ok = [runs[i] for cell in line for i in cell.run_ids if i in runs and runs[i].ok]
    fit = fit_usl([(r.clients, r.tps) for r in ok if r.tps is not None])
    label = " · ".join(v for k, v in dims if k in keys) or "all runs"
    return ScalabilityView(label, dims, fit, departure_sentence(line, ok), curve(fit))


def departure_sentence(line: Sequence[CellView], runs: Sequence[RunView]) -> str | None:
    means = {c.clients: c.tps.mean for c in line if c.tps is not None}
    found = departure(means)
    if found is None:
        return None
    waits: dict[int, Counter[str]] = {}
    for r in runs:
        waits.setdefault(r.clients, Counter()).update(dict(r.waits))
    return departure_text(found, growing_wait(waits, found.before, max(means)))


def curve(fit: UslFit) -> tuple[tuple[float, float], ...]:
    """The fitted TPS at clients spaced evenly on a log scale over the measured range."""
    if fit.refused is not None:
        return ()
    grid = np.geomspace(fit.clients[0], fit.clients[-1], CURVE_POINTS)
    return tuple((round(float(n), 3), round(t, 1)) for n in grid if (t := fit.tps(n)) is not None)
