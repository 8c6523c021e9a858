"""A results database as a static site: an index of campaigns, each campaign's report (the
report page itself, with a link back) and a page per comparison of campaigns sharing cells.

Every link is relative and every page self-contained, so the directory opens from disk, is
copied anywhere or served as it is, with no network."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.report.render import html
from pgbenchlab.report.render.bisection import bisection_body
from pgbenchlab.report.render.sections import esc, when
from pgbenchlab.report.views.bisection import BisectionView
from pgbenchlab.report.views.compare import CellChange
from pgbenchlab.report.views.metrics import METRICS, format_value
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.site import CampaignComparison, EmptyCampaign, SiteView

INDEX = "index.html"
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
        back = '<p class="site-nav"><a href="../index.html">← every campaign</a></p>'
        report = html.render(view, source=source)
        yield campaign_page(view), report.replace("<header>", f"<header>{back}", 1)
    for comparison in site.comparisons:
        yield comparison_page(comparison), comparison_html(comparison)
    for bisection in site.bisections:
        back = '<p class="site-nav"><a href="../index.html">← every campaign</a></p>'
        yield bisection_page(bisection), bisection_html(bisection, back)


def bisection_page(view: BisectionView) -> str:
    return f"bisections/{re.sub(r'[^A-Za-z0-9._-]', '_', view.name)}.html"


def bisection_html(view: BisectionView, navigation: str = "") -> str:
    """A bisection's page, self-contained (also written by `pgbenchlab bisect`)."""
    return _page(f"pgbenchlab bisection: {view.name}", navigation + bisection_body(view))


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )


def index(site: SiteView, source: str) -> str:
    reported = {v.campaign.id: _campaign_row(v) for v in site.campaigns}
    listed = reported | {e.id: _empty_row(e) for e in site.empty}
    rows = "".join(listed[i] for i in sorted(listed, reverse=True))
    campaigns = (
        "<table><thead><tr><th>campaign</th><th>description</th><th>started</th>"
        f"<th>servers</th><th>status</th><th>runs</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page(
        "pgbenchlab results",
        f'<h1>pgbenchlab results</h1><p class="sub">{len(site.campaigns)} campaign(s) of '
        f"{esc(source)}, newest first; regenerate with <code>pgbenchlab report --site</code>."
        f"</p><h2>Campaigns</h2>{campaigns}<h2>Comparisons</h2>{comparisons_table(site)}"
        f"{bisections_table(site)}",
    )


def _campaign_row(v: ReportView) -> str:
    return (
        f'<tr><td><a href="{esc(campaign_page(v))}">{esc(v.campaign.name)}</a></td>'
        f"<td>{esc(v.campaign.description)}</td><td>{esc(when(v.campaign.started_at))}</td>"
        f"<td>{esc(', '.join(f'{s.label} ({s.version})' for s in v.servers))}</td>"
        f'<td>{esc(v.campaign.status)}</td><td class="num">{len(v.runs)}</td></tr>'
    )


def _empty_row(e: EmptyCampaign) -> str:
    return (
        f"<tr><td>{esc(e.name)}</td><td>{esc(e.description)}</td>"
        f"<td>{esc(when(e.started_at))}</td><td>–</td><td>{esc(e.status)}</td>"
        '<td class="num">0</td></tr>'
    )


def comparisons_table(site: SiteView) -> str:
    if not site.comparisons:
        return "<p>No two campaigns share a cell (the same scale, workload, clients …).</p>"
    rows = "".join(
        f'<tr><td><a href="{esc(comparison_page(c))}">{esc(c.baseline.campaign.name)} → '
        f"{esc(c.candidate.campaign.name)}</a></td>"
        f'<td class="num">{c.cells}</td><td>{esc(verdict_counts(c.changes))}</td></tr>'
        for c in site.comparisons
    )
    return (
        "<p>Every pair of campaigns with cells in common, the earlier as the baseline "
        "(as <code>pgbenchlab compare A B</code>).</p>"
        "<table><thead><tr><th>baseline → candidate</th><th>shared cells</th>"
        f"<th>verdicts (TPS, p50, p99)</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def bisections_table(site: SiteView) -> str:
    if not site.bisections:
        return ""
    rows = "".join(
        f'<tr><td><a href="{esc(bisection_page(b))}">{esc(b.name)}</a></td>'
        f"<td>{esc(b.good)} → {esc(b.bad)}</td><td>{esc(b.status)}</td><td>"
        f"{esc(b.first_bad.commit[:10] + ' ' + b.first_bad.subject) if b.first_bad else '–'}"
        "</td></tr>"
        for b in site.bisections
    )
    return (
        "<h2>Bisections</h2><table><thead><tr><th>bisection</th><th>range</th><th>status</th>"
        f"<th>first bad commit</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def verdict_counts(changes: tuple[CellChange, ...]) -> str:
    counts = {v: sum(c.verdict == v for c in changes) for v in ComparisonVerdict}
    return ", ".join(f"{n} {v.value.replace('_', ' ')}" for v, n in counts.items() if n)


def comparison_html(comparison: CampaignComparison) -> str:
    base, cand = comparison.baseline, comparison.candidate
    title = f"{base.campaign.name} → {cand.campaign.name}"
    links = (
        f'<p class="site-nav"><a href="../index.html">← every campaign</a> · baseline '
        f'<a href="../{esc(campaign_page(base))}">{esc(base.campaign.name)}</a> · candidate '
        f'<a href="../{esc(campaign_page(cand))}">{esc(cand.campaign.name)}</a></p>'
    )
    rows = "".join(_change_row(c) for c in comparison.changes)
    warnings = [w for c in comparison.changes for w in c.warnings]
    notes = (
        "<h2>High variation between repeats</h2><ul>"
        + "".join(f"<li>{esc(w)}</li>" for w in warnings)
        + "</ul>"
        if warnings
        else ""
    )
    return _page(
        f"pgbenchlab comparison: {title}",
        f'{links}<h1>{esc(title)}</h1><p class="sub">{comparison.cells} shared cell(s): '
        f"{esc(verdict_counts(comparison.changes))}. Change of the candidate's mean with its "
        "95 % interval; the unit of evidence is the run.</p>"
        "<table><thead><tr><th>cell</th><th>metric</th><th>runs</th><th>baseline</th>"
        "<th>candidate</th><th>change</th><th>95 % interval</th><th>verdict</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>{notes}",
    )


def _change_row(c: CellChange) -> str:
    interval = (
        f"{c.ci_low:+.1%} … {c.ci_high:+.1%}"
        if c.ci_low is not None and c.ci_high is not None
        else "–"
    )
    verdict = c.verdict.replace("_", " ")
    if c.repeats_needed:
        verdict += f" (~{c.repeats_needed} runs per side needed)"
    return (
        f"<tr><td>{esc(c.cell)}</td><td>{esc(METRICS[c.metric][0])}</td>"
        f'<td class="num">{c.baseline_n}/{c.candidate_n}</td>'
        f'<td class="num">{esc(format_value(c.metric, c.baseline_mean))}</td>'
        f'<td class="num">{esc(format_value(c.metric, c.candidate_mean))}</td>'
        f'<td class="num">{c.relative_change:+.1%}</td><td>{esc(interval)}</td>'
        f'<td class="{esc(c.verdict)}">{esc(verdict)}</td></tr>'
    )
