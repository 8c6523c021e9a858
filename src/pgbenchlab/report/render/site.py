"""A results database as a static site: an index of campaigns, each campaign's report (the
report page itself, with a link back) and a page per comparison of campaigns sharing cells.

Every link is relative and every page self-contained, so the directory opens from disk, is
copied anywhere or served as it is, with no network. The pages are templates/site_*.html and
templates/bisection.html; this module says what they show."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.analysis.equivalence import margin_text
from pgbenchlab.report.render import bisection, follow, html, templating
from pgbenchlab.report.render.sections import when
from pgbenchlab.report.views.bisection import BisectionView
from pgbenchlab.report.views.compare import CellChange
from pgbenchlab.report.views.metrics import format_value, label
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.site import CampaignComparison, EmptyCampaign, SiteView

INDEX = "index.html"
BACK = "../" + INDEX  # from a page one directory down
STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:80rem;padding:0 1rem;
color:#1d2430}
table{border-collapse:collapse;margin:1rem 0;width:100%}
th,td{border-bottom:1px solid #d8dde6;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f2f4f8}td:first-child,td:nth-child(3){white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums}
.improved{color:#11602f}.regressed{color:#a3161b}.sub{color:#5b6472}
"""


def campaign_page(view: ReportView) -> str:
    """The report's file: plan names are safe already, but a database may hold anything."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", view.campaign.name)
    return f"campaigns/{view.campaign.id}-{name}.html"


def comparison_page(comparison: CampaignComparison) -> str:
    return (
        f"comparisons/{comparison.baseline.campaign.id}-vs-{comparison.candidate.campaign.id}.html"
    )


def pages(site: SiteView, source: str) -> Iterator[tuple[str, str]]:
    """Every page of the site: (relative path, HTML)."""
    yield INDEX, index(site, source)
    for view in site.campaigns:
        yield campaign_page(view), html.render(view, source=source, index_link=BACK)
    for comparison in site.comparisons:
        yield comparison_page(comparison), comparison_html(comparison)
    for found in site.bisections:
        yield bisection_page(found), bisection_html(found, BACK)
    yield from follow_pages(site)


def follow_pages(site: SiteView) -> Iterator[tuple[str, str]]:
    """A followed branch's timelines and a page per change, linked to the commits' reports."""
    reports = {v.campaign.name: campaign_page(v) for v in site.campaigns}  # the latest of each
    for view in site.follows:
        yield follow.follow_page(view), follow.follow_html(view, reports.get, STYLE, BACK)
        for change in view.changes:
            name = change.bisection.name if change.bisection else ""
            yield (
                follow.change_page(view, change),
                follow.change_html(view, change, reports.get, STYLE, _bisection_file(name)),
            )


def _bisection_file(name: str) -> str:
    return f"bisections/{re.sub(r'[^A-Za-z0-9._-]', '_', name)}.html"


def bisection_page(view: BisectionView) -> str:
    return _bisection_file(view.name)


def bisection_html(view: BisectionView, index_link: str | None = None) -> str:
    """A bisection's page, self-contained (also written by `pgbenchlab bisect`)."""
    return templating.render(
        "bisection.html",
        title=f"pgbenchlab bisection: {view.name}",
        style=STYLE,
        index_link=index_link,
        view=view,
        chart=bisection.chart(view),
    )


@dataclass(frozen=True)
class CampaignRow:
    name: str
    page: str | None  # its report; None: no run, no report
    description: str
    started: str
    servers: str
    status: str
    runs: int


def index(site: SiteView, source: str) -> str:
    reported = {v.campaign.id: _campaign_row(v) for v in site.campaigns}
    listed = reported | {e.id: _empty_row(e) for e in site.empty}
    return templating.render(
        "site_index.html",
        title="pgbenchlab results",
        style=STYLE,
        reported=len(site.campaigns),
        source=source,
        campaigns=[listed[i] for i in sorted(listed, reverse=True)],
        comparisons=[
            {
                "page": comparison_page(c),
                "baseline": c.baseline.campaign.name,
                "candidate": c.candidate.campaign.name,
                "cells": c.cells,
                "verdicts": verdict_counts(c.changes),
            }
            for c in site.comparisons
        ],
        bisections=[{"page": bisection_page(b), "view": b} for b in site.bisections],
        follows=[{"page": follow.follow_page(f), "view": f} for f in site.follows],
    )


def _campaign_row(v: ReportView) -> CampaignRow:
    return CampaignRow(
        v.campaign.name,
        campaign_page(v),
        v.campaign.description,
        when(v.campaign.started_at),
        ", ".join(f"{s.label} ({s.version})" for s in v.servers),
        v.campaign.status,
        len(v.runs),
    )


def _empty_row(e: EmptyCampaign) -> CampaignRow:
    return CampaignRow(e.name, None, e.description, when(e.started_at), "–", e.status, 0)


def verdict_counts(changes: tuple[CellChange, ...]) -> str:
    counts = {v: sum(c.verdict == v for c in changes) for v in ComparisonVerdict}
    return ", ".join(f"{n} {v.value.replace('_', ' ')}" for v, n in counts.items() if n)


def comparison_html(comparison: CampaignComparison) -> str:
    base, cand = comparison.baseline, comparison.candidate
    title = f"{base.campaign.name} → {cand.campaign.name}"
    return templating.render(
        "site_comparison.html",
        title=f"pgbenchlab comparison: {title}",
        style=STYLE,
        heading=title,
        baseline=base.campaign.name,
        baseline_page=campaign_page(base),
        candidate=cand.campaign.name,
        candidate_page=campaign_page(cand),
        cells=comparison.cells,
        verdicts=verdict_counts(comparison.changes),
        margin=None if comparison.margin is None else margin_text(comparison.margin),
        rows=[_change_row(c) for c in comparison.changes],
        warnings=[w for c in comparison.changes for w in c.warnings],
    )


def _change_row(c: CellChange) -> dict[str, str]:
    interval = (
        f"{c.ci_low:+.1%} … {c.ci_high:+.1%}"
        if c.ci_low is not None and c.ci_high is not None
        else "–"
    )
    verdict = c.verdict.replace("_", " ")
    if c.repeats_needed:
        verdict += f" (~{c.repeats_needed} runs per side needed)"
    return {
        "cell": c.cell,
        "metric": label(c.metric),
        "runs": f"{c.baseline_n}/{c.candidate_n}",
        "baseline": format_value(c.metric, c.baseline_mean),
        "candidate": format_value(c.metric, c.candidate_mean),
        "change": f"{c.relative_change:+.1%}",
        "interval": interval,
        "verdict_class": c.verdict,
        "verdict": verdict,
        # as `compare --equivalence` prints it in its table; its reasons in full on hover
        "equivalence": c.equivalence_reason.split(" (")[0] if c.equivalence else "–",
        "equivalence_reason": c.equivalence_reason,
    }
