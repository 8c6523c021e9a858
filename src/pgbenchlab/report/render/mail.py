"""`report --format text`: a campaign in plain text of at most 72 columns, to paste into a
mailing-list post as it is: what was compared, the machine and pgbench, each cell's change per
metric with its interval and verdict, the noise floors measured, and how to reproduce it.

No markup: headings are lines of their own, lists are indented, and every line is wrapped (a
word longer than a line, a path say, is broken) so that no mail client rewraps it.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterable

from pgbenchlab.analysis.comparison import MAX_REPEATS
from pgbenchlab.analysis.equivalence import margin_text
from pgbenchlab.report.views.compare import CellChange, correction_line
from pgbenchlab.report.views.mail import MailView, floor_line
from pgbenchlab.report.views.metrics import label
from pgbenchlab.report.views.model import ReportView

WIDTH = 72
# A plan is quoted whole when it is this short and fits the width indented; else it is named.
PLAN_LINES = 40
INDENT = "  "


def render(mail: MailView) -> str:
    view = mail.view
    parts = [
        _title(view),
        _compared(view),
        _machine(view),
        _results(mail),
        _floors(mail),
        _reproduce(view),
    ]
    lines = [line.rstrip() for part in parts for line in [*part, ""]]
    return "\n".join(lines).rstrip("\n") + "\n"


def wrap(text: str, indent: str = "", hanging: str | None = None) -> list[str]:
    """``text`` in lines of at most WIDTH columns, the first indented by ``indent``, the rest
    by ``hanging`` (default: the same)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent if hanging is None else hanging,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def _title(view: ReportView) -> list[str]:
    c = view.campaign
    lines = wrap(f"pgbenchlab campaign {c.name!r} ({c.status})")
    lines += wrap(f"{_when(c.started_at)} to {_when(c.finished_at)}, {len(view.runs)} runs")
    if c.description:
        lines += ["", *wrap(c.description)]
    return lines


def _compared(view: ReportView) -> list[str]:
    lines = ["What was compared"]
    for server in view.servers:
        role = " (baseline)" if server.label == view.baseline else ""
        lines += wrap(f"{server.label}{role}: PostgreSQL {server.version}, {server.kind}",
                      INDENT, INDENT * 3)  # fmt: skip
        if server.description:
            lines += wrap(server.description, INDENT * 2, INDENT * 3)
        for title, text in server.build:
            lines += wrap(f"{title}: {text}", INDENT * 2, INDENT * 3)
    settings = {s.label: dict(s.settings) for s in view.servers}
    for name in view.differing_settings:
        values = ", ".join(f"{server} {found.get(name, '-')}" for server, found in settings.items())
        lines += wrap(f"setting {name}: {values}", INDENT, INDENT * 3)
    for axis, taken in _axes(view):
        lines += wrap(f"{axis}: {', '.join(taken)}", INDENT, INDENT * 3)
    return lines


def _axes(view: ReportView) -> Iterable[tuple[str, list[str]]]:
    seen: dict[str, list[str]] = {}
    for cell in view.cells:
        for axis, value in cell.dims:
            if axis != "server" and value and value not in seen.setdefault(axis, []):
                seen[axis].append(value)
    return seen.items()


def _machine(view: ReportView) -> list[str]:
    c = view.campaign
    machine = dict(c.machine)
    facts: list[object] = [machine.get("cpu_model"), f"{machine.get('cpus', '?')} CPUs"]
    memory = machine.get("memory_bytes")
    if memory is not None and str(memory).isdigit():
        facts.append(f"{int(memory) / 2**30:.0f} GiB")
    facts += [machine.get("os"), machine.get("kernel")]
    lines = ["Machine and pgbench"]
    lines += wrap("machine: " + ", ".join(str(f) for f in facts if f), INDENT, INDENT * 3)
    lines += wrap(f"pgbench: {c.pgbench_version or 'unknown'}", INDENT, INDENT * 3)
    example = next((r for r in view.runs if r.argv), None)
    if example is not None:
        lines += wrap("e.g. " + " ".join(example.argv), INDENT, INDENT * 3)
    return lines


