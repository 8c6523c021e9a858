"""Step scans: where performance steps along an ordered axis (`compare --series`, reports).

A series is an axis whose values come in an order the reader cares about: the servers in plan
order (versions, oldest first), the values of a server-setting or kernel-tunable axis in plan
order, a numeric axis (scale, clients, rate, ...) in numeric order, or campaigns in the order
given (commits, nightly builds). Every cell of the other axes is scanned for TPS, p99 and p50
with `pgbenchlab.analysis.changepoints.change_points` over its runs. `build_view` runs the
report's scans (the server and setting axes) once, into `ReportView.scans`; the HTML and
Markdown reports print them, and `compare_series` loads campaigns and scans them on demand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.cells import cell_label, varying_axes
from pgbenchlab.analysis.changepoints import (
    DEFAULT_SERIES_CONFIDENCE,
    change_points,
    significance,
    smallest_p_value,
)
from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD, ComparisonVerdict
from pgbenchlab.errors import UserError
from pgbenchlab.report.views.metrics import (
    DEFAULT_METRICS,
    METRICS,
    format_value,
    label,
    one_server_each,
    run_values,
)
from pgbenchlab.report.views.model import CellView, Pairs, ReportView, RunView, Scan, Step
from pgbenchlab.report.views.text import Table
from pgbenchlab.report.views.variants import versions_order

MIN_POINTS = 3  # two points are a comparison: `compare --baseline/--candidate`
CAMPAIGN = "campaign"
# Numeric axes and the run field that orders their values ("unlimited" and "none" last).
NUMERIC_AXES: dict[str, Callable[[RunView], float]] = {
    "scale": lambda r: r.scale,
    "clients": lambda r: r.clients,
    "rate": lambda r: r.rate or math.inf,
    "latency_limit": lambda r: r.latency_limit_ms or math.inf,
    "duration": lambda r: r.duration_s or math.inf,
}


@dataclass(frozen=True)
class _Point:
    """A cell at one value of the series, with every axis (the series axis included)."""

    dims: dict[str, str]
    cell: CellView
    runs: dict[int, RunView]


# -- scans -------------------------------------------------------------------------------------


def scan_view(
    view: ReportView,
    axis: str,
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> Scan:
    """One campaign scanned along one of its ordered axes (a user error if it has none such)."""
    orders = axis_orders(view)
    usable = [a for a, found in orders.items() if len(found) >= MIN_POINTS]
    if axis not in usable:
        raise UserError(f"{_why_not(view, orders, axis)}; series axes here: {_listing(usable)}")
    runs = {r.id: r for r in view.runs}
    points = [_Point(series_dims(c, view, runs), c, runs) for c in view.cells]
    return _scan(axis, orders[axis], points, threshold, metrics)


def report_scans(view: ReportView, threshold: float = DEFAULT_THRESHOLD) -> list[Scan]:
    """The scans the report shows: servers and setting axes with enough values.

    Clients, scale and rate are left out: along them throughput is meant to change (the
    scaling and rate charts show how), so a step there is the curve, not a finding.
    """
    orders = axis_orders(view)
    wanted = ["server", *setting_axes(view)]
    return [scan_view(view, a, threshold) for a in wanted if len(orders.get(a, ())) >= MIN_POINTS]


def regressed(found: Scan) -> bool:
    return any(s.verdict == ComparisonVerdict.REGRESSED for s in found.steps)


def scan_campaigns(
    names: Sequence[str],
    views: Sequence[ReportView],
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> Scan:
    """Campaigns in the order given; cells matched on every axis, as `compare A B` does."""
    drop = ("server",) if one_server_each(views) else ()
    points = []
    for name, view in zip(names, views, strict=True):
        runs = {r.id: r for r in view.runs}
        for cell in view.cells:
            dims = {k: v for k, v in series_dims(cell, view, runs).items() if k not in drop}
            points.append(_Point({CAMPAIGN: name, **dims}, cell, runs))
    return _scan(CAMPAIGN, names, points, threshold, metrics)


# -- axes and their order ----------------------------------------------------------------------


def setting_axes(view: ReportView) -> list[str]:
    """The settings and kernel tunables the servers' variants vary."""
    return list(dict.fromkeys(name for s in view.servers for name, _ in s.variant))


