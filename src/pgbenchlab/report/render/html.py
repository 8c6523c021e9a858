"""The HTML report: one self-contained file (data, charts, scripts and styles inline).

The page opens from disk or an e-mail attachment with no network: the Vega bundle is inlined
(see `bundle`), the data travel as one JSON block, and the page script draws the charts, the
sortable run table and each run's detail from it. The page is templates/report.html; embedded
JSON escapes ``<``, ``>`` and ``&`` (`templating.script_json`) so that no string (a server
named ``</script>``) can end the block.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from pgbenchlab.report.render import (
    bundle,
    charts,
    compare_charts,
    knee,
    runcharts,
    sections,
    templating,
    timeline,
)
from pgbenchlab.report.render.along import along_charts
from pgbenchlab.report.render.chart_data import (
    cell_rows,
    change_limit,
    change_rows,
    default_series,
    latency_domain,
    series_choices,
    usl_rows,
)
from pgbenchlab.report.render.payload import common_facts, detail_payload, runs_payload
from pgbenchlab.report.render.profiles import flame_payload, profiles_section
from pgbenchlab.report.render.templating import script_json as script_json
from pgbenchlab.report.views import answer
from pgbenchlab.report.views.model import ReportView


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
    return found + along_charts(view) + knee.knee_charts(view)


def _series_charts(view: ReportView) -> list[tuple[str, str, Maker]]:
    """(element id, kind, spec maker) of the charts the campaign has data for."""
    clients = [c.clients for c in view.cells]
    timed = [r.clients for r in view.runs if r.ok and r.seconds]  # runs with their seconds
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
        (
            "chart-sorted",
            "sorted",
            bool(timed),
            lambda a, t: compare_charts.sorted_tps_chart(a, t, timed),
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
    "sorted": "Per-second TPS sorted",
    "heatmap": "Change against the baseline",
    "knee": "Capacity knee",
}


def render(view: ReportView, *, source: str = "", index_link: str | None = None) -> str:
    """The report's page (templates/report.html); ``index_link`` leads back to a site's index."""
    data = payload(view)
    generated = time.strftime("%Y-%m-%d %H:%M %Z")
    return templating.render(
        "report.html",
        title=f"pgbenchlab report: {view.campaign.name}",
        sub=f"Generated {generated} from {source or 'the results database'}; "
        f"{len(view.runs)} runs.",
        view=view,
        index_link=index_link,
        style=_asset("report.css"),
        findings=answer.findings(view),
        limits_anchor=answer.LIMITS,
        advice=sections.advice_items(view.advice),
        campaign_facts=sections.campaign_facts(view),
        servers=sections.servers_table(view),
        diagnosis=sections.diagnosis_facts(view),
        shared=common_facts(view),
        machine=sections.machine_facts(view),
        tables=sections.summary_tables(view),
        capacity=knee.capacity_tables(view),
        scans=sections.change_points(view),
        charts=data["charts"],
        profiles=profiles_section(view),
        method=sections.METHOD,
        data=data,
        vega=bundle.javascript(),
        page_script=_asset("report.js"),
        flame_script=_asset("flame.js") if view.profiles else None,
    )
