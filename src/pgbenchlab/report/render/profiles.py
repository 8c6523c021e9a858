"""The report's "Profiles" section: per profiled cell a flame graph (drawn by the page's own
renderer, assets/flame.js, from trees pruned to the report's budget) and its top functions by
backend type, then a second graph of pgbench when it was profiled too; between a baseline
server's cell and a candidate's, what changed in CPU time per committed transaction. The
tables are plain HTML, readable without JavaScript."""

from __future__ import annotations

import html
from typing import Any

from pgbenchlab.profiles import PGBENCH
from pgbenchlab.report.views.model import CellProfile, ProfileChange, ReportView
from pgbenchlab.report.views.profiles import flame_tree, nodes_per_graph


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def flame_payload(view: ReportView) -> list[dict[str, Any]]:
    """One flame graph tree per profiled cell, in the section's order."""
    budget = nodes_per_graph(len(view.profiles))
    return [flame_tree(p.profile, budget) for p in view.profiles]


def profiles_section(view: ReportView) -> str:
    if not view.profiles:
        return ""
    cells = "".join(_cell(i, p) for i, p in enumerate(view.profiles))
    changes = "".join(_change(c) for c in view.profile_changes)
    diff_part = (
        "<h3>What changed, in CPU time per committed transaction</h3>"
        '<p class="note">Samples ÷ frequency ÷ committed transactions of each side, so the '
        "comparison stays fair when throughput differs; the largest change in a function's "
        f"own (self) time first.</p>{changes}"
        if changes
        else ""
    )
    return (
        '<section id="profiles"><h2>Profiles</h2>'
        '<p class="note">perf on the software CPU clock, of the server\'s processes during the '
        "measured run, stacks rooted at each process's backend type; when pgbench was profiled "
        'too, its graph follows the server\'s, rooted at "pgbench". Click a frame to zoom, '
        "the root to zoom out; hover for its samples.</p>"
        f"{cells}{diff_part}</section>"
    )


def _cell(index: int, cell: CellProfile) -> str:
    p = cell.profile
    facts = [
        f"runs {', '.join(str(i) for i in cell.run_ids)}",
        f"{p.samples:,} samples at {p.frequency_hz} Hz",
        f"{p.lost:,} lost" if p.lost else "none lost",
    ]
    if cell.cpu_us_per_tx is not None:
        facts.append(f"{cell.cpu_us_per_tx:,.1f} µs of {_whose(cell)} CPU per transaction")
    if p.complete_share is not None:
        facts.append(f"{p.complete_share:.0%} of stacks reach main()")
    notes = []
    if cell.out_of_statistics:
        notes.append(
            "An extra repeat profiled (profile = auto), kept out of the cell's statistics: "
            "profiling costs throughput."
        )
    if p.symbols:
        notes.append(f"Limits: {p.symbols}")
    note = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return (
        f'<details class="profile {p.process}" open><summary>{esc(_title(cell))}</summary>'
        f'<p class="note">{esc("; ".join(facts))}</p>{note}'
        f'<div class="flame" data-profile="{index}"><noscript>The flame graph needs '
        "JavaScript; `pgbenchlab profile RUN_ID` prints the top functions.</noscript></div>"
        f"{_top_table(cell)}</details>"
    )


def _top_table(cell: CellProfile) -> str:
    rows = []
    current = None
    for t in cell.top:
        if t.backend_type != current:
            current = t.backend_type
            rows.append(f'<tr><th colspan="3" scope="rowgroup">{esc(current)}</th></tr>')
        rows.append(
            f"<tr><td>{esc(t.function)}</td><td class=num>{t.self_share:.1%}</td>"
            f"<td class=num>{t.total_share:.1%}</td></tr>"
        )
    head = '<tr><th scope="col">function</th><th class=num>self</th><th class=num>total</th></tr>'
    return f'<table class="profile-top">{head}{"".join(rows)}</table>'


def _change(change: ProfileChange) -> str:
    head = (
        '<tr><th scope="col">function</th><th class=num>self, baseline</th>'
        "<th class=num>self, candidate</th><th class=num>change</th>"
        "<th class=num>total, baseline</th><th class=num>total, candidate</th></tr>"
    )
    peak = max((abs(r.self_change_us) for r in change.rows), default=0.0) or 1.0
    rows = "".join(
        f"<tr><td>{esc(r.function)}</td><td class=num>{r.self_a_us:,.2f}</td>"
        f"<td class=num>{r.self_b_us:,.2f}</td>"
        f'<td class="num change {"up" if r.self_change_us > 0 else "down"}" '
        f'style="--bar:{abs(r.self_change_us) / peak:.3f}">{r.self_change_us:+,.2f}</td>'
        f"<td class=num>{r.total_a_us:,.2f}</td><td class=num>{r.total_b_us:,.2f}</td></tr>"
        for r in change.rows
    )
    title = f"{_title(change.candidate)} against {change.baseline.label} (µs per transaction)"
    return (
        f'<h4>{esc(title)}</h4><table class="profile-diff">{head}{rows}</table>'
        f'<p class="note">{_whose(change.candidate).capitalize()} CPU per transaction: '
        f"{change.baseline.cpu_us_per_tx or 0:,.1f} µs → "
        f"{change.candidate.cpu_us_per_tx or 0:,.1f} µs.</p>"
    )


def _title(cell: CellProfile) -> str:
    return f"{cell.label}: pgbench" if cell.profile.process == PGBENCH else cell.label


def _whose(cell: CellProfile) -> str:
    return "pgbench" if cell.profile.process == PGBENCH else "server"
