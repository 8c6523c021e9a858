"""Text every output shares: a table of formatted cells, and how TPS and latencies print.

The HTML report, the Markdown summary, the terminal summary and `compare --series` print these
same strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.analysis.stats import DEFAULT_CV_LIMIT
from pgbenchlab.records.telemetry import Affinity
from pgbenchlab.report.views.model import Interval


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    link_ids: tuple[str, ...] = ()  # per row: the cell the row's first cell links to, or ""
    anchor: str = ""  # its id in the HTML report, where a finding links to it (`answer`)


def plain_table(t: Table) -> str:
    """A table for a terminal: its title, aligned columns, its note."""
    rows = [t.header, *t.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(t.header))]
    lines = [t.title, ""]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([*lines, "", t.note] if t.note else lines)


def fmt_tps(interval: Interval | None) -> str:
    """Mean TPS with the half-width of its confidence interval, as a share of the mean; "-"
    when no run of the cell has one (failed or interrupted: the counts beside it say which)."""
    if interval is None:
        return "-"
    text = f"{interval.mean:,.0f}"
    if interval.low is not None and interval.high is not None and interval.mean:
        half = (interval.high - interval.low) / 2 / interval.mean
        text += f" ±{half:.1%}" if half <= 1 else " ±>100%"
    if interval.cv is not None and interval.cv > DEFAULT_CV_LIMIT:
        text += " ⚠"
    return text


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}" if value < 100 else f"{value:,.1f}"


def affinity_text(a: Affinity) -> str:
    """ "pgbench: CPU 1 (pinned to 1: verified, 1 process checked)" and the like."""
    who = "server processes" if a.role == "server" else a.role
    seen = " | ".join(a.observed)
    processes = f"{a.processes} process{'' if a.processes == 1 else 'es'} checked"
    if a.requested is None:
        text = f"{who}: CPU {seen} (not pinned; {processes})"
    else:
        state = "verified" if a.verified else "NOT as asked"
        text = f"{who}: CPU {seen} (pinned to {a.requested}: {state}, {processes})"
    return text + numa_text(a)


def numa_text(a: Affinity) -> str:
    """ "; memory node 0 (numa membind=0: policy bind:0)" where the plan placed the role, the
    memory nodes alone otherwise (nothing from a database older than their record)."""
    if not a.memory_nodes:
        return ""
    nodes = f"; memory node {' | '.join(a.memory_nodes)}"
    if a.numa_requested is None:
        return nodes
    shown = " | ".join(a.numa_policies) or "not read"
    return f"{nodes} (numa {a.numa_requested}: policy {shown})"
