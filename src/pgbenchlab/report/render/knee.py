"""The knee chart of a capacity search: against the offered rate, the latency percentiles (p50,
p99, p99.9), the late and skipped shares, and the achieved rate, with the SLO's bounds drawn
as rules and the answer's bracket shaded. One Vega-Lite spec per server × cell, its data
inline: drawn by the report's page among its charts, and to SVG and PNG by `report --images`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgbenchlab.report.render.charts import CONFIG, PALETTE, SCHEMA, Spec, lines
from pgbenchlab.report.views.capacity import CapacityView
from pgbenchlab.report.views.capacity_tables import answers_table, probes_table
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.text import Table

WIDTH, HEIGHT = 460, 170
LATENCY = (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms"))
SHARES = (("late", "late_share"), ("skipped", "skipped_share"))
SLO_LATENCY = {"p50": "p50", "p99": "p99", "p99.9": "p99.9", "mean": "mean"}


def knee_rows(view: CapacityView) -> list[dict[str, Any]]:
    """One row per open-loop probe and measure (long form), plus the rules and the bracket."""
    rows: list[dict[str, Any]] = []
    for point in view.open_loop:
        base = {
            "offered": point.offered,
            "run": point.run_id,
            "role": point.role,
            "verdict": point.verdict,
            "outcome": "pass" if point.passed else "fail",
        }
        for name, key in LATENCY:
            rows.append({**base, "panel": "latency", "measure": name, "value": getattr(point, key)})
        for name, key in SHARES:
            rows.append({**base, "panel": "shares", "measure": name, "value": getattr(point, key)})
        rows.append({**base, "panel": "rate", "measure": "achieved", "value": point.achieved})
        rows.append({**base, "panel": "rate", "measure": "offered", "value": point.offered})
    for bound in view.slo.bounds:
        panel = "latency" if bound.is_latency else "shares"
        rows.append(
            {"panel": panel, "rule": bound.limit, "measure": f"SLO {bound.text()}", "kind": "slo"}
        )
    answer = view.answer
    if answer is not None and answer.highest_pass is not None:
        top = answer.lowest_fail or answer.highest_pass
        rows.append({"kind": "bracket", "low": answer.highest_pass, "high": top})
    return [{k: v for k, v in row.items() if v is not None} for row in rows]


def knee_chart(view: CapacityView) -> Spec:
    answer = view.answer
    found = (
        "not decided"
        if answer is None
        else "no rate met the SLO"
        if answer.rate is None
        else f"capacity {answer.rate:g} tx/s (bracket {answer.highest_pass:g} – "
        f"{answer.lowest_fail if answer.lowest_fail is not None else '∞'})"
    )
    x: Spec = {
        "field": "offered",
        "type": "quantitative",
        "title": "offered rate (pgbench -R, tx/s)",
        "scale": {"zero": False},
    }
    return {
        "$schema": SCHEMA,
        "title": {
            "text": f"Capacity of {view.server}: {found}",
            "subtitle": lines(
                f"{view.cell}; SLO {view.slo.text}; shaded: between the highest rate that "
                "passed and the lowest that failed; filled points passed, hollow ones failed."
            ),
        },
        "data": {"values": knee_rows(view)},
        "config": CONFIG,
        "vconcat": [
            _panel("latency", "latency (ms, log)", x, {"type": "log"}, ".3~g", view),
            _panel("shares", "share of transactions", x, {}, ".2~%", view),
            _panel("rate", "achieved rate (tx/s)", x, {"zero": False}, ".4~g", view),
        ],
        "resolve": {"scale": {"color": "independent", "x": "shared"}},
    }


def _panel(panel: str, title: str, x: Spec, scale: Spec, fmt: str, view: CapacityView) -> Spec:
    y: Spec = {"field": "value", "type": "quantitative", "title": title, "scale": scale}
    color: Spec = {
        "field": "measure",
        "type": "nominal",
        "title": None,
        "scale": {"range": list(PALETTE)},
    }
    tooltip = [
        {"field": "offered", "title": "offered (tx/s)"},
        {"field": "measure"},
        {"field": "value", "format": fmt},
        {"field": "run"},
        {"field": "role"},
        {"field": "verdict"},
    ]
    measured = {"filter": f"datum.panel === '{panel}' && isValid(datum.value)"}
    layers: list[Spec] = [
        {
            "transform": [{"filter": "datum.kind === 'bracket'"}],
            "mark": {"type": "rect", "color": "#2ca02c", "opacity": 0.12},
            "encoding": {"x": {"field": "low", "type": "quantitative"}, "x2": {"field": "high"}},
        },
        {
            "transform": [measured],
            "mark": {"type": "line", "strokeWidth": 1.5},
            "encoding": {
                "x": x,
                "y": {**y, "aggregate": "mean"},
                "color": color,
                "strokeDash": {"field": "measure", "type": "nominal", "legend": None},
            },
        },
        *(
            {
                "transform": [measured, {"filter": f"datum.outcome === '{outcome}'"}],
                "mark": {"type": "point", "size": 45, "filled": outcome == "pass"},
                "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip},
            }
            for outcome in ("pass", "fail")
        ),
    ]
    bounded = {"latency" if b.is_latency else "shares" for b in view.slo.bounds}
    if panel in bounded:
        layers.append(
            {
                "transform": [{"filter": f"datum.kind === 'slo' && datum.panel === '{panel}'"}],
                "mark": {"type": "rule", "strokeDash": [6, 3], "color": "#D55E00"},
                "encoding": {
                    "y": {"field": "rule", "type": "quantitative"},
                    "tooltip": [{"field": "measure", "title": "bound"}],
                },
            }
        )
    return {"width": WIDTH, "height": HEIGHT, "layer": layers}


@dataclass(frozen=True)
class CapacityTables:
    """The report's capacity section (templates/capacity.html): the answers, then per search
    its probes (the knees are among the charts)."""

    answers: Table
    probes: tuple[tuple[CapacityView, Table], ...]


def capacity_tables(view: ReportView) -> CapacityTables | None:
    if not view.capacity:
        return None
    return CapacityTables(
        answers_table(list(view.capacity)),
        tuple((search, probes_table(search)) for search in view.capacity),
    )


def knee_charts(view: ReportView) -> list[dict[str, Any]]:
    """The knees as the page's charts: one spec each, whatever the "one line per" axis."""
    return [
        {"id": f"chart-knee-{s.server}-{s.search}", "kind": "knee", "specs": {"all": knee_chart(s)}}
        for s in view.capacity
    ]
