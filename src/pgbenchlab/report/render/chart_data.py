"""The view model as chart data: plain rows with the field names the chart specs use.

Per-run series are columnar and rounded to the resolution their source has (latency to the
microsecond of pgbench's log, TPS to a tenth), which keeps a report of a thousand runs small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgbenchlab.report.render.charts import VERDICT_MARKS
from pgbenchlab.report.views.labels import panel_label
from pgbenchlab.report.views.model import Axis, CellView, ChangeView, Interval, ReportView, RunView
from pgbenchlab.report.views.telemetry_series import LIMITS, PROCESS_CPU

Row = dict[str, Any]
THREADS_LABEL = "pgbench threads (-j)"
NO_AXIS = Axis("none", "all runs")


def series_choices(view: ReportView) -> tuple[Axis, ...]:
    """Axes a reader may draw one line per; "none" when nothing but clients varies."""
    return view.axes or (NO_AXIS,)


def default_series(view: ReportView) -> str:
    return view.series_axis or NO_AXIS.key


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _tps(value: float | None) -> float | int | None:
    """To a tenth; whole numbers (per-second counts from a log) without a ".0"."""
    if value is None:
        return None
    rounded = round(value, 1)
    return int(rounded) if rounded.is_integer() else rounded


def cell_link(cell_id: str) -> str:
    return f"#cell-{cell_id}"


def run_link(run_id: int) -> str:
    return f"#run-{run_id}"


def cell_rows(view: ReportView) -> list[Row]:
    return [_cell_row(view, c) for c in view.cells]


def usl_rows(view: ReportView) -> list[Row]:
    """The fitted scalability curves, each row carrying its series' and panels' fields."""
    cells = {tuple(d for d in c.dims if d[0] != "clients"): c for c in view.cells}
    rows: list[Row] = []
    for found in view.scalability:
        if not found.curve:
            continue
        base = {
            k: v
            for k, v in _cell_row(view, cells[found.dims]).items()
            if k[:2] in ("s_", "p_", "q_") or k == "panel"
        }
        rows += [{**base, "clients": n, "usl": tps} for n, tps in found.curve]
    return rows


def tps_points(view: ReportView) -> list[Row]:
    """The TPS chart's data: the cells, and the fitted curves when there are any."""
    return cell_rows(view) + usl_rows(view)


def _cell_row(view: ReportView, c: CellView) -> Row:
    row: Row = {"id": c.cell_id, "link": cell_link(c.cell_id), "clients": c.clients}
    rate_axes = (*tuple(a for a in view.axes if a.key != "rate"), Axis("clients", "clients"))
    for axis in series_choices(view):
        row[f"s_{axis.key}"] = c.dim(axis.key) if axis is not NO_AXIS else NO_AXIS.title
        row[f"p_{axis.key}"] = panel_label(c, view.axes, axis.key)
        row[f"q_{axis.key}"] = _rate_panel(c, rate_axes, axis.key)
    row["panel"] = row[f"p_{default_series(view)}"]
    tps = c.tps
    row |= {
        "tps": _tps(tps.mean) if tps else None,
        "tps_low": _tps(tps.low) if tps else None,
        "tps_high": _tps(tps.high) if tps else None,
        **_error_bar(tps),
        "cv": round(tps.cv, 4) if tps and tps.cv is not None else None,
        "n": c.n_ok,
        "not_ok": c.n_not_ok,
        "lat_avg": _ms(c.latency_avg_ms),
        "p50": _ms(c.p50_ms),
        "p95": _ms(c.p95_ms),
        "p99": _ms(c.p99_ms),
        "p999": _ms(c.p999_ms),
        "max": _ms(c.max_ms),
        "eff": round(c.efficiency, 4) if c.efficiency is not None else None,
        "eff_base": c.efficiency_base_clients,
        "late": c.late_share,
        "skipped": c.skipped_share,
        "rate": c.rate,
        "runs": list(c.run_ids),
    }
    return row


def _error_bar(tps: Interval | None) -> Row:
    """The interval as drawn: clipped to [0, 2 x mean], so that a cell with two noisy runs
    (t = 12.7 for one degree of freedom) cannot flatten every other line of its panel. The
    tooltip gives the interval unclipped."""
    if tps is None or tps.low is None or tps.high is None:
        return {"bar_low": None, "bar_high": None}
    return {"bar_low": _tps(max(0.0, tps.low)), "bar_high": _tps(min(tps.high, 2 * tps.mean))}


def _rate_panel(c: CellView, axes: Sequence[Axis], series: str) -> str:
    parts = []
    for a in axes:
        if a.key == series:
            continue
        value = c.dim(a.key)
        clients = f"{value} client" + ("" if value == "1" else "s")
        parts.append({"scale": f"scale {value}", "clients": clients}.get(a.key, value))
    return " · ".join(parts)


