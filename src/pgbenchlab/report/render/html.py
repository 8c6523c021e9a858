"""The HTML report: one self-contained file (data, charts, scripts and styles inline).

The page opens from disk or an e-mail attachment with no network: the Vega bundle is inlined
(see `bundle`), the data travel as one JSON block, and the page script draws the charts, the
sortable run table and each run's detail from it. Embedded JSON escapes ``<``, ``>`` and ``&``
so that no string (a server named ``</script>``) can end the block.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from pgbenchlab import jsontext
from pgbenchlab.report.render import (
    bundle,
    charts,
    compare_charts,
    knee,
    runcharts,
    sections,
    timeline,
)
from pgbenchlab.report.render.chart_data import (
    cell_rows,
    change_limit,
    change_rows,
    default_series,
    latency_domain,
    series_choices,
    usl_rows,
)
from pgbenchlab.report.render.payload import detail_payload, runs_payload
from pgbenchlab.report.render.profiles import flame_payload, profiles_section
from pgbenchlab.report.render.sections import esc
from pgbenchlab.report.views.model import ReportView

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no "</script>", no "<!--", valid JavaScript."""
    try:
        text = _dumps(data)
    except ValueError:  # a NaN or an infinity somewhere: rare, so cleaned only then
        text = _dumps(_finite(data))
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _dumps(data: Any) -> str:
    return jsontext.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _finite(data: Any) -> Any:
    """NaN and infinities (not JSON) become null."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def inline_script(code: str) -> str:
    # "<\/script" means the same to JavaScript in strings and regular expressions.
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def _asset(name: str) -> str:
    return (resources.files("pgbenchlab.report.render") / "assets" / name).read_text(
        encoding="utf-8"
    )


# -- chart list ----------------------------------------------------------------------------------


Maker = Callable[[str, str], dict[str, Any]]


def main_charts(view: ReportView) -> list[dict[str, Any]]:
    """The campaign's charts, each as one spec per "one line per" axis the reader may pick."""
    orders = field_orders(view)
    found = []
    for chart_id, kind, make in _series_charts(view):
        axes = series_choices(view)
        specs = {a.key: charts.with_order(make(a.key, a.title), orders) for a in axes}
        found.append({"id": chart_id, "kind": kind, "specs": specs})
    for metric in ("tps", "p99"):
        if any(c.metric == metric for c in view.changes):
            limit = change_limit(view)
            spec = compare_charts.heatmap_chart(metric, view.baseline or "", limit, view.confidence)
            specs = {"all": charts.with_order(spec, orders)}
            found.append({"id": f"chart-heat-{metric}", "kind": "heatmap", "specs": specs})
    return found + knee.knee_charts(view)


def _series_charts(view: ReportView) -> list[tuple[str, str, Maker]]:
    """(element id, kind, spec maker) of the charts the campaign has data for."""
    clients = [c.clients for c in view.cells]
    cells = view.cells
    candidates: list[tuple[str, str, bool, Maker]] = [
        (
            "chart-tps",
            "tps",
            any(c.tps for c in cells),
            lambda a, t: charts.tps_chart(
                a,
                t,
                clients,
                view.confidence,
                intervals=any(c.tps and c.tps.n > 1 for c in cells),
                fitted=any(s.curve for s in view.scalability),
            ),
        ),
        (
            "chart-latency",
            "latency",
            any(c.p99_ms or c.max_ms for c in cells),
            lambda a, t: charts.latency_chart(a, t, clients),
        ),
        (
            "chart-efficiency",
            "efficiency",
            len(set(clients)) > 1 and any(c.efficiency for c in cells),
            lambda a, t: charts.efficiency_chart(a, t, clients),
        ),
        (
            "chart-rate",
            "rate",
            any(c.rate and (c.late_share, c.skipped_share) != (None, None) for c in cells),
            charts.rate_chart,
        ),
        (
            "chart-dist",
            "dist",
            any(r.histogram is not None and r.ok for r in view.runs),
            lambda a, t: compare_charts.distribution_chart(a, t, clients),
        ),
    ]
    return [(chart_id, kind, make) for chart_id, kind, present, make in candidates if present]


def field_orders(view: ReportView) -> dict[str, list[Any]]:
    """For each nominal chart field, its values in the order of the matrix's cells."""
    orders: dict[str, list[Any]] = {}
    for row in cell_rows(view):
        for key, value in row.items():
            if key[:2] in ("s_", "p_", "q_"):
                values = orders.setdefault(key, [])
                if value not in values:
                    values.append(value)
    orders["panel"] = orders.get("p_server", [])
    orders["candidate"] = list(dict.fromkeys(c.candidate for c in view.changes))
    return orders


def run_chart_templates(view: ReportView) -> dict[str, Any]:
    domain = latency_domain(view.runs)
    title = "{run}"
    templates = {
        "tps_over_time": runcharts.tps_over_time(title),
        "latency_over_time": runcharts.latency_over_time(title),
        "sorted_tps": runcharts.sorted_tps(title),
        "histogram": runcharts.histogram(title, domain),
        "cdf": runcharts.cdf(title, domain),
    }
    if any(r.telemetry for r in view.runs):  # TPS with the run's telemetry under it
        templates["timeline"] = timeline.timeline(title)
    return templates


