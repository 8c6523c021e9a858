"""Chart specifications: Vega-Lite, as plain JSON-ready dicts.

Why Vega-Lite: one declarative spec gives the interactive HTML chart (hover values, legend
toggles, zoom, links from points) in the browser *and*, through vl-convert, the PNG and SVG
images for posts, without a browser. vl-convert also ships the Vega, Vega-Lite and vega-embed
JavaScript as one bundle, which the HTML report inlines (about 0.9 MB), so the page works
offline, from disk or an e-mail attachment, with no CDN. The specs are written as dicts rather
than through Altair: the data are already shaped by the view model, and Altair would add
jsonschema, narwhals and jinja2 for no gain in what the reader sees.

Specs name their data (``{"name": "cells"}``); the HTML page and the image exporter supply the
datasets, so data shared by several charts is embedded once. Field names are in `chart_data`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

Spec = dict[str, Any]

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
# Okabe–Ito: distinguishable with the common colour-vision deficiencies, and in grey print
# the lines also differ by dash and point shape.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
PANEL_WIDTH, PANEL_HEIGHT = 400, 220
VERDICT_MARKS = {
    "improved": "↑",
    "regressed": "↓",
    "within_noise": "≈",
    "not_enough_data": "?",
}

CONFIG: Spec = {
    "font": "Helvetica, Arial, sans-serif",
    "range": {"category": list(PALETTE)},
    "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#e6e6e6"},
    "header": {"labelFontSize": 12, "labelFontWeight": "bold", "title": None},
    "legend": {"labelFontSize": 11, "titleFontSize": 12, "labelLimit": 320},
    "title": {"fontSize": 15, "subtitleFontSize": 12, "anchor": "start", "subtitleColor": "#444"},
    "view": {"stroke": "#cccccc"},
}


def lines(text: str, width: int = 100) -> list[str]:
    """A subtitle as lines: Vega does not wrap titles, and a long line would be cut off."""
    return textwrap.wrap(text, width)


def base_spec(title: str, subtitle: str, data: str) -> Spec:
    return {
        "$schema": SCHEMA,
        "title": {"text": title, "subtitle": lines(subtitle)},
        "data": {"name": data},
        "config": CONFIG,
    }


def faceted(title: str, subtitle: str, data: str, panel: str, layers: list[Spec]) -> Spec:
    spec = base_spec(title, subtitle, data)
    spec["facet"] = {"field": panel, "type": "nominal", "title": None}
    spec["columns"] = 2
    spec["resolve"] = {"scale": {"y": "independent"}}
    spec["spec"] = {"width": PANEL_WIDTH, "height": PANEL_HEIGHT, "layer": layers}
    return spec


def clients_x(clients: Sequence[int]) -> Spec:
    """Clients on a log-2 axis when they span a wide range, ticks at the measured counts."""
    values = sorted(set(clients))
    wide = len(values) > 1 and values[-1] / values[0] >= 8
    scale: Spec = {"type": "log", "base": 2} if wide else {"zero": False}
    return {
        "field": "clients",
        "type": "quantitative",
        "title": "clients (pgbench -c)",
        "scale": scale,
        "axis": {"values": values, "format": "d"},
    }


def series_channel(series: str, title: str) -> Spec:
    return {"field": f"s_{series}", "type": "nominal", "title": title}


def no_legend(channel: Spec) -> Spec:
    """The channel without a legend of its own. Vega-Lite does not merge legends across
    layers, so the colour legend names the series; dashes and point shapes repeat the series
    for grey print without a second legend. (Hiding the colour legend in any one layer would
    hide it in all: legends belong to scales.)"""
    return {**channel, "legend": None}


def clickable_points(
    series: str, size: int, encoding: dict[str, Any], tooltip: Any
) -> dict[str, Any]:
    """The points of a chart: hover for values, click a legend entry to toggle, click a point
    for its runs."""
    return {
        "params": [legend_toggle(series)],
        "mark": {"type": "point", "filled": True, "size": size, "cursor": "pointer"},
        "encoding": {**encoding, "tooltip": tooltip, "href": {"field": "link"}},
    }


def legend_toggle(series: str) -> Spec:
    """Click a legend entry to show one series only (shift-click for several)."""
    return {
        "name": "pick",
        "select": {"type": "point", "fields": [f"s_{series}"]},
        "bind": "legend",
    }


FADE: Spec = {"condition": {"param": "pick", "value": 1}, "value": 0.12}


def _tooltip(series: str, title: str, extra: list[Spec]) -> list[Spec]:
    return [{"field": f"s_{series}", "title": title}, {"field": "clients"}, *extra]


MEASURED: Spec = {"filter": "datum.usl == null"}  # the cells, not the fitted curves' rows


def tps_chart(
    series: str,
    title: str,
    clients: Sequence[int],
    confidence: float,
    *,
    intervals: bool = True,
    fitted: bool = False,
) -> Spec:
    """TPS against clients; ``intervals``: some cell has repeats, so error bars are drawn (a
    layer with no data at all would leave Vega an empty scale to complain about); ``fitted``:
    some series has a scalability fit, drawn dotted over its points (data "tps_points")."""
    x = clients_x(clients)
    color = series_channel(series, title)
    y: Spec = {"field": "tps", "type": "quantitative", "title": "throughput (TPS, transactions/s)"}
    tooltip = _tooltip(
        series,
        title,
        [
            {"field": "tps", "title": "TPS (mean)", "format": ",.0f"},
            {"field": "tps_low", "title": f"{confidence:.0%} CI low", "format": ",.0f"},
            {"field": "tps_high", "title": f"{confidence:.0%} CI high", "format": ",.0f"},
            {"field": "n", "title": "runs"},
            {"field": "panel", "title": "panel"},
        ],
    )
    layers: list[Spec] = [
        {
            "transform": [MEASURED],
            "mark": {"type": "line", "strokeWidth": 2},
            "encoding": {
                "x": x,
                "y": y,
                "color": color,
                "strokeDash": no_legend(color),
                "opacity": FADE,
            },
        },
        *(
            [
                {
                    "transform": [{"filter": "datum.bar_low != null"}],
                    "mark": {"type": "rule", "strokeWidth": 1.5},
                    "encoding": {
                        "x": x,
                        "y": {"field": "bar_low", "type": "quantitative"},
                        "y2": {"field": "bar_high"},
                        "color": color,
                        "opacity": FADE,
                    },
                }
            ]
            if intervals
            else []
        ),
        {
            "transform": [MEASURED],
            **clickable_points(
                series,
                60,
                {"x": x, "y": y, "color": color, "shape": no_legend(color), "opacity": FADE},
                tooltip,
            ),
        },
        *([usl_layer(x, color)] if fitted else []),
    ]
    bars = (
        f"bars: {confidence:.0%} confidence interval over the repeats, drawn within 0 to twice "
        "the mean (hover for its ends)"
        if intervals
        else "no bars: one run per cell gives no interval"
    )
    fit = "; dotted: the Universal Scalability Law fitted to the runs" if fitted else ""
    subtitle = (
        f"One line per {title}, one panel per other varying axis; points: mean over repeats, "
        f"{bars}{fit}. Click a point for its runs."
    )
    data = "tps_points" if fitted else "cells"
    return faceted("Throughput against clients", subtitle, data, f"p_{series}", layers)


def usl_layer(x: Spec, color: Spec) -> Spec:
    """The fitted scalability curve of each series, thin and dotted in the series' colour."""
    return {
        "transform": [{"filter": "datum.usl != null"}],
        "mark": {"type": "line", "strokeWidth": 1.5, "strokeDash": [2, 3]},
        "encoding": {
            "x": x,
            "y": {"field": "usl", "type": "quantitative"},
            "color": color,
            "detail": no_legend(color),
            "opacity": FADE,
        },
    }


