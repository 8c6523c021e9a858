"""Every chart as PNG and SVG files, for posts: rendered by vl-convert, no browser needed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import vl_convert

from pgbenchlab import files
from pgbenchlab.report.render import chart_data, runcharts
from pgbenchlab.report.render.html import main_charts, run_chart_templates
from pgbenchlab.report.views.model import ReportView, RunView

PNG_SCALE = 2  # twice the on-screen size: sharp in posts and on high-density screens
RUN_CHARTS = (
    ("tps_over_time", "tps", "seconds"),
    ("latency_over_time", "latency", "seconds"),
    ("sorted_tps", "sorted", "seconds"),
    ("histogram", "histogram", "hist"),
    ("cdf", "cdf", "hist"),
)
TIMELINE = ("timeline", "timeline", "seconds")  # TPS with telemetry, for runs that have it


# Each image takes about 0.1 s to draw: beyond this many runs, only the campaign's charts are
# written unless the runs are asked for (a thousand runs would take ten minutes).
MAX_RUNS_DRAWN = 100


def export(view: ReportView, directory: Path, *, per_run: bool | None = None) -> list[Path]:
    """Write each chart as NAME.svg and NAME.png into ``directory``; return the files.

    ``per_run``: also every run's charts (run-ID-*.svg); by default when there are at most
    `MAX_RUNS_DRAWN` runs."""
    if per_run is None:
        per_run = len(view.runs) <= MAX_RUNS_DRAWN
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, spec in chart_specs(view, per_run=per_run):  # names hold servers' names
        written += write_chart(spec, files.inside(directory, files.file_name(name)))
    return written


def write_chart(spec: dict[str, Any], base: Path) -> list[Path]:
    """The chart drawn once as SVG, the PNG rasterised from that SVG."""
    svg_path, png_path = base.with_name(base.name + ".svg"), base.with_name(base.name + ".png")
    svg = vl_convert.vega_to_svg(vl_convert.vegalite_to_vega(spec))
    svg_path.write_text(svg, encoding="utf-8")
    png_path.write_bytes(vl_convert.svg_to_png(svg, scale=PNG_SCALE))
    return [svg_path, png_path]


def chart_specs(view: ReportView, *, per_run: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, spec with its data) for the campaign's charts, then each run's."""
    shared = {
        "cells": chart_data.cell_rows(view),
        "tps_points": chart_data.tps_points(view),
        "changes": chart_data.change_rows(view),
        "dist": chart_data.dist_rows(view),
        "sorted": chart_data.sorted_rows(view),
    }
    axis = chart_data.default_series(view)
    for chart in main_charts(view):
        spec = chart["specs"].get(axis) or next(iter(chart["specs"].values()))
        yield chart["id"].removeprefix("chart-"), {**spec, "datasets": shared}
    if per_run:
        templates = run_chart_templates(view)
        for run in view.runs:
            yield from _run_specs(run, templates)


def _run_specs(run: RunView, templates: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    telemetry = chart_data.telemetry_rows(run)
    data = {
        "run_seconds": chart_data.seconds_rows(run),
        "run_hist": chart_data.hist_rows(run),
        "run_events": chart_data.event_rows(run),
        **telemetry,
    }
    present = runcharts.available(data["run_seconds"], data["run_events"]) | set(telemetry)
    charts = RUN_CHARTS + ((TIMELINE,) if telemetry else ())
    label = f"run {run.id}: {run.server}, scale {run.scale}, {run.workload}, {run.clients} clients"
    for key, name, needs in charts:
        if not data["run_seconds" if needs == "seconds" else "run_hist"]:
            continue
        spec = runcharts.without_missing(templates[key], present)
        title = dict(spec["title"])
        title["text"] = str(title["text"]).replace("{run}", label)
        yield f"run-{run.id}-{name}", {**spec, "title": title, "datasets": data}
