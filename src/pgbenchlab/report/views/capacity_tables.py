"""A capacity campaign's answers and probes as the tables the terminal, the report and the
Markdown summary print."""

from __future__ import annotations

from pgbenchlab.analysis.capacity import VERDICT_RULES, CapacityAnswer
from pgbenchlab.report.views.capacity import CapacityComparison, CapacityView
from pgbenchlab.report.views.text import Table


def answer_text(view: CapacityView) -> str:
    """The answer with its bracket, what its confirmations achieved and skipped, and how its
    probes were judged when that was before skipped transactions counted."""
    answer = view.answer
    if answer is None:
        return "not decided yet (interrupted)"
    low = "-" if answer.highest_pass is None else f"{answer.highest_pass:g}"
    high = "none failed" if answer.lowest_fail is None else f"{answer.lowest_fail:g}"
    rate = "no rate" if answer.rate is None else f"{answer.rate:g} tx/s"
    runs = ""
    if view.achieved is not None:
        runs += f", achieved at least {view.achieved:.1f} tx/s"
    if view.skipped_share is not None:
        runs += f", skipped at most {view.skipped_share:.2%}"
    return f"{rate}{runs} (bracket: pass {low}, fail {high}; {answer.reason})" + (
        f"; {OLDER_RULES}" if _older(view) else ""
    )


OLDER_RULES = (
    "judged by older rules (before skipped and failed transactions counted over the latency "
    "bounds): a pass may hide them; search again with --fresh"
)


def _older(view: CapacityView) -> bool:
    return view.verdict_rules < VERDICT_RULES


def answers_table(views: list[CapacityView]) -> Table:
    rows = tuple(
        (
            v.server,
            v.cell,
            v.slo.text,
            "-" if v.answer is None or v.answer.rate is None else f"{v.answer.rate:g}",
            _num(v.achieved, ".1f"),
            _num(v.skipped_share, ".2%"),
            _bracket(v.answer),
            str(len(v.points)) + ("*" if _older(v) else ""),
        )
        for v in views
    )
    return Table(
        "Capacity under the SLO",
        (
            "server",
            "cell",
            "SLO",
            "capacity tx/s",
            "achieved tx/s",
            "skipped",
            "bracket (pass – fail)",
            "probes",
        ),
        rows,
        "The highest offered rate (pgbench -R) whose full-length confirmation runs met the SLO "
        "and kept up (a skipped transaction counts as over every latency bound); achieved: the "
        "lowest rate those runs achieved, skipped: the highest share they skipped; the bracket "
        "runs from it to the lowest rate that failed."
        + (f" *: {OLDER_RULES}." if any(map(_older, views)) else ""),
    )


def _bracket(answer: CapacityAnswer | None) -> str:
    if answer is None or answer.highest_pass is None:
        return "-"
    high = "∞" if answer.lowest_fail is None else f"{answer.lowest_fail:g}"
    return f"{answer.highest_pass:g} – {high}"


def probes_table(view: CapacityView) -> Table:
    header = (
        "run",
        "role",
        "offered",
        "clients",
        "achieved",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "late",
        "skipped",
        "verdict",
    )
    rows = tuple(
        (
            str(p.run_id),
            p.role,
            _num(p.offered, "g", "closed loop"),
            str(p.clients),
            _num(p.achieved, ".1f"),
            _num(p.p50_ms, ".2f"),
            _num(p.p99_ms, ".2f"),
            _num(p.p999_ms, ".2f"),
            _num(p.late_share, ".2%"),
            _num(p.skipped_share, ".2%"),
            p.verdict,
        )
        for p in view.points
    )
    title = f"{view.server} {view.cell}: {answer_text(view)}"
    return Table(title, header, rows)


def _num(value: float | None, spec: str, absent: str = "-") -> str:
    return absent if value is None else format(value, spec)


def comparison_table(found: list[CapacityComparison], baseline: str, candidate: str) -> Table:
    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = tuple(
        (
            c.cell,
            _rate(c.baseline.answer),
            _bracket(c.baseline.answer),
            _rate(c.candidate.answer),
            _bracket(c.candidate.answer),
            ratio(c.ratio),
            f"{ratio(c.ratio_low)} – {ratio(c.ratio_high)}",
        )
        for c in found
    )
    return Table(
        f"Capacity of {candidate} against {baseline}",
        (
            "cell",
            f"{baseline} tx/s",
            "bracket",
            f"{candidate} tx/s",
            "bracket",
            "ratio",
            "ratio bracket",
        ),
        rows,
        "ratio: candidate ÷ baseline capacity; its bracket: from the candidate's highest pass ÷ "
        "the baseline's lowest fail to the candidate's lowest fail ÷ the baseline's highest pass.",
    )


def comparison_dict(c: CapacityComparison) -> dict[str, object]:
    return {
        "cell": c.cell,
        "baseline": c.baseline.as_dict()["answer"] | {"server": c.baseline.server},
        "candidate": c.candidate.as_dict()["answer"] | {"server": c.candidate.server},
        "ratio": c.ratio,
        "ratio_low": c.ratio_low,
        "ratio_high": c.ratio_high,
    }


def _rate(answer: CapacityAnswer | None) -> str:
    return "-" if answer is None or answer.rate is None else f"{answer.rate:g}"
