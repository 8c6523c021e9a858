"""Chart specifications for one run: its seconds, their sorted TPS, its latency distribution.

The data names are ``run_seconds``, ``run_events`` and ``run_hist`` (see `chart_data`). The
latency axes span the whole campaign, so the histograms of two runs compare at a glance.
"""

from __future__ import annotations

from pgbenchlab.report.render.charts import CONFIG, PALETTE, SCHEMA, Spec, lines

WIDTH, HEIGHT = 540, 200
TIME_X: Spec = {"field": "t", "type": "quantitative", "title": "time since the measured start (s)"}


def _base(title: str, subtitle: str, data: str) -> Spec:
    return {
        "$schema": SCHEMA,
        "title": {"text": title, "subtitle": lines(subtitle, 90)},
        "data": {"name": data},
        "width": WIDTH,
        "height": HEIGHT,
        "config": CONFIG,
    }


def zoom(name: str) -> Spec:
    """Drag to pan, wheel to zoom the time axis; double-click resets."""
    return {"name": name, "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}


# Layers (and panels) drawn only when their data exist (an empty layer makes Vega warn about
# its extent): the page script and the image exporter drop a layer whose "description" is
# "needs:" and names of data none of which this run has ("needs:tel_host|tel_procs").
NEEDS = "needs:"
EVENTS, BAND, LAG = "events", "band", "lag"


def needs(*data: str) -> str:
    return NEEDS + "|".join(data)


def event_rules() -> Spec:
    return {
        "description": needs(EVENTS),
        "data": {"name": "run_events"},
        "mark": {"type": "rule", "color": PALETTE[3], "strokeDash": [4, 3], "strokeWidth": 1.5},
        "encoding": {
            "x": TIME_X,
            "tooltip": [
                {"field": "t", "title": "time (s)", "format": ".1f"},
                {"field": "kind", "title": "event"},
                {"field": "detail"},
            ],
        },
    }


def tps_over_time(title: str) -> Spec:
    spec = _base(
        f"Per-second TPS — {title}",
        "Transactions completed in each second; dashed rules mark server events (checkpoints, "
        "autovacuum) where telemetry recorded them. Wheel to zoom, drag to pan.",
        "run_seconds",
    )
    spec["layer"] = [tps_line("zoom_tps"), event_rules()]
    return spec


def tps_line(zoom_name: str) -> Spec:
    """The TPS line of the run's seconds, carrying the time axis' zoom."""
    return {
        "params": [zoom(zoom_name)],
        "mark": {"type": "line", "color": PALETTE[0], "strokeWidth": 1.5, "point": False},
        "encoding": {
            "x": TIME_X,
            "y": {"field": "tps", "type": "quantitative", "title": "TPS (transactions/s)"},
            "tooltip": [
                {"field": "t", "title": "second"},
                {"field": "tps", "title": "TPS", "format": ",.0f"},
            ],
        },
    }


def latency_over_time(title: str) -> Spec:
    latency_y: Spec = {
        "field": "mean",
        "type": "quantitative",
        "title": "latency (ms, log scale)",
        "scale": {"type": "log"},
    }
    tooltip = [
        {"field": "t", "title": "second"},
        {"field": "mean", "title": "mean (ms)", "format": ",.3f"},
        {"field": "min", "title": "min (ms)", "format": ",.3f"},
        {"field": "max", "title": "max (ms)", "format": ",.3f"},
        {"field": "lag", "title": "schedule lag (ms)", "format": ",.3f"},
    ]
    spec = _base(
        f"Per-second latency — {title}",
        "Line: mean latency of the second; band: its fastest to slowest transaction (from the "
        "per-transaction log, when one was kept); dotted: schedule lag under -R.",
        "run_seconds",
    )
    spec["layer"] = [
        {
            "description": needs(BAND),
            "transform": [{"filter": "isValid(datum.min) && isValid(datum.max) && datum.min > 0"}],
            "mark": {"type": "area", "color": PALETTE[5], "opacity": 0.35},
            "encoding": {
                "x": TIME_X,
                "y": {**latency_y, "field": "min"},
                "y2": {"field": "max"},
            },
        },
        {
            "params": [zoom("zoom_latency")],
            "transform": [{"filter": "isValid(datum.mean) && datum.mean > 0"}],
            "mark": {"type": "line", "color": PALETTE[0], "strokeWidth": 1.5},
            "encoding": {"x": TIME_X, "y": latency_y, "tooltip": tooltip},
        },
        {
            "description": needs(LAG),
            "transform": [{"filter": "isValid(datum.lag) && datum.lag > 0"}],
            "mark": {"type": "line", "color": PALETTE[3], "strokeDash": [1, 2]},
            "encoding": {"x": TIME_X, "y": {**latency_y, "field": "lag"}},
        },
        event_rules(),
    ]
    return spec


def sorted_tps(title: str) -> Spec:
    spec = _base(
        f"Instant TPS sorted — {title}",
        "The same seconds sorted from fastest to slowest: a cliff on the right means stalls "
        "(the first and last seconds of a run can be partial, and low).",
        "run_seconds",
    )
    spec["transform"] = [
        {
            "window": [{"op": "row_number", "as": "rank"}],
            "sort": [{"field": "tps", "order": "descending"}],
        },
        {"joinaggregate": [{"op": "count", "as": "seconds"}]},
        {"calculate": "(datum.rank - 0.5) / datum.seconds", "as": "position"},
    ]
    spec["mark"] = {"type": "line", "color": PALETTE[0], "strokeWidth": 1.5, "interpolate": "step"}
    spec["encoding"] = {
        "x": {
            "field": "position",
            "type": "quantitative",
            "title": "share of the run's seconds (sorted by TPS)",
            "axis": {"format": ".0%"},
            "scale": {"domain": [0, 1]},
        },
        "y": {"field": "tps", "type": "quantitative", "title": "TPS (transactions/s)"},
        "tooltip": [
            {"field": "t", "title": "second"},
            {"field": "tps", "title": "TPS", "format": ",.0f"},
        ],
    }
    return spec


def _latency_x(domain: tuple[float, float] | None, field: str) -> Spec:
    scale: Spec = {"type": "log"}
    if domain is not None:
        scale["domain"] = list(domain)
    return {
        "field": field,
        "type": "quantitative",
        "title": "transaction latency (ms, log scale)",
        "scale": scale,
    }


def histogram(title: str, domain: tuple[float, float] | None) -> Spec:
    spec = _base(
        f"Latency histogram — {title}",
        "Share of the logged transactions in each latency bin; the latency axis is the same for "
        "every run of the campaign.",
        "run_hist",
    )
    spec["transform"] = [
        {"joinaggregate": [{"op": "sum", "field": "count", "as": "total"}]},
        {"calculate": "datum.count / datum.total", "as": "share"},
        {"filter": "datum.count > 0 && datum.lower_ms > 0"},
    ]
    spec["mark"] = {"type": "rect", "color": PALETTE[0]}
    spec["encoding"] = {
        "x": _latency_x(domain, "lower_ms"),
        "x2": {"field": "upper_ms"},
        "y": {
            "field": "share",
            "type": "quantitative",
            "title": "share of transactions",
            "axis": {"format": ".1%"},
        },
        "tooltip": [
            {"field": "lower_ms", "title": "from (ms)", "format": ",.3f"},
            {"field": "upper_ms", "title": "to (ms)", "format": ",.3f"},
            {"field": "count", "title": "transactions", "format": ","},
            {"field": "share", "format": ".2%"},
        ],
    }
    return spec


def cdf(title: str, domain: tuple[float, float] | None) -> Spec:
    spec = _base(
        f"Latency CDF — {title}",
        "Share of transactions at or below each latency (upper bin edges).",
        "run_hist",
    )
    spec["transform"] = [
        {
            "window": [{"op": "sum", "field": "count", "as": "below"}],
            "sort": [{"field": "upper_ms"}],
        },
        {"joinaggregate": [{"op": "sum", "field": "count", "as": "total"}]},
        {"calculate": "datum.below / datum.total", "as": "cum"},
        {"filter": "datum.count > 0"},
    ]
    spec["mark"] = {"type": "line", "color": PALETTE[0], "interpolate": "step-after", "point": True}
    spec["encoding"] = {
        "x": _latency_x(domain, "upper_ms"),
        "y": {
            "field": "cum",
            "type": "quantitative",
            "title": "transactions at or below (%)",
            "axis": {"format": ".0%"},
        },
        "tooltip": [
            {"field": "upper_ms", "title": "latency below (ms)", "format": ",.3f"},
            {"field": "cum", "title": "share at or below", "format": ".3%"},
        ],
    }
    return spec


def available(seconds: list[dict[str, object]], events: list[dict[str, object]]) -> set[str]:
    """Which optional layers' data this run has (telemetry datasets are added by their names)."""

    def positive(key: str) -> bool:
        return any(_positive(s.get(key)) for s in seconds)

    found = {EVENTS} if events else set()
    if positive("min") and positive("max"):
        found.add(BAND)
    if positive("lag"):
        found.add(LAG)
    return found


def without_missing(spec: Spec, present: set[str]) -> Spec:
    """The spec without the optional layers and panels whose data are missing."""
    spec = dict(spec)
    for key in ("layer", "vconcat"):
        if key in spec:
            spec[key] = [
                without_missing(part, present) for part in spec[key] if _drawn(part, present)
            ]
    return spec


def _drawn(part: Spec, present: set[str]) -> bool:
    description = str(part.get("description", ""))
    if not description.startswith(NEEDS):
        return True
    return any(name in present for name in description.removeprefix(NEEDS).split("|"))


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0
