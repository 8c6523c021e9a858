"""The terminal summary at the end of a campaign, from the same view model as the report."""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.text import fmt_ms, fmt_tps
from pgbenchlab.store import Store


@dataclass(frozen=True)
class SummaryRow:
    """One matrix cell, as printed: the numbers are the report's."""

    server: str
    scale: int
    workload: str
    clients: int
    other: str  # the other axes that vary (protocol, rate, ...), or ""
    runs: int
    not_ok: int
    tps: str  # mean ± half the confidence interval
    p99_ms: str
    warnings: int


HEADER = (
    "server",
    "scale",
    "workload",
    "clients",
    "other",
    "runs",
    "TPS",
    "p99 ms",
    "failed",
    "warn",
)
SHOWN_ELSEWHERE = ("server", "scale", "workload")


def summary_rows(store: Store, campaign_id: int) -> list[SummaryRow]:
    return rows_from_view(load_view(store, campaign_id, detail=False))


def rows_from_view(view: ReportView) -> list[SummaryRow]:
    cell_of = {r.id: r.cell_id for r in view.runs}
    warned: dict[str, int] = {}
    for a in view.advice:
        for run_id in a.run_ids:
            warned[cell_of[run_id]] = warned.get(cell_of[run_id], 0) + 1
    rows = []
    for c in view.cells:
        dims = dict(c.dims)
        other = " ".join(
            dims[a.key] for a in view.axes if a.key not in SHOWN_ELSEWHERE and dims[a.key]
        )
        rows.append(
            SummaryRow(
                server=dims["server"],
                scale=int(dims["scale"]),
                workload=dims["workload"],
                clients=c.clients,
                other=other,
                runs=c.n_ok,
                not_ok=c.n_not_ok,
                tps=fmt_tps(c.tps),
                p99_ms=fmt_ms(c.p99_ms),
                warnings=warned.get(c.cell_id, 0),
            )
        )
    return rows


def summary_text(store: Store, campaign_id: int) -> str:
    """The summary table and the warnings with what to do, as plain text lines."""
    view = load_view(store, campaign_id, detail=False)
    rows = rows_from_view(view)
    table = [list(HEADER)] + [
        [
            r.server,
            str(r.scale),
            r.workload,
            str(r.clients),
            r.other or "-",
            str(r.runs),
            r.tps,
            r.p99_ms,
            str(r.not_ok),
            str(r.warnings or "-"),
        ]
        for r in rows
    ]
    if not any(r.other for r in rows):  # nothing else varies: no empty column
        table = [row[:4] + row[5:] for row in table]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
    for a in view.advice:
        lines.append(f"warning: {a.message}; {a.remedy}")
    return "\n".join(lines)