def payload(view: ReportView) -> dict[str, Any]:
    charts_list = main_charts(view)
    return {
        "campaign": view.campaign.name,
        "axes": [{"key": a.key, "title": a.title} for a in series_choices(view)],
        "defaultAxis": default_series(view),
        "charts": charts_list,
        "runCharts": run_chart_templates(view),
        "cells": cell_rows(view),
        "usl": usl_rows(view),
        "changes": change_rows(view),
        "runs": runs_payload(view),
        "detail": detail_payload(view),
        **({"flames": flame_payload(view)} if view.profiles else {}),
        "advice": [
            {
                "kind": a.kind,
                "severity": a.severity,
                "message": a.message,
                "remedy": a.remedy,
                "run_ids": list(a.run_ids),
                "cell_id": a.cell_id,
            }
            for a in view.advice
        ],
    }


# -- the page ------------------------------------------------------------------------------------

CHART_TITLES = {
    "tps": "Throughput",
    "latency": "Latency percentiles",
    "efficiency": "Scaling efficiency",
    "rate": "Rate-limited runs",
    "dist": "Latency distributions",
    "heatmap": "Change against the baseline",
    "knee": "Capacity knee",
}


def render(view: ReportView, *, source: str = "") -> str:
    data = payload(view)
    title = f"pgbenchlab report: {view.campaign.name}"
    generated = time.strftime("%Y-%m-%d %H:%M %Z")
    figures = "".join(
        f'<figure class="chart" id="{c["id"]}" data-kind="{c["kind"]}">'
        f"<noscript>This chart needs JavaScript.</noscript></figure>"
        for c in data["charts"]
    )
    change_points = sections.change_points(view)
    body = _BODY.format(
        title=esc(title),
        description=(
            f'<p class="description">{esc(view.campaign.description)}</p>'
            if view.campaign.description
            else ""
        ),
        sub=esc(
            f"Generated {generated} from {source or 'the results database'}; {len(view.runs)} runs."
        ),
        advice=sections.advice_list(view.advice),
        campaign=sections.campaign_facts(view),
        servers=sections.servers_table(view),
        machine=sections.machine_table(view),
        shared=sections.shared_run_facts(view),
        diagnosis=sections.diagnosis_table(view),
        plan=esc(view.campaign.plan_text),
        tables=sections.summary_tables(view),
        capacity=knee.capacity_section(view),
        capacity_link='<a href="#capacity">Capacity</a>' if view.capacity else "",
        change_points=change_points,
        change_points_link='<a href="#change-points">Change points</a>' if change_points else "",
        figures=figures,
        profiles=profiles_section(view),
        profiles_link='<a href="#profiles">Profiles</a>' if view.profiles else "",
        method=sections.method_note(),
    )
    flames = f"<script>{inline_script(_asset('flame.js'))}</script>" if view.profiles else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="pgbenchlab {esc(view.campaign.pgbenchlab_version)}">'
        f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f"{body}"
        f'<script type="application/json" id="report-data">{script_json(data)}</script>'
        f"<script>{inline_script(bundle.javascript())}</script>"
        f"<script>{inline_script(_asset('report.js'))}</script>{flames}"
        "</body></html>\n"
    )


_BODY = """
<header><h1>{title}</h1>{description}<p class="sub">{sub}</p>
<nav><a href="#warnings">Warnings</a><a href="#overview">Overview</a>
<a href="#tables">Key tables</a>{capacity_link}{change_points_link}<a href="#charts">Charts</a>
{profiles_link}<a href="#runs">All runs</a><a href="#method">Method</a></nav></header>
<main>
<section id="warnings"><h2>Warnings</h2>{advice}</section>
<section id="overview"><h2>Overview</h2>{campaign}
<h3>Servers side by side</h3>{servers}
{diagnosis}{shared}
<h3>Machine</h3>{machine}
<details><summary>The plan file</summary><pre>{plan}</pre></details></section>
<section id="tables"><h2>Key tables</h2>{tables}</section>
{capacity}
{change_points}
<section id="charts"><h2>Charts</h2>
<div class="controls"><label>One line per <select id="series-axis"></select></label>
<span class="note">Hover for values, click a legend entry to show one series (shift-click for
more), click a point for its runs.</span></div>
{figures}</section>
{profiles}
<section id="run-detail" hidden></section>
<section id="runs"><h2>All runs</h2>
<div class="controls"><input id="run-filter" type="search" placeholder="Filter runs (any column)"
aria-label="Filter runs"><span id="run-count"></span>
<button id="show-all" type="button" hidden>Show every run</button>
<span id="cell-filter" hidden>Showing one cell's runs. <button id="cell-filter-clear"
type="button">Show all</button></span></div>
<div id="run-table-wrap"><table id="run-table"></table></div>
<noscript><p>The run table needs JavaScript; `pgbenchlab runs` prints it too.</p></noscript>
</section>
<section id="method"><h2>Method</h2>{method}</section>
<footer>pgbenchlab report. Every number comes from pgbench or the server, stored in the results
database; regenerate this file any time with <code>pgbenchlab report</code>.</footer>
</main>
"""
