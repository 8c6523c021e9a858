"""Charts that put servers and runs side by side: the change heatmap against the baseline,
every run's latency CDF and every run's per-second TPS sorted. Same conventions as `charts`."""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.report.render.charts import (
    FADE,
    Spec,
    base_spec,
    faceted,
    legend_toggle,
    series_channel,
)


def heatmap_chart(metric: str, baseline: str, limit: float, confidence: float) -> Spec:
    """Relative change of every cell against the baseline server, one column per candidate."""
    name = "TPS" if metric == "tps" else "p99 latency"
    better = "higher" if metric == "tps" else "lower"
    # Blue means better for both metrics: reverse the scheme where higher is better.
    color: Spec = {
        "field": "change",
        "type": "quantitative",
        "title": f"{name} change",
        "legend": {"format": "+.0%"},
        "scale": {
            "scheme": "blueorange",
            "domain": [-limit, limit],
            "domainMid": 0,
            "clamp": True,
            "reverse": metric == "tps",
        },
    }
    tooltip = [
        {"field": "candidate", "title": "server"},
        {"field": "panel"},
        {"field": "clients"},
        {"field": "change", "title": "relative change", "format": "+.1%"},
        {"field": "verdict"},
        {"field": "reason", "title": "how sure"},
    ]
    x: Spec = {
        "field": "clients",
        "type": "ordinal",
        "title": "clients",
        "sort": "ascending",
        "axis": {"labelAngle": 0},
    }
    y: Spec = {"field": "panel", "type": "nominal", "title": None}
    spec = base_spec(
        f"{name}: relative change against {baseline}",
        f"Ratio of geometric means over repeats, minus one; {better} is better, blue is better. "
        f"↑ improved, ↓ regressed, ≈ within noise, ? not enough data ({confidence:.0%} "
        "confidence, Welch's t on log values).",
        "changes",
    )
    spec["transform"] = [{"filter": {"field": "metric", "equal": metric}}]
    spec["facet"] = {"field": "candidate", "type": "nominal", "title": None}
    spec["columns"] = 2
    spec["spec"] = {
        "width": {"step": 62},
        "height": {"step": 30},
        "layer": [
            {
                "mark": {"type": "rect", "cursor": "pointer"},
                "encoding": {
                    "x": x,
                    "y": y,
                    "color": color,
                    "tooltip": tooltip,
                    "href": {"field": "link"},
                },
            },
            {
                "mark": {"type": "text", "fontSize": 11},
                "encoding": {
                    "x": x,
                    "y": y,
                    "text": {"field": "label"},
                    "color": {
                        "condition": {
                            "test": f"abs(datum.change) > {limit * 0.6}",
                            "value": "white",
                        },
                        "value": "black",
                    },
                    "tooltip": tooltip,
                },
            },
        ],
    }
    return spec


def distribution_chart(series: str, title: str, clients: Sequence[int]) -> Spec:
    """Every run's latency CDF, one panel per other axis, for one chosen client count."""
    x: Spec = {
        "field": "upper_ms",
        "type": "quantitative",
        "title": "transaction latency (ms, log scale)",
        "scale": {"type": "log"},
    }
    y: Spec = {
        "field": "cum",
        "type": "quantitative",
        "title": "transactions at or below (%)",
        "axis": {"format": ".0%"},
    }
    tooltip = [
        {"field": f"s_{series}", "title": title},
        {"field": "run", "title": "run id"},
        {"field": "repeat"},
        {"field": "upper_ms", "title": "latency below (ms)", "format": ",.3f"},
        {"field": "cum", "title": "share at or below", "format": ".2%"},
    ]
    spec = _runs_at_chosen_clients(
        "Latency distribution per run (CDF)",
        f"Each line is one run's per-transaction latencies (one colour per {title}); choose the "
        "client count below. Same axes in every panel, so runs compare directly.",
        ("dist", f"p_{series}"),
        _run_lines(series, title, x, y, tooltip, "step-after"),
        ("clients_shown", clients),
    )
    spec["resolve"] = {"scale": {"y": "shared"}}
    return spec


def sorted_tps_chart(series: str, title: str, clients: Sequence[int]) -> Spec:
    """Every run's per-second TPS sorted from fastest to slowest second, the share of its
    seconds on x (the classic "percentile TPS" plot): configurations side by side, one colour
    each, one panel per other axis, for one chosen client count (data "sorted")."""
    x: Spec = {
        "field": "position",
        "type": "quantitative",
        "title": "share of the run's seconds (sorted by TPS)",
        "axis": {"format": ".0%"},
        "scale": {"domain": [0, 1]},
    }
    y: Spec = {"field": "tps", "type": "quantitative", "title": "TPS in the second"}
    tooltip = [
        {"field": f"s_{series}", "title": title},
        {"field": "run", "title": "run id"},
        {"field": "repeat"},
        {"field": "t", "title": "second"},
        {"field": "tps", "title": "TPS", "format": ",.0f"},
        {"field": "position", "title": "share of seconds faster", "format": ".0%"},
    ]
    return _runs_at_chosen_clients(
        "Per-second TPS sorted, per run",
        f"Each line is one run's seconds sorted from fastest to slowest (one colour per {title}): "
        "a flat line is steady throughput, a cliff on the right is stalls (a run's first and "
        "last seconds can be partial, and low). Choose the client count below.",
        ("sorted", f"p_{series}"),
        _run_lines(series, title, x, y, tooltip, "step"),
        ("sorted_clients", clients),
    )


def _run_lines(
    series: str, title: str, x: Spec, y: Spec, tooltip: list[Spec], interpolate: str
) -> Spec:
    """One line per run, coloured by the series, linking to the run."""
    return {
        "params": [legend_toggle(series)],
        "mark": {"type": "line", "interpolate": interpolate, "strokeWidth": 1.5},
        "encoding": {
            "x": x,
            "y": y,
            "color": series_channel(series, title),
            "detail": {"field": "run", "type": "nominal"},
            "opacity": FADE,
            "tooltip": tooltip,
            "href": {"field": "link"},
        },
    }


def _runs_at_chosen_clients(
    heading: str,
    caption: str,
    source: tuple[str, str],
    layer: Spec,
    picker: tuple[str, Sequence[int]],
) -> Spec:
    """The runs' lines faceted by the other axes, for the client count the reader picks
    (source: the data and the facet field; picker: the parameter's name and the counts)."""
    name, clients = picker
    values = sorted(set(clients))
    spec = faceted(heading, caption, *source, [layer])
    spec["params"] = [
        {
            "name": name,
            "value": values[-1] if values else 1,
            "bind": {"input": "select", "options": values, "name": "clients: "},
        }
    ]
    spec["transform"] = [{"filter": f"datum.clients == {name}"}]
    return spec