LATENCY_FIELDS = (("p50", "p50"), ("p95", "p95"), ("p99", "p99"), ("max", "max"))


def latency_chart(series: str, title: str, clients: Sequence[int]) -> Spec:
    x = clients_x(clients)
    color = series_channel(series, title)
    percentile: Spec = {
        "field": "percentile",
        "type": "nominal",
        "title": "latency",
        "sort": [p for _, p in LATENCY_FIELDS],
    }
    y: Spec = {
        "field": "latency_ms",
        "type": "quantitative",
        "title": "transaction latency (ms, log scale)",
        "scale": {"type": "log"},
    }
    line: Spec = {
        "x": x,
        "y": y,
        "color": color,
        "strokeDash": no_legend(percentile),
        "opacity": FADE,
    }
    tooltip = _tooltip(
        series,
        title,
        [
            {"field": "percentile"},
            {"field": "latency_ms", "title": "latency (ms)", "format": ",.3f"},
            {"field": "panel", "title": "panel"},
        ],
    )
    layers: list[Spec] = [
        {"mark": {"type": "line", "strokeWidth": 1.6}, "encoding": line},
        clickable_points(
            series,
            36,
            {"x": x, "y": y, "color": color, "shape": percentile, "opacity": FADE},
            tooltip,
        ),
    ]
    spec = faceted(
        "Latency percentiles against clients",
        f"One colour per {title}, one dash per percentile; p50/p95/p99: mean over repeats of each "
        "run's percentile (from the per-transaction log), max: the slowest transaction of any "
        "repeat.",
        "cells",
        f"p_{series}",
        layers,
    )
    spec["transform"] = [
        {"fold": [f for f, _ in LATENCY_FIELDS], "as": ["percentile", "latency_ms"]},
        {"filter": "isValid(datum.latency_ms) && datum.latency_ms > 0"},
    ]
    return spec