def _results(mail: MailView) -> list[str]:
    confidence = mail.rules.confidence
    lines = ["Results"]
    if not mail.candidates:
        lines += wrap("No two servers ran the same cells: nothing was compared.", INDENT)
        return lines
    lines += wrap(
        f"change = candidate / baseline - 1, with its {confidence:.0%} confidence interval "
        f"over the repeats; a change counts beyond ±{mail.rules.threshold:.0%}.",
        INDENT,
    )
    if mail.rules.equivalence is not None:
        lines += wrap(
            f"Equivalence within ±{margin_text(mail.rules.equivalence)}: two one-sided tests "
            f"({1 - 2 * (1 - confidence):.0%} interval inside the margin).",
            INDENT,
        )
    count = sum(len(changes) for _, changes in mail.candidates)
    lines += wrap(correction_line(count, mail.rules), INDENT)
    for candidate, changes in mail.candidates:
        lines += ["", *wrap(f"{candidate} against {mail.view.baseline}", INDENT)]
        for cell in dict.fromkeys(c.cell for c in changes):
            lines += wrap(cell, INDENT * 2)
            for change in (c for c in changes if c.cell == cell):
                lines += _change(change)
    return lines


def _change(c: CellChange) -> list[str]:
    interval = (
        f"{c.ci_low:+.1%} to {c.ci_high:+.1%}"
        if c.ci_low is not None and c.ci_high is not None
        else "no interval"
    )
    verdict = c.verdict_text
    text = f"{label(c.metric)}: {c.relative_change:+.1%} ({interval}, n={c.baseline_n}/"
    text += f"{c.candidate_n}) {verdict}"
    if c.adjusted_away:
        text += f" once adjusted (alone: p={c.p_value:.2g}, adjusted {c.adjusted_p:.2g})"
    elif c.repeats_needed and c.repeats_needed >= MAX_REPEATS:
        text += ", too close to the threshold to decide"
    elif c.repeats_needed:
        text += f", about {c.repeats_needed} runs per side would decide it"
    lines = wrap(text, INDENT * 3, INDENT * 4)
    if c.floors:
        lines += wrap(f"noise floors: {c.floors}", INDENT * 4, INDENT * 4)
    if c.equivalence is not None:
        lines += wrap(c.equivalence_reason, INDENT * 4, INDENT * 4)
    return lines


def _floors(mail: MailView) -> list[str]:
    lines = ["Noise floors"]
    for floor in mail.floors:
        lines += wrap(floor_line(floor), INDENT, INDENT * 3)
    for cell in dict.fromkeys(r.cell for r in mail.cell_floors):
        lines += wrap(cell, INDENT, INDENT * 3)
        for r in (r for r in mail.cell_floors if r.cell == cell):
            text = f"{r.metric}: {r.kind} {r.spread:.1%} ({r.evidence})"
            lines += wrap(text, INDENT * 2, INDENT * 4)
    kinds = {f.kind for f in mail.floors} | {r.kind for r in mail.cell_floors}
    if "run to run" not in kinds:
        lines += wrap("run to run: not measured (fewer than 2 repeats per cell)", INDENT)
    missing = [k for k in ("restart to restart", "build to build") if k not in kinds]
    if missing:
        lines += wrap(f"{' and '.join(missing)}: not measured", INDENT)
    return lines


def _reproduce(view: ReportView) -> list[str]:
    c = view.campaign
    lines = ["How to reproduce"]
    lines += wrap(f"pgbenchlab {c.pgbenchlab_version}: pgbenchlab run {c.plan_path}",
                  INDENT, INDENT * 3)  # fmt: skip
    plan = c.plan_text.rstrip("\n").splitlines()
    fits = all(len(INDENT * 2 + line.rstrip()) <= WIDTH for line in plan)
    if plan and len(plan) <= PLAN_LINES and fits:
        lines += [f"{INDENT}with the plan:", ""]
        lines += [f"{INDENT * 2}{line}".rstrip() for line in plan]
    else:
        lines += wrap(
            f"The plan ({len(plan)} lines, too long to quote) is stored with the campaign "
            f"and shown whole in its HTML report (pgbenchlab report --campaign {c.name}).",
            INDENT,
        )
    return lines


def _when(at: float | None) -> str:
    if at is None:
        return "unfinished"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
