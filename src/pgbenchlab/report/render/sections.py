"""The static parts of the HTML report: overview, warnings, key tables, method.

They are plain HTML, readable without JavaScript (an e-mail preview, a printout). Every value
passes through `esc`: server names, settings and errors come from outside and render as text.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence

from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD
from pgbenchlab.report.render.chart_data import cell_link, run_link
from pgbenchlab.report.render.payload import common_facts
from pgbenchlab.report.render.tables import change_tables, connection_cost_tables, key_tables
from pgbenchlab.report.views.model import Advice, ReportView, ServerView
from pgbenchlab.report.views.scalability import scalability_table
from pgbenchlab.report.views.steps import step_table, summary, title
from pgbenchlab.report.views.text import Table
from pgbenchlab.results import RunStatus

MAX_RUN_LINKS = 12


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(seconds))


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def facts_table(pairs: Iterable[tuple[str, object]], css: str = "facts") -> str:
    rows = "".join(
        f'<tr><th scope="row">{esc(k)}</th><td>{esc(v)}</td></tr>'
        for k, v in pairs
        if v is not None and v != ""
    )
    return f'<table class="{css}">{rows}</table>'


def data_table(t: Table) -> str:
    head = "".join(
        f'<th scope="col"{" class=num" if i else ""}>{esc(h)}</th>' for i, h in enumerate(t.header)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i else ''}>{esc(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in t.rows
    )
    note = f'<p class="note">{esc(t.note)}</p>' if t.note else ""
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<h3>{esc(t.title)}</h3>{table}{note}"


# -- overview ----------------------------------------------------------------------------------


def campaign_facts(view: ReportView) -> str:
    c = view.campaign
    runs = view.runs
    ok = sum(r.status == RunStatus.OK for r in runs)
    aborted = sum(r.status == RunStatus.ABORTED for r in runs)
    measured = sum(r.duration_s or 0 for r in runs if r.status != RunStatus.FAILED)
    wall = (c.finished_at - c.started_at) if c.finished_at else None
    pairs: list[tuple[str, object]] = [
        ("campaign", c.name),
        ("status", c.status),
        ("plan file", c.plan_path),
        ("started", when(c.started_at)),
        ("finished", when(c.finished_at)),
        ("wall-clock time", duration(wall) if wall is not None else "-"),
        ("measured time (sum of runs)", duration(measured)),
        ("runs", f"{len(runs)}: {ok} ok, {aborted} aborted, {len(runs) - ok - aborted} failed"),
        ("pgbench (the client for every run)", c.pgbench_version or "-"),
        ("baseline server for comparisons", view.baseline or "-"),
        ("pgbenchlab", c.pgbenchlab_version),
    ]
    return facts_table(pairs)


def servers_table(view: ReportView) -> str:
    servers = view.servers
    if not servers:
        return "<p>No server facts were recorded (no run reached a server).</p>"
    head = "".join(f'<th scope="col">{esc(s.label)}</th>' for s in servers)
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
    if any(s.telemetry_gaps for s in servers):  # stated, never a blank chart panel alone
        lacks = ["; ".join(why for _, why in s.telemetry_gaps) or "-" for s in servers]
        rows.append(_server_row("telemetry its major lacks", lacks))
    for name in view.differing_settings:
        values = [dict(s.settings).get(name, "(default)") for s in servers]
        rows.append(_server_row(name, values, css="differs"))
    rows.append(_server_row("other settings", [_other_settings(s, view) for s in servers]))
    note = (
        '<p class="note">Highlighted: settings whose values differ between the servers. '
        "Settings are every value not at its default, as the server reported it.</p>"
    )
    head = f"<thead><tr><th></th>{head}</tr></thead>"
    return f'<table class="servers">{head}{"".join(rows)}</table>{note}'


def build_rows(servers: Sequence[ServerView]) -> list[str]:
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


def _server_row(title: str, values: Sequence[str], css: str = "") -> str:
    cells = "".join(f"<td>{esc(v)}</td>" for v in values)
    klass = f' class="{css}"' if css else ""
    return f'<tr{klass}><th scope="row">{esc(title)}</th>{cells}</tr>'


def _pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs)


def _other_settings(server: ServerView, view: ReportView) -> str:
    same = [(k, v) for k, v in server.settings if k not in view.differing_settings]
    return _pairs_text(same) or "-"


def diagnosis_table(view: ReportView) -> str:
    """How many runs each limit held back, where telemetry could tell."""
    counts: dict[str, int] = {}
    for r in view.runs:
        if r.diagnosis:
            counts[r.diagnosis] = counts.get(r.diagnosis, 0) + 1
    if not counts:
        return ""
    rows = [(k.replace("_", " "), f"{n} run(s)") for k, n in sorted(counts.items(), key=_by_count)]
    note = (
        '<p class="note">From each run\'s telemetry (wait events, CPU, I/O, checkpoints); the '
        "run table's “limited by” column and each run's detail give the evidence.</p>"
    )
    return f"<h3>What limited the runs</h3>{facts_table(rows)}{note}"


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def shared_run_facts(view: ReportView) -> str:
    facts = common_facts(view)
    if not facts:
        return ""
    note = '<p class="note">The same for every run; each run\'s detail lists the rest.</p>'
    return f"<h3>Every run</h3>{facts_table(facts)}{note}"


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


def machine_table(view: ReportView) -> str:
    pairs: list[tuple[str, object]] = []
    for key, value in view.campaign.machine:
        text: object = value
        if key == "memory_bytes" and value.isdigit():
            text = f"{int(value) / 2**30:.1f} GiB"
        pairs.append((MACHINE_LABELS.get(key, key), text))
    return facts_table(pairs) if pairs else "<p>No machine facts recorded.</p>"


# -- warnings, tables, method ------------------------------------------------------------------


def advice_list(advice: Sequence[Advice]) -> str:
    if not advice:
        return '<p class="ok-note">No warnings: every run finished and passed the checks.</p>'
    return '<ul class="advice">' + "".join(_advice_item(a) for a in advice) + "</ul>"


def _advice_item(a: Advice) -> str:
    links = " ".join(
        f'<a href="{esc(run_link(i))}">{esc(i)}</a>' for i in a.run_ids[:MAX_RUN_LINKS]
    )
    more = len(a.run_ids) - MAX_RUN_LINKS
    if more > 0:
        links += f" … and {more} more"
    if a.cell_id:
        links = f'<a href="{esc(cell_link(a.cell_id))}">the cell\'s runs</a>: ' + links
    runs = f'<span class="runs">runs: {links}</span>' if links else ""
    return (
        f'<li class="{esc(a.severity)}"><span class="what">{esc(a.message)}</span>'
        f'<span class="todo">What to do: {esc(a.remedy)}</span>{runs}</li>'
    )


def summary_tables(view: ReportView) -> str:
    parts = [data_table(t) for t in key_tables(view)]
    parts += [data_table(t) for t in change_tables(view)]
    usl = scalability_table(view)
    if usl is not None:
        parts.append(data_table(usl))
    parts += [data_table(t) for t in connection_cost_tables(view)]
    return "".join(parts)


def change_points(view: ReportView) -> str:
    """Steps along the servers and the setting axes with 3 values or more, as the CLI finds them."""
    if not view.scans:
        return ""
    parts = [
        data_table(step_table(found))
        if found.steps
        else f"<h3>{esc(title(found))}</h3><p>{esc(summary(found))}</p>"
        for found in view.scans
    ]
    heading = "<h2>Where performance stepped</h2>"
    return f'<section id="change-points">{heading}{"".join(parts)}</section>'


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


def method_note() -> str:
    return f"<p>{esc(METHOD)}</p>"
