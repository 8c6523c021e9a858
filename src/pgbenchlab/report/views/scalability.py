"""The scalability model per series of TPS against clients: every group of cells that differ
only in clients gets the Universal Scalability Law fitted to its runs, the fitted curve over
the measured range, and the sentence saying where it departs from linear and which wait event
grows there (`analysis.scalability`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from pgbenchlab.analysis.scalability import (
    AT_ZERO,
    Estimate,
    UslFit,
    departure,
    departure_text,
    fit_usl,
    growing_wait,
)
from pgbenchlab.report.views.model import (
    Axis,
    CellView,
    Pairs,
    ReportView,
    RunView,
    ScalabilityView,
)
from pgbenchlab.report.views.text import Table

CURVE_POINTS = 40
ANCHOR = "scalability"  # the table's id in the HTML report
RATE_LIMITED = "rate-limited (-R): the schedule sets TPS, not the server's capacity"


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
    points = [(r.clients, r.tps) for r in ok if r.tps is not None]
    if any(c.rate for c in line):  # the schedule, not the server, sets a rate-limited TPS
        clients = tuple(sorted({n for n, _ in points}))
        fit = UslFit(RATE_LIMITED, clients, len(points))
        return ScalabilityView(label_of(dims, keys), dims, fit, None, ())
    fit = fit_usl(points)
    return ScalabilityView(
        label_of(dims, keys), dims, fit, departure_sentence(line, ok), curve(fit)
    )


def label_of(dims: Pairs, keys: Sequence[str]) -> str:
    """The series by its values on the axes that vary."""
    return " · ".join(v for k, v in dims if k in keys) or "all runs"


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


USL_NOTE = (
    "Universal Scalability Law X(N) = λN / (1 + σ(N−1) + κN(N−1)) fitted to every run of the "
    "series (least squares on log TPS): σ contention, κ coherency, N* = √((1−σ)/κ) the client "
    "count of peak TPS. Intervals: 95 % bootstrap over the repeats of each client count. A fit "
    "the data cannot support gives the reason instead of numbers."
)


def fmt_estimate(found: Estimate | None, digits: str = ".3g") -> str:
    """ "0.051 (0.049 … 0.053)"; a bound at the parameter's floor prints as 0."""
    if found is None:
        return "-"

    def number(value: float) -> str:
        return "0" if value <= AT_ZERO else f"{value:{digits}}"

    return f"{number(found.value)} ({number(found.low)} … {number(found.high)})"


def scalability_table(view: ReportView | Sequence[ScalabilityView]) -> Table | None:
    """σ, κ and N* with their intervals per series, and where each departs from linear."""
    found = view.scalability if isinstance(view, ReportView) else tuple(view)
    if not found:
        return None
    header = ("series", "clients (runs)", "σ contention", "κ coherency", "N* peak", "what it says")
    rows = tuple(_usl_row(s) for s in found)
    title = "Scalability: the Universal Scalability Law per series"
    return Table(title, header, rows, USL_NOTE, anchor=ANCHOR)


def _usl_row(s: ScalabilityView) -> tuple[str, ...]:
    fit = s.fit
    counts = ", ".join(str(c) for c in fit.clients)
    said = [fit.refused or fit.note, s.departure or ""]
    return (
        s.label,
        f"{counts} ({fit.runs})",
        fmt_estimate(fit.sigma),
        fmt_estimate(fit.kappa),
        fmt_estimate(fit.peak, ".0f"),
        "; ".join(t for t in said if t) or "-",
    )