def series_dims(cell: CellView, view: ReportView, runs: dict[int, RunView]) -> dict[str, str]:
    """A cell's axes with the server split into its name and one axis per varied setting or
    kernel tunable.

    The view's "server" axis is the name with the variant; a series along a setting needs the
    setting on its own, and a series along servers must keep the variants apart.
    """
    dims = dict(cell.dims)
    label = dims.pop("server")
    recorded = {s.label: s for s in view.servers}.get(label)
    if recorded is None:  # not recorded: no run reached the server, so no values either
        return {"server": runs[cell.run_ids[0]].server_name, **dims}
    return {"server": recorded.name, **dict(recorded.variant), **dims}


def axis_orders(view: ReportView) -> dict[str, list[str]]:
    """Every ordered axis of a campaign with its values in series order."""
    runs = {r.id: r for r in view.runs}
    seen: dict[str, list[str]] = {}  # in the order of the view's cells (the run order)
    numbers: dict[tuple[str, str], float] = {}
    for cell in view.cells:
        first = runs[cell.run_ids[0]]
        for axis, value in series_dims(cell, view, runs).items():
            if value not in seen.setdefault(axis, []):
                seen[axis].append(value)
            if axis in NUMERIC_AXES:
                numbers[(axis, value)] = NUMERIC_AXES[axis](first)
    planned = dict(view.campaign.axis_orders)  # stored with the campaign, from its plan
    # servers of several majors read oldest first (the archaeology of versions); else as planned
    by_version = versions_order([(s.name, s.version_num) for s in view.servers])
    servers = list(dict.fromkeys(by_version)) or planned.get("server", ())
    orders = {"server": _preferring(seen.get("server", []), servers)}
    for name in setting_axes(view):
        orders[name] = _preferring(seen.get(name, []), planned.get(name, ()))
    for axis in NUMERIC_AXES:
        orders[axis] = sorted(seen.get(axis, []), key=lambda v: numbers[(axis, v)])
    return orders


def _preferring(seen: Sequence[str], planned: Sequence[str]) -> list[str]:
    """The values seen, in the plan's order; any the plan does not list after, as seen."""
    return [v for v in planned if v in seen] + [v for v in seen if v not in planned]


def _why_not(view: ReportView, orders: dict[str, list[str]], axis: str) -> str:
    if axis in orders:
        count = len(orders[axis])
        return f"--series {axis}: {count} value(s) here; a series needs at least {MIN_POINTS}"
    if view.cells and axis in dict(view.cells[0].dims):
        return f"--series {axis}: its values have no order to follow"
    return f"--series {axis}: no such axis in campaign {view.campaign.name!r}"


def _listing(usable: Sequence[str]) -> str:
    return ", ".join(usable) or f"none (or give campaigns in order: --series {CAMPAIGN} C1 C2 C3)"


# -- scanning ----------------------------------------------------------------------------------


def _scan(
    axis: str,
    order: Sequence[str],
    points: Sequence[_Point],
    threshold: float,
    metrics: Sequence[str],
) -> Scan:
    """Group the points into cells of the other axes and scan each cell's series, per metric."""
    rank = {value: i for i, value in enumerate(order)}
    cells: dict[Pairs, list[_Point]] = {}
    for point in points:
        if point.dims.get(axis) in rank:
            key = tuple((k, v) for k, v in point.dims.items() if k != axis)
            cells.setdefault(key, []).append(point)
    varying = varying_axes(list(cells))
    steps: list[Step] = []
    scanned, series, too_short, fewest_points = 0, 0, [], len(order)
    for key, members in cells.items():
        members.sort(key=lambda p: rank[p.dims[axis]])
        label = cell_label(key, varying)
        found = [(metric, s) for metric in metrics if (s := _series(members, axis, metric))]
        if not found:
            continue
        scanned += 1
        series += len(found)
        if not _can_show_a_step(found):
            too_short.append(label)
            fewest_points = min(fewest_points, len(found[0][1]))
        for metric, values_in_order in found:
            steps += _steps(label, key, metric, values_in_order, threshold)
    return Scan(
        axis=axis,
        order=tuple(order),
        threshold=threshold,
        confidence=DEFAULT_SERIES_CONFIDENCE,
        cells=scanned,
        series=series,
        not_scanned=len(cells) - scanned,
        too_short=tuple(too_short),
        repeats_to_show=_repeats_to_show(fewest_points) if too_short else None,
        steps=tuple(steps),
        metrics=tuple(metrics),
    )


