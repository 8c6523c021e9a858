"""One run's per-second TPS with its telemetry underneath, on one shared time axis.

A vertical stack of panels (Vega-Lite ``vconcat``) sharing the x scale, so a stall in TPS lines
up with what the server and the host did in that second: wait events, CPU, the data disk and
WAL, commits. Every panel carries the same zoom (wheel, drag; double-click resets) and the
server-event rules (checkpoints, autovacuum). A panel or layer whose data the run lacks is
dropped (`runcharts.without_missing`), never drawn as zeros. The data are the long rows
``{t, s, v}`` (second, series label, value) of `views.telemetry_series`'s datasets.
"""

from __future__ import annotations

from pgbenchlab.report.render.charts import CONFIG, PALETTE, SCHEMA, Spec, lines
from pgbenchlab.report.render.runcharts import NEEDS, TIME_X, event_rules, needs, tps_line, zoom
from pgbenchlab.report.views.telemetry_series import (
    COMMITS,
    DISK_BUSY,
    HOST_CPU,
    IO,
    LIMITS,
    PROCESS_CPU,
    WAIT_TYPES,
    WAITS,
)

WIDTH = 1000
ZOOM = "zoom_time"
GREY = "#999999"
PANEL_OWN = ("y", "color", "fill", "stroke", "strokeDash")  # scales each panel keeps to itself
# Fixed colours, the same in every run: a wait type, a CPU state, a process keeps its colour.
WAIT_COLOURS = {
    "CPU": PALETTE[2],
    "LWLock": PALETTE[3],
    "Lock": PALETTE[4],
    "BufferPin": PALETTE[7],
    "IO": PALETTE[0],
    "IPC": PALETTE[5],
    "Timeout": "#8c6d31",
    "Extension": "#bcbd22",
    "Activity": "#7f7f7f",
    "Client": "#d0d0d0",
}
HOST_COLOURS = {"user": PALETTE[5], "system": PALETTE[1], "iowait": PALETTE[7], "steal": GREY}
PROCESS_COLOURS = {"server": PALETTE[0], "pgbench": PALETTE[3]}
IO_COLOURS = {"data disk: read": PALETTE[2], "data disk: written": PALETTE[0]}
IO_COLOURS |= {"WAL: generated": PALETTE[3]}
COMMIT_COLOURS = {"commits": PALETTE[0], "WAL flushes": PALETTE[3]}


def timeline(title: str) -> Spec:
    return {
        "$schema": SCHEMA,
        "title": {
            "text": f"Per-second TPS and telemetry — {title}",
            "subtitle": lines(
                "Each panel shares the time axis of the TPS; dashed rules mark server events "
                "(checkpoints, autovacuum). Wheel to zoom, drag to pan, double-click to reset. "
                "Counters of the statistics views reach them when backends flush their "
                "statistics, at most once a second: commits and WAL can trail TPS by a second.",
                150,
            ),
        },
        "config": CONFIG,
        "spacing": 14,
        # One time axis; each panel its own values and colours.
        "resolve": {
            "scale": {"x": "shared", **dict.fromkeys(PANEL_OWN, "independent")},
            "legend": dict.fromkeys(PANEL_OWN[1:], "independent"),
        },
        "vconcat": [
            _panel("tps", "Transactions per second", 150, [_tps()], always=True),
            _panel("waits", "Benchmark backends by wait event (average per second)", 150, _waits()),
            _panel(
                "cpu",
                "CPU in cores: the host by state (areas), the server's processes and pgbench",
                150,
                _cpu(),
            ),
            _panel("io", "Data disk read and written, WAL generated (MiB/s)", 110, _io()),
            _panel("disk_busy", "Data disk busy (% of the second)", 80, _disk_busy()),
            _panel("commits", "Commits and WAL flushes per second", 110, _commits()),
        ],
    }


def _tps() -> Spec:
    return {"data": {"name": "run_seconds"}, **tps_line(ZOOM)}


def _panel(name: str, title: str, height: int, layers: list[Spec], *, always: bool = False) -> Spec:
    """A panel of the stack: present when any of its layers' data is (unless ``always``),
    zoomed with the others through an invisible rule at the run's first second."""
    carrier: Spec = {
        "data": {"name": "run_seconds"},
        "transform": [{"aggregate": [{"op": "min", "field": "t", "as": "t"}]}],
        "mark": {"type": "rule", "opacity": 0},
        "encoding": {"x": TIME_X},
        "params": [zoom(ZOOM)],
    }
    panel: Spec = {
        "name": name,
        "title": {"text": title, "fontSize": 13, "anchor": "start"},
        "width": WIDTH,
        "height": height,
        "layer": ([] if always else [carrier]) + layers + [event_rules()],
    }
    if not always:
        data = [str(layer["description"]).removeprefix(NEEDS) for layer in layers]
        panel["description"] = needs(*dict.fromkeys("|".join(data).split("|")))
    return panel


