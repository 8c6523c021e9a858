"""What the static parts of the HTML report show: configuration, warnings, key tables, method.

Plain values for the page's template (templates/report.html and sections.html), which renders
them readable without JavaScript (an e-mail preview, a printout) and escapes every one: server
names, settings and errors come from outside and render as text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD
from pgbenchlab.durations import duration_text
from pgbenchlab.report.render.chart_data import cell_link, run_link
from pgbenchlab.report.render.tables import (
    change_tables,
    connection_cost_tables,
    floor_tables,
    key_tables,
)
from pgbenchlab.report.views.answer import warning_anchor
from pgbenchlab.report.views.model import Advice, ReportView, ServerView
from pgbenchlab.report.views.scalability import scalability_table
from pgbenchlab.report.views.spread import spread_table
from pgbenchlab.report.views.steps import step_table, summary, title
from pgbenchlab.report.views.text import Table
from pgbenchlab.results import RunStatus

MAX_RUN_LINKS = 12


def when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(seconds))


# -- configuration -----------------------------------------------------------------------------


Facts = list[tuple[str, object]]


def campaign_facts(view: ReportView) -> Facts:
    c = view.campaign
    runs = view.runs
    ok = sum(r.status == RunStatus.OK for r in runs)
    aborted = sum(r.status == RunStatus.ABORTED for r in runs)
    measured = sum(r.duration_s or 0 for r in runs if r.status != RunStatus.FAILED)
    wall = (c.finished_at - c.started_at) if c.finished_at else None
    return [
        ("campaign", c.name),
        ("status", c.status),
        ("plan file", c.plan_path),
        ("started", when(c.started_at)),
        ("finished", when(c.finished_at)),
        ("wall-clock time", duration_text(wall) if wall is not None else "-"),
        ("measured time (sum of runs)", duration_text(measured)),
        ("runs", f"{len(runs)}: {ok} ok, {aborted} aborted, {len(runs) - ok - aborted} failed"),
        ("pgbench (the client for every run)", c.pgbench_version or "-"),
        ("baseline server for comparisons", view.baseline or "-"),
        ("pgbenchlab", c.pgbenchlab_version),
        *(("test sets added", f"{', '.join(added)} ({when(at)})") for at, added in c.joined),
    ]


@dataclass(frozen=True)
class ServerRow:
    title: str
    values: tuple[str, ...]  # one per server
    css: str = ""  # "differs": the values differ between the servers


@dataclass(frozen=True)
class ServersTable:
    labels: tuple[str, ...]
    rows: tuple[ServerRow, ...]


def servers_table(view: ReportView) -> ServersTable | None:
    """The servers side by side; None when no run reached a server."""
    servers = view.servers
    if not servers:
        return None
    described = any(s.description for s in servers)
    rows = [_server_row("what it is", [s.description or "-" for s in servers])] if described else []
    rows += [
        _server_row("PostgreSQL version", [s.version for s in servers]),
        _server_row("kind", [s.kind for s in servers]),
        _server_row("installation", [s.install or "-" for s in servers]),
        _server_row("data directory", [s.data_dir or "-" for s in servers]),
        _server_row("file system", [s.storage or "-" for s in servers]),
        _server_row("variant", [_pairs_text(s.variant) or "-" for s in servers]),
    ]
    rows += build_rows(servers)
    rows += setup_rows(servers)
    if any(s.telemetry_gaps for s in servers):  # stated, never a blank chart panel alone
        lacks = ["; ".join(why for _, why in s.telemetry_gaps) or "-" for s in servers]
        rows.append(_server_row("telemetry its major lacks", lacks))
    for name in view.differing_settings:
        values = [dict(s.settings).get(name, "(default)") for s in servers]
        rows.append(_server_row(name, values, css="differs"))
    rows.append(_server_row("other settings", [_other_settings(s, view) for s in servers]))
    return ServersTable(tuple(s.label for s in servers), tuple(rows))


def build_rows(servers: Sequence[ServerView]) -> list[ServerRow]:
    """The provenance of servers built from source, a row per fact; a fact that differs
    between them (a patch, say) is highlighted like a differing setting."""
    if not any(s.build for s in servers):
        return []
    facts = [t for t, _ in next(s.build for s in servers if s.build)]
    rows = []
    for fact in facts:
        values = [dict(s.build).get(fact, "-") for s in servers]
        differs = len(set(values)) > 1 and fact not in ("build", "build time")
        rows.append(_server_row(fact, values, css="differs" if differs else ""))
    return rows


def setup_rows(servers: Sequence[ServerView]) -> list[ServerRow]:
    """Each server's tablespaces and one-off preparation, a row per kind of fact."""
    titles = list(dict.fromkeys(t for s in servers for t, _ in s.setup))
    return [_server_row(t, [dict(s.setup).get(t, "-") for s in servers]) for t in titles]


