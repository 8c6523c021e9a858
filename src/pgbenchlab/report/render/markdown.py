"""The Markdown summary: the findings and the key tables, ready for a GitHub issue or an e-mail.

Every string that came from the user or the server is escaped: Markdown punctuation is
backslash-escaped and HTML is turned into entities, since GitHub renders inline HTML.
"""

from __future__ import annotations

import re
import time

from pgbenchlab.report.render.tables import change_tables, connection_cost_tables, key_tables
from pgbenchlab.report.views.answer import findings
from pgbenchlab.report.views.capacity_tables import answers_table
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.scalability import scalability_table
from pgbenchlab.report.views.spread import spread_table
from pgbenchlab.report.views.steps import step_table, summary, title
from pgbenchlab.report.views.text import Table

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")
# Only "<" that could open a tag, and "&" that could open an entity, mean anything to
# Markdown; the others stay as they are, readable in a plain-text e-mail.
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY_START = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def escape(text: str) -> str:
    """Text that renders literally in GitHub Markdown, in a table cell too."""
    text = _ENTITY_START.sub("&amp;", text)
    text = _TAG_START.sub("&lt;", text)
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return " ".join(text.split())  # a newline would end a table row


def table(t: Table) -> str:
    lines = [
        "| " + " | ".join(escape(h) for h in t.header) + " |",
        "|" + "|".join("---:" if i else "---" for i in range(len(t.header))) + "|",
    ]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines)


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


def title_lines(view: ReportView) -> list[str]:
    c = view.campaign
    about = [f"_{escape(c.description)}_", ""] if c.description else []
    return [f"## pgbench campaign “{escape(c.name)}”", "", *about]


def findings_lines(view: ReportView) -> list[str]:
    """The report's findings (`views.answer`), each naming its evidence below."""
    found = findings(view)
    if not found:
        return ["### Findings", "", "Nothing to conclude from these runs alone: see the tables."]
    said = [f"- {escape(f.text)} (_{escape(f.evidence)}_)" for f in found]
    return ["### Findings", "", *said]


def header(view: ReportView) -> list[str]:
    """The campaign's facts: servers, client, machine, when, how many runs."""
    c = view.campaign
    ok = sum(r.ok for r in view.runs)
    servers = ", ".join(f"{escape(s.label)} (PostgreSQL {escape(s.version)})" for s in view.servers)
    machine = dict(c.machine)
    host = ", ".join(
        escape(v)
        for v in (machine.get("cpu_model"), f"{machine.get('cpus', '?')} CPUs", machine.get("os"))
        if v
    )
    return [
        f"- servers: {servers or '-'}",
        *described(view),
        *lacking(view),
        f"- client: {escape(c.pgbench_version or 'pgbench')}; machine: {host or '-'}",
        f"- {_when(c.started_at)} to {_when(c.finished_at)} ({escape(c.status)}); "
        f"{len(view.runs)} runs, {ok} ok, {len(view.runs) - ok} failed or aborted",
        *(f"- test sets added {_when(at)}: {escape(', '.join(sets))}" for at, sets in c.joined),
    ]


def described(view: ReportView) -> list[str]:
    """What each server is, in the plan's words, once per server (its variants share them)."""
    said = {s.name: s.description for s in view.servers if s.description}
    return [f"  - {escape(name)}: {escape(text)}" for name, text in said.items()]


def lacking(view: ReportView) -> list[str]:
    """The telemetry each server's major could not give, once per server."""
    said = {s.name: s.telemetry_gaps for s in view.servers if s.telemetry_gaps}
    return [
        f"  - {escape(name)} lacks: {escape('; '.join(why for _, why in gaps))}"
        for name, gaps in said.items()
    ]


def render(view: ReportView) -> str:
    """The findings first, then the results, the warnings, and the campaign's facts last."""
    parts = [*title_lines(view), *findings_lines(view)]
    if view.capacity:
        answers = answers_table(list(view.capacity))
        parts += ["", f"### {answers.title}", "", table(answers), "", f"_{escape(answers.note)}_"]
    parts += ["", "### TPS and p99 latency by clients"]
    for t in key_tables(view):
        parts += ["", f"**{escape(t.title)}**", "", table(t), "", f"_{escape(t.note)}_"]
    changes = change_tables(view)
    if changes:
        parts += ["", f"### Relative change against {escape(view.baseline or '')}"]
        for t in changes:
            parts += ["", f"**{escape(t.title)}**", "", table(t), "", f"_{escape(t.note)}_"]
    for extra in (spread_table(view), scalability_table(view)):
        if extra is not None:
            parts += ["", f"### {escape(extra.title)}", "", table(extra), ""]
            parts += [f"_{escape(extra.note)}_"]
    for t in connection_cost_tables(view):
        parts += ["", f"### {escape(t.title)}", "", table(t), "", f"_{escape(t.note)}_"]
    for found in view.scans:
        parts += ["", f"### {escape(title(found))}", ""]
        steps = step_table(found)
        parts += (
            [table(steps), "", f"_{escape(steps.note)}_"]
            if found.steps
            else [escape(summary(found))]
        )
    if view.advice:
        parts += ["", "### Warnings", ""]
        parts += [f"- **{escape(a.message)}** — {escape(a.remedy)}" for a in view.advice]
    parts += ["", "### Campaign", "", *header(view)]
    parts += ["", f"<sub>pgbenchlab {escape(view.campaign.pgbenchlab_version)}</sub>", ""]
    return "\n".join(parts)
