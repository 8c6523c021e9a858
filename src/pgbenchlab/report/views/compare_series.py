"""`pgbenchlab compare --series`: campaigns from the results database scanned for steps.

The scanning is `steps`; this module loads the views it scans and prints the result for the
terminal (text or JSON).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pgbenchlab import jsontext
from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD
from pgbenchlab.errors import UserError
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.metrics import DEFAULT_METRICS
from pgbenchlab.report.views.model import ReportView, ScalabilityView, Scan
from pgbenchlab.report.views.scalability import scalability_table
from pgbenchlab.report.views.steps import (
    CAMPAIGN,
    MIN_POINTS,
    regressed,
    scan_campaigns,
    scan_view,
    step_table,
    summary,
)
from pgbenchlab.report.views.text import Table
from pgbenchlab.store import Store

__all__ = ["CAMPAIGN", "across_campaigns", "as_json", "as_text", "regressed", "within_campaign"]


def within_campaign(
    store: Store,
    campaign: str | None,
    axis: str,
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> Scan:
    view = load_view(store, store.campaign_id(campaign), detail=False)
    return scanned(view, axis, threshold, metrics)


def with_scalability(
    store: Store,
    campaign: str | None,
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> tuple[Scan, tuple[ScalabilityView, ...]]:
    """The steps along clients, and the scalability model of every series."""
    view = load_view(store, store.campaign_id(campaign), detail=False)
    return scanned(view, "clients", threshold, metrics), view.scalability


def scanned(
    view: ReportView, axis: str, threshold: float, metrics: Sequence[str] = DEFAULT_METRICS
) -> Scan:
    """The report's own scan when it is the one asked for, else a new one."""
    computed = [
        s
        for s in view.scans
        if s.axis == axis and s.threshold == threshold and s.metrics == tuple(metrics)
    ]
    return computed[0] if computed else scan_view(view, axis, threshold, metrics)


def across_campaigns(
    store: Store,
    names: Sequence[str],
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> Scan:
    """Campaigns in the order given (commits, nightly builds): at least `MIN_POINTS`."""
    if len(names) < MIN_POINTS:
        raise UserError(
            f"--series campaign needs at least {MIN_POINTS} campaigns in order, got {len(names)}"
        )
    if len(set(names)) < len(names):
        raise UserError(f"a campaign is named twice in {' '.join(names)}")
    views = [load_view(store, store.campaign_id(name), detail=False) for name in names]
    return scan_campaigns(names, views, threshold, metrics)


def as_text(found: Scan, scalability: Sequence[ScalabilityView] = ()) -> str:
    table = step_table(found)
    lines = [table.title, ""]
    if found.steps:
        lines += [*aligned(table), ""]
    lines.append(summary(found))
    usl = scalability_table(scalability)
    if usl is not None:
        lines += ["", usl.title, "", *aligned(usl), "", usl.note]
    return "\n".join(lines)


def aligned(table: Table) -> list[str]:
    rows = [table.header, *table.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(table.header))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def as_json(found: Scan, scalability: Sequence[ScalabilityView] = ()) -> str:
    data: dict[str, Any] = asdict(found)
    data["cells_with_steps"] = found.cells_with_steps
    for step in data["steps"]:
        step["axes"] = dict(step["axes"])
    if scalability:
        data["scalability"] = [usl_json(s) for s in scalability]
    return jsontext.dumps(data, indent=2)


def usl_json(found: ScalabilityView) -> dict[str, Any]:
    fit = found.fit
    return {
        "series": found.label,
        "axes": dict(found.dims),
        "clients": list(fit.clients),
        "runs": fit.runs,
        "refused": fit.refused,
        **{k: asdict(v) if v else None for k, v in (("lambda", fit.lam), ("sigma", fit.sigma))},
        **{k: asdict(v) if v else None for k, v in (("kappa", fit.kappa), ("peak", fit.peak))},
        "note": fit.note,
        "departure": found.departure,
    }