def efficiency_chart(series: str, title: str, clients: Sequence[int]) -> Spec:
    x = clients_x(clients)
    color = series_channel(series, title)
    y: Spec = {
        "field": "eff",
        "type": "quantitative",
        "title": "scaling efficiency (% of linear)",
        "axis": {"format": ".0%"},
    }
    tooltip = _tooltip(
        series,
        title,
        [
            {"field": "eff", "title": "efficiency", "format": ".1%"},
            {"field": "eff_base", "title": "relative to clients"},
            {"field": "tps", "title": "TPS (mean)", "format": ",.0f"},
        ],
    )
    layers: list[Spec] = [
        {
            "mark": {"type": "rule", "strokeDash": [2, 2], "color": "#888"},
            "encoding": {"y": {"datum": 1}},
        },
        {
            "mark": {"type": "line", "strokeWidth": 2},
            "encoding": {
                "x": x,
                "y": y,
                "color": color,
                "strokeDash": no_legend(color),
                "opacity": FADE,
            },
        },
        clickable_points(
            series,
            50,
            {"x": x, "y": y, "color": color, "shape": no_legend(color), "opacity": FADE},
            tooltip,
        ),
    ]
    spec = faceted(
        "Scaling efficiency against clients",
        "TPS ÷ (TPS at the fewest clients × clients ÷ those clients); 100 % (dashed) is linear "
        f"scaling. One line per {title}.",
        "cells",
        f"p_{series}",
        layers,
    )
    spec["transform"] = [{"filter": "isValid(datum.eff)"}]
    return spec


def rate_chart(series: str, title: str) -> Spec:
    color = series_channel(series, title)
    kind: Spec = {"field": "kind", "type": "nominal", "title": "transactions"}
    x: Spec = {"field": "rate", "type": "quantitative", "title": "target rate (pgbench -R, TPS)"}
    y: Spec = {
        "field": "share",
        "type": "quantitative",
        "title": "share of transactions (%)",
        "axis": {"format": ".3~%"},
    }
    tooltip = [
        {"field": f"s_{series}", "title": title},
        {"field": "clients"},
        {"field": "rate", "title": "rate (TPS)"},
        {"field": "kind"},
        {"field": "share", "format": ".2%"},
    ]
    line: Spec = {
        "x": x,
        "y": y,
        "color": color,
        "strokeDash": no_legend(kind),
        "opacity": FADE,
    }
    points: Spec = {"x": x, "y": y, "color": color, "shape": kind, "opacity": FADE}
    layers: list[Spec] = [
        {"mark": {"type": "line", "strokeWidth": 2}, "encoding": line},
        clickable_points(series, 50, points, tooltip),
    ]
    spec = faceted(
        "Late and skipped transactions against the target rate",
        "Rate-limited runs: share of transactions above the latency limit (late, -L) and not "
        f"sent because already too late (skipped); mean over repeats. One colour per {title}.",
        "cells",
        f"q_{series}",
        layers,
    )
    spec["transform"] = [
        {"filter": "isValid(datum.rate)"},
        {"fold": ["late", "skipped"], "as": ["kind", "share"]},
        {"filter": "isValid(datum.share)"},
    ]
    return spec


def with_order(spec: Any, orders: dict[str, list[Any]]) -> Any:
    """The spec with every nominal field in ``orders`` sorted as given (panels and series in
    the matrix's order: scale 2 before scale 10, servers as they ran), not alphabetically."""
    if isinstance(spec, list):
        return [with_order(item, orders) for item in spec]
    if not isinstance(spec, dict):
        return spec
    out = {key: with_order(value, orders) for key, value in spec.items()}
    field = out.get("field")
    if isinstance(field, str) and field in orders and out.get("type") == "nominal":
        out["sort"] = orders[field]
    return out