def change_rows(view: ReportView) -> list[Row]:
    cells = {c.cell_id: c for c in view.cells}
    return [_change_row(view, ch, cells[ch.cell_id]) for ch in view.changes]


def _change_row(view: ReportView, ch: ChangeView, cell: CellView) -> Row:
    return {
        "candidate": ch.candidate,
        "panel": panel_label(cell, view.axes, "server"),
        "clients": cell.clients,
        "metric": ch.metric,
        "change": round(ch.relative_change, 5),
        "low": ch.ci_low,
        "high": ch.ci_high,
        "verdict": ch.verdict.replace("_", " "),
        "reason": ch.reason,
        "label": f"{ch.relative_change:+.1%} {VERDICT_MARKS.get(ch.verdict, '')}".strip(),
        "link": cell_link(ch.cell_id),
    }


def change_limit(view: ReportView) -> float:
    """The colour range of the heatmaps: symmetric, at least ±5 %, at most ±50 %."""
    biggest = max((abs(c.relative_change) for c in view.changes), default=0.0)
    return min(0.5, max(0.05, round(biggest, 2)))


def latency_domain(runs: Sequence[RunView]) -> tuple[float, float] | None:
    """The latency axis of every run's histogram: from the fastest to the slowest bin."""
    low = [h.lower_ms[i] for h in _histograms(runs) for i, n in enumerate(h.counts) if n > 0]
    high = [h.upper_ms[i] for h in _histograms(runs) for i, n in enumerate(h.counts) if n > 0]
    positive = [x for x in low if x > 0]
    if not positive or not high:
        return None
    return min(positive), max(high)


def _histograms(runs: Sequence[RunView]) -> list[Any]:
    return [r.histogram for r in runs if r.histogram is not None]


def seconds_rows(run: RunView) -> list[Row]:
    return [
        {
            "t": s.t,
            "tps": _tps(s.tps),
            "mean": _ms(s.latency_mean_ms),
            "min": _ms(s.latency_min_ms),
            "max": _ms(s.latency_max_ms),
            "lag": _ms(s.lag_ms),
        }
        for s in run.seconds
    ]


def hist_rows(run: RunView) -> list[Row]:
    h = run.histogram
    if h is None:
        return []
    return [
        {"lower_ms": lo, "upper_ms": hi, "count": n}
        for lo, hi, n in zip(h.lower_ms, h.upper_ms, h.counts, strict=True)
    ]


def telemetry_rows(run: RunView) -> dict[str, list[Row]]:
    """The run's telemetry as the timeline's long rows {t, s, v}, per dataset, with pgbench's
    threads as the level its CPU cannot pass (the page builds the same from its encoding)."""
    found: dict[str, list[Row]] = {}
    for series in run.telemetry:
        rows = found.setdefault(series.dataset, [])
        rows += [
            {"t": t, "s": series.label, "v": v}
            for t, v in zip(series.t, series.values, strict=True)
            if v is not None
        ]
    if PROCESS_CPU in found:
        found[LIMITS] = [{"s": THREADS_LABEL, "v": run.threads}]
    return found


def event_rows(run: RunView) -> list[Row]:
    return [{"t": e.t, "kind": e.kind, "detail": e.detail} for e in run.events]


def sorted_rows(view: ReportView) -> list[Row]:
    """Every ok run's seconds sorted by TPS, fastest first, at the middle of its share of the
    run's seconds, with its cell's series and panel fields (the page builds the same)."""
    cells = {c["id"]: c for c in cell_rows(view)}
    rows: list[Row] = []
    for run in view.runs:
        if not run.seconds or not run.ok:
            continue
        keys = {k: v for k, v in cells[run.cell_id].items() if k[:2] in ("s_", "p_")}
        base = {"run": run.id, "repeat": run.repeat, "clients": run.clients, **keys}
        base["link"] = run_link(run.id)
        ranked = sorted(run.seconds, key=lambda s: -s.tps)
        rows += [
            {**base, "t": s.t, "tps": _tps(s.tps), "position": (rank + 0.5) / len(ranked)}
            for rank, s in enumerate(ranked)
        ]
    return rows


def dist_rows(view: ReportView) -> list[Row]:
    """Every run's CDF points (non-empty bins only), with its cell's series and panel fields."""
    cells = {c["id"]: c for c in cell_rows(view)}
    rows: list[Row] = []
    for run in view.runs:
        if run.histogram is None or not run.ok:
            continue
        cell = cells[run.cell_id]
        keys = {k: v for k, v in cell.items() if k[:2] in ("s_", "p_")}
        base = {"run": run.id, "repeat": run.repeat, "clients": run.clients, **keys}
        base["link"] = run_link(run.id)
        total = run.histogram.total or 1
        below = 0
        for hi, n in zip(run.histogram.upper_ms, run.histogram.counts, strict=True):
            below += n
            if n:
                rows.append({**base, "upper_ms": hi, "cum": below / total})
    return rows