def _server_row(title: str, values: Sequence[str], css: str = "") -> ServerRow:
    return ServerRow(title, tuple(values), css)


def _pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs)


def _other_settings(server: ServerView, view: ReportView) -> str:
    same = [(k, v) for k, v in server.settings if k not in view.differing_settings]
    return _pairs_text(same) or "-"


def diagnosis_facts(view: ReportView) -> Facts:
    """How many runs each limit held back, where telemetry could tell."""
    counts: dict[str, int] = {}
    for r in view.runs:
        if r.diagnosis:
            counts[r.diagnosis] = counts.get(r.diagnosis, 0) + 1
    return [(k.replace("_", " "), f"{n} run(s)") for k, n in sorted(counts.items(), key=_by_count)]


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


MACHINE_LABELS = {
    "cpu_model": "CPU",
    "cpus": "CPUs",
    "memory_bytes": "memory",
    "os": "operating system",
    "kernel": "kernel",
    "hostname": "host name",
    "governor": "CPU frequency governor",
    "transparent_hugepages": "transparent huge pages",
    "python": "Python",
}


def machine_facts(view: ReportView) -> Facts:
    pairs: Facts = []
    for key, value in view.campaign.machine:
        text: object = value
        if key == "memory_bytes" and value.isdigit():
            text = f"{int(value) / 2**30:.1f} GiB"
        pairs.append((MACHINE_LABELS.get(key, key), text))
    return pairs


# -- warnings, tables, method ------------------------------------------------------------------


@dataclass(frozen=True)
class AdviceItem:
    """A warning as the page lists it, with links to its evidence."""

    anchor: str  # its id, where the report's findings link to it
    severity: str
    message: str
    remedy: str
    cell_link: str | None  # the cell's runs in the run table
    runs: tuple[tuple[str, str], ...]  # (link, run id) of the first runs
    more: int  # runs beyond those linked


def advice_items(advice: Sequence[Advice]) -> list[AdviceItem]:
    return [
        AdviceItem(
            warning_anchor(i),
            a.severity,
            a.message,
            a.remedy,
            cell_link(a.cell_id) if a.cell_id else None,
            tuple((run_link(i), str(i)) for i in a.run_ids[:MAX_RUN_LINKS]),
            len(a.run_ids) - MAX_RUN_LINKS,
        )
        for i, a in enumerate(advice)
    ]


def summary_tables(view: ReportView) -> list[Table]:
    tables = [*key_tables(view), *change_tables(view)]
    for extra in (spread_table(view), scalability_table(view)):
        if extra is not None:
            tables.append(extra)
    return tables + connection_cost_tables(view) + floor_tables(view)


@dataclass(frozen=True)
class ScanPart:
    """A scan along one axis: its table of steps, or the sentence saying there were none."""

    title: str
    summary: str
    table: Table | None


def change_points(view: ReportView) -> list[ScanPart]:
    """Steps along the servers and the setting axes with 3 values or more, as the CLI finds them."""
    return [
        ScanPart(title(found), summary(found), step_table(found) if found.steps else None)
        for found in view.scans
    ]


METHOD = (
    "TPS is pgbench's own figure for each run, without connection time. A cell's TPS is the "
    "mean over its repeats; error bars and ± are Student's t confidence intervals over the "
    "runs (runs, not seconds, are the unit: per-second samples are autocorrelated). Latency "
    "percentiles are nearest-rank over each run's per-transaction log (full or sampled, as the "
    "run table says) and then averaged over repeats; max is the slowest transaction of any "
    "repeat. Under a rate limit (-R), latency counts from the scheduled start and includes the "
    "schedule lag. Changes against the baseline compare the geometric means of the repeats "
    "with Welch's t test on log values; a change within "
    f"±{DEFAULT_THRESHOLD:.0%} is not attributed to the server."
)