def _coloured(labels: dict[str, str], field: str) -> Spec:
    """A colour per value of ``field`` from a fixed table, so the legend lists only the values
    the run has and a value keeps its colour from run to run."""
    table = ", ".join(f"'{k}': '{v}'" for k, v in labels.items())
    return {"calculate": f"({{{table}}})[datum.{field}] || '{GREY}'", "as": "colour"}


def _colour(field: str, title: str | None) -> Spec:
    # The legend stays in alphabetical order: a sorted domain would not carry the colours along.
    return {
        "field": field,
        "type": "nominal",
        "title": title,
        "scale": {"range": {"field": "colour"}},
    }


def _tooltip(unit: str, number: str) -> list[Spec]:
    return [
        {"field": "t", "title": "second"},
        {"field": "s", "title": "series"},
        {"field": "v", "title": unit, "format": number},
    ]


def _y(title: str, **extra: object) -> Spec:
    return {"field": "v", "type": "quantitative", "title": title, **extra}


def _waits() -> list[Spec]:
    types = ", ".join(f"'{t}'" for t in WAIT_TYPES)
    return [
        {
            "data": {"name": WAITS},
            "description": needs(WAITS),
            "transform": [
                {"calculate": "split(datum.s, ':')[0]", "as": "type"},
                # stacking key: the type's place in WAIT_TYPES (unknown ones last), then the event
                {
                    "calculate": f"(100 + (indexof([{types}], datum.type) + 1 || 99)) + datum.s",
                    "as": "stack",
                },
                _coloured(WAIT_COLOURS, "type"),
            ],
            "mark": {"type": "area", "stroke": "#ffffff", "strokeWidth": 0.4},
            "encoding": {
                "x": TIME_X,
                "y": _y("backends", stack="zero"),
                "color": _colour("type", "wait type"),
                "detail": {"field": "s"},
                "order": {"field": "stack", "type": "ordinal"},
                "tooltip": _tooltip("backends (average)", ".2f"),
            },
        }
    ]


def _cpu() -> list[Spec]:
    host: Spec = {
        "data": {"name": HOST_CPU},
        "description": needs(HOST_CPU),
        "transform": [
            {"calculate": "replace(datum.s, 'host: ', '')", "as": "state"},
            _coloured(HOST_COLOURS, "state"),
        ],
        "mark": {"type": "area", "opacity": 0.55},
        "encoding": {
            "x": TIME_X,
            "y": _y("cores", stack="zero"),
            "fill": _colour("state", "host CPU"),
            "tooltip": _tooltip("cores", ".2f"),
        },
    }
    processes: Spec = {
        "data": {"name": PROCESS_CPU},
        "description": needs(PROCESS_CPU),
        "transform": [
            {"calculate": "split(datum.s, ': ')[0]", "as": "process"},
            {"calculate": "split(datum.s, ': ')[1]", "as": "state"},
            _coloured(PROCESS_COLOURS, "process"),
        ],
        "mark": {"type": "line", "strokeWidth": 1.8},
        "encoding": {
            "x": TIME_X,
            "y": _y("cores"),
            "stroke": _colour("process", "processes"),
            "strokeDash": {
                "field": "state",
                "type": "nominal",
                "title": None,
                "scale": {"domain": ["on a CPU", "waiting for a CPU"], "range": [[1, 0], [4, 3]]},
            },
            "detail": {"field": "s"},
            "tooltip": _tooltip("cores", ".2f"),
        },
    }
    threads: Spec = {
        "data": {"name": LIMITS},
        "description": needs(PROCESS_CPU),
        "mark": {"type": "rule", "color": PALETTE[3], "strokeDash": [2, 2], "opacity": 0.7},
        "encoding": {"y": _y("cores"), "tooltip": [{"field": "s"}, {"field": "v"}]},
    }
    return [host, processes, threads]


def _lines(data: str, colours: dict[str, str], y: Spec, number: str) -> Spec:
    return {
        "data": {"name": data},
        "description": needs(data),
        "transform": [_coloured(colours, "s")],
        "mark": {"type": "line", "strokeWidth": 1.5},
        "encoding": {
            "x": TIME_X,
            "y": y,
            "color": _colour("s", None),
            "tooltip": _tooltip(str(y["title"]), number),
        },
    }


def _io() -> list[Spec]:
    return [_lines(IO, IO_COLOURS, _y("MiB/s"), ",.1f")]


def _disk_busy() -> list[Spec]:
    busy = _y("% busy", scale={"domain": [0, 100]})
    return [_lines(DISK_BUSY, {"data disk: busy": PALETTE[0]}, busy, ".0f")]


def _commits() -> list[Spec]:
    return [_lines(COMMITS, COMMIT_COLOURS, _y("per second"), ",.0f")]