def _series(members: Sequence[_Point], axis: str, metric: str) -> list[tuple[str, list[float]]]:
    """(value, run-level values) in series order; empty when fewer than MIN_POINTS have runs."""
    found = [(p.dims[axis], run_values(p.cell, p.runs, metric)) for p in members]
    kept = [(label, runs) for label, runs in found if runs]
    return kept if len(kept) >= MIN_POINTS else []


def _can_show_a_step(found: Sequence[tuple[str, list[tuple[str, list[float]]]]]) -> bool:
    best = min(smallest_p_value([len(runs) for _, runs in s]) for _, s in found)
    return best < significance(DEFAULT_SERIES_CONFIDENCE)


def _repeats_to_show(points: int, most: int = 20) -> int | None:
    """The fewest runs per point with which a step could be shown in a series of ``points``."""
    for runs in range(2, most + 1):
        if smallest_p_value([runs] * points) < significance(DEFAULT_SERIES_CONFIDENCE):
            return runs
    return None


def _steps(
    label: str,
    key: Pairs,
    metric: str,
    series: Sequence[tuple[str, list[float]]],
    threshold: float,
) -> list[Step]:
    higher_is_better = METRICS[metric].higher_is_better
    return [
        Step(
            cell=label,
            axes=key,
            metric=metric,
            previous=point.previous_label,
            label=point.label,
            before=point.before,
            after=point.after,
            relative_step=point.relative_step,
            ci_low=point.ci_low,
            ci_high=point.ci_high,
            p_value=point.p_value,
            verdict=point.verdict,
        )
        for point in change_points(series, higher_is_better=higher_is_better, threshold=threshold)
    ]


# -- output ------------------------------------------------------------------------------------


def title(found: Scan) -> str:
    return f"Change points along {found.axis}: {' → '.join(found.order)}"


def summary(found: Scan) -> str:
    """What was scanned and what was found, in a sentence or three."""
    metrics = ", ".join(label(m) for m in found.metrics)
    cells, with_steps = found.cells, found.cells_with_steps
    if not cells:
        text = f"No cell has results at {MIN_POINTS} or more {found.axis} values: nothing scanned."
    elif found.steps:
        text = f"{_count(len(found.steps), 'step')} in {with_steps} of {_count(cells, 'cell')}"
        text += f"; no step in the other {cells - with_steps}." if cells > with_steps else "."
    else:
        text = f"No step in the {_count(cells, 'cell')} scanned ({metrics})."
    if found.not_scanned:
        text += (
            f" {_count(found.not_scanned, 'cell')} with results at fewer than {MIN_POINTS} "
            "values not scanned."
        )
    if found.too_short:
        runs = f"about {found.repeats_to_show}" if found.repeats_to_show else "many more"
        text += (
            f" {_count(len(found.too_short), 'cell')} cannot show any step at "
            f"{found.confidence:.0%} confidence, however large, with so few runs: "
            f"{runs} runs per value would do."
        )
    return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _share(x: float) -> str:
    return f"{x:+.1%}" if abs(x) < 10 else f"{x:+,.0%}"


def step_table(found: Scan) -> Table:
    """The steps as rows; the CLI and both reports print this same table."""
    interval = f"{found.confidence:.0%} CI"
    header = ("cell", "metric", "between", "before → after", "step", interval, "p", "verdict")
    rows = tuple(
        (
            s.cell,
            label(s.metric),
            f"{s.previous} and {s.label}",
            f"{format_value(s.metric, s.before)} → {format_value(s.metric, s.after)}",
            _share(s.relative_step),
            f"{_share(s.ci_low)} … {_share(s.ci_high)}",
            f"{s.p_value:.3f}",
            s.verdict,
        )
        for s in found.steps
    )
    return Table(title(found), header, rows, note(found))


def note(found: Scan) -> str:
    return (
        f"{summary(found)} Before and after: geometric means of the runs either side of the "
        f"step; step: their ratio minus one, with its {found.confidence:.0%} interval; p: "
        f"permutation test. A step must lie beyond ±{found.threshold:.0%}. About 1 flat "
        f"series in 100 shows a step by chance; {found.series} series were scanned."
    )
