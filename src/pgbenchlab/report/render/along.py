"""Charts with another axis than clients along x: the versions (when the servers differ by
major, oldest first) and the scales, TPS and p99 each, one line per client count and one panel
per combination of the other axes. The archaeology of versions reads off them: where a release
gained or lost, at every load."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgbenchlab.report.render.charts import Spec, faceted
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.variants import versions_order

METRICS = (
    ("tps", "throughput (TPS, transactions/s)", ",.0f", "Throughput"),
    ("p99", "p99 latency (ms)", ",.2f", "p99 latency"),
)


def along_charts(view: ReportView) -> list[dict[str, Any]]:
    """The charts along the versions and along the scales, for what the campaign varied."""
    varying = {a.key for a in view.axes}
    found: list[dict[str, Any]] = []
    versions = versions_order([(s.label, s.version_num) for s in view.servers])
    if "server" in varying and versions:
        found += _charts(view, "server", "server (oldest major first)", versions, "version")
    if "scale" in varying:
        scales = sorted({c.dim("scale") for c in view.cells}, key=int)
        found += _charts(view, "scale", "scale (pgbench -s)", scales, "scale")
    return found


def _charts(
    view: ReportView, axis: str, title: str, order: Sequence[str], name: str
) -> list[dict[str, Any]]:
    return [
        {
            "id": f"chart-{name}-{metric}",
            "kind": f"{name}-{metric}",
            "specs": {"all": along_chart(axis, title, list(order), metric)},
        }
        for metric, *_ in METRICS
        if any(getattr(c, "tps" if metric == "tps" else "p99_ms") for c in view.cells)
    ]


def along_chart(axis: str, title: str, order: list[str], metric: str) -> Spec:
    """One metric along axis (its values in order), a line per client count."""
    _, y_title, fmt, heading = next(m for m in METRICS if m[0] == metric)
    x: Spec = {"field": f"s_{axis}", "type": "ordinal", "sort": order, "title": title}
    y: Spec = {"field": metric, "type": "quantitative", "title": y_title}
    color: Spec = {"field": "clients", "type": "ordinal", "title": "clients"}
    tooltip = [
        {"field": f"s_{axis}", "title": axis},
        {"field": "clients"},
        {"field": metric, "title": y_title, "format": fmt},
        {"field": "n", "title": "runs"},
    ]
    measured = [{"filter": f"datum.{metric} != null"}]
    points = {"type": "point", "filled": True, "size": 60, "cursor": "pointer"}
    layers: list[Spec] = [
        {
            "transform": measured,
            "mark": {"type": "line", "strokeWidth": 2},
            "encoding": {"x": x, "y": y, "color": color},
        },
        {
            "transform": measured,
            "mark": points,
            "encoding": {
                "x": x,
                "y": y,
                "color": color,
                "tooltip": tooltip,
                "href": {"field": "link"},
            },
        },
    ]
    subtitle = (
        f"{heading} along the {axis} axis: one line per client count, one panel per other "
        "varying axis; points: mean over repeats. Click a point for its runs."
    )
    return faceted(f"{heading} along the {name_of(axis)}", subtitle, "cells", f"p_{axis}", layers)


def name_of(axis: str) -> str:
    return "versions" if axis == "server" else "scales"
