"""Warnings as data, each with what to do: the report shows them where they matter.

Runs with the same problem are grouped into one piece of advice naming them all, so a campaign
of a thousand short runs gives one line, not a thousand.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence

from pgbenchlab import findings
from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.analysis.stats import DEFAULT_CV_LIMIT, high_variation_warning
from pgbenchlab.findings import BRANCH_UPDATING_BUILTINS, WarningCode
from pgbenchlab.report.views.labels import cell_title
from pgbenchlab.report.views.model import Advice, Axis, CellView, RunView
from pgbenchlab.results import RunStatus, missing_shards_text

# Below a minute a run measures warm-up, cache state and whether a checkpoint fell inside it
# more than steady state; pgbench-tools and most published results use 60 s or more.
MIN_DURATION_S = 60
# Other processes' share of the host's CPUs, beyond the other repeats', that explains a slow run.
OTHER_LOAD_GAP = 0.10
MAX_NAMED = 5  # cells named in one piece of advice; the rest are counted

REMEDIES = {
    "failed": "nothing was measured: read the error (and the server log), fix the cause and run "
    "the same command again; failed runs are retried, finished ones kept",
    "interrupted": "stopped before it finished (Ctrl-C or a signal), nothing wrong with it: run "
    "the same command again to measure it; finished runs are kept",
    "aborted": "clients stopped early, so TPS and latency cover part of the run: read "
    "pgbench's error in the run's detail (lost connection, deadlock, serialization failure); "
    "allow retries (max_tries in the plan, pgbench 15+) or fix the script",
    "short-run": f"use runs of {MIN_DURATION_S} s or more (minutes for read-write, so that "
    "checkpoints and autovacuum happen inside every run rather than by chance)",
    "high-variation": "the interval is wide: add repeats, interleave configurations, and "
    "quieten the host before reading a difference from this cell",
    "scale-below-clients": findings.REMEDIES[WarningCode.SCALE_BELOW_CLIENTS],
    "load-generator": findings.REMEDIES[WarningCode.PGBENCH_SATURATED],
    "checkpoint": "a checkpoint's dip decides such runs: make runs long enough to hold several "
    "checkpoints (so each run has its share), or spread them (checkpoint_completion_target, a "
    "larger max_wal_size) if that is the setting under test",
    "run-warning": "see the run's detail",
    "incomplete": "the merge lacks those machines' results directories, so the points of the "
    "plan they ran have no runs here: merge again with them (pgbenchlab merge --results NEW, "
    "this directory and theirs)",
}


def collect(
    runs: Sequence[RunView],
    cells: Sequence[CellView],
    axes: Sequence[Axis],
    missing_shards: Sequence[str] = (),
) -> tuple[Advice, ...]:
    found: list[Advice] = []
    if missing_shards:  # an incomplete merge
        text = f"incomplete: {missing_shards_text(missing_shards)}"
        found.append(Advice("incomplete", "error", text, REMEDIES["incomplete"]))
    found += _failed(runs)
    found += _grouped(runs, "interrupted", "warning", _is_interrupted, "run(s) interrupted")
    found += _grouped(runs, "aborted", "error", _is_aborted, "run(s) aborted")
    found += _grouped(runs, "short-run", "warning", _is_short, _short_text(runs))
    found += _grouped(
        runs, "scale-below-clients", "warning", _scale_below_clients, _scale_text(runs)
    )
    found += _grouped(
        runs, "load-generator", "warning", _load_generator_busy, "run(s) saturated pgbench"
    )
    found += _grouped(
        runs,
        "checkpoint",
        "warning",
        lambda r: r.diagnosis == Bottleneck.CHECKPOINT_DISTURBED,
        "run(s) lost throughput to a checkpoint inside the run",
    )
    found += _variation(runs, cells, axes)
    found += _other_stored(runs)
    return tuple(found)


def _advice(kind: str, severity: str, message: str, runs: Sequence[RunView]) -> Advice:
    return Advice(kind, severity, message, REMEDIES[kind], tuple(r.id for r in runs))


def _grouped(
    runs: Sequence[RunView],
    kind: str,
    severity: str,
    test: Callable[[RunView], bool],
    text: str,
) -> list[Advice]:
    hit = [r for r in runs if test(r)]
    return [_advice(kind, severity, f"{len(hit)} {text}", hit)] if hit else []


def _failed(runs: Sequence[RunView]) -> list[Advice]:
    by_error: dict[str, list[RunView]] = {}
    for r in runs:
        if r.status not in (RunStatus.OK, RunStatus.ABORTED, RunStatus.INTERRUPTED):
            by_error.setdefault(f"{r.status}: {r.error or 'no error recorded'}", []).append(r)
    return [
        _advice("failed", "error", f"{len(group)} run(s) {error}", group)
        for error, group in by_error.items()
    ]


def _is_interrupted(r: RunView) -> bool:
    return r.status == RunStatus.INTERRUPTED


def _is_aborted(r: RunView) -> bool:
    return r.status == RunStatus.ABORTED


def _is_short(r: RunView) -> bool:
    return (
        r.status != RunStatus.FAILED and r.duration_s is not None and r.duration_s < MIN_DURATION_S
    )


def _short_text(runs: Sequence[RunView]) -> str:
    shortest = min((r.duration_s for r in runs if _is_short(r) and r.duration_s), default=0)
    return f"run(s) shorter than {MIN_DURATION_S} s (the shortest: {shortest} s)"


def _stored(r: RunView, code: WarningCode) -> bool:
    return any(w.code is code for w in r.stored_warnings)


def _scale_below_clients(r: RunView) -> bool:
    """Stored by the runner, or (older results) a builtin updating workload's own figures."""
    builtin = findings.scale_below_clients(
        r.workload in BRANCH_UPDATING_BUILTINS, r.scale, r.clients
    )
    return builtin is not None or _stored(r, WarningCode.SCALE_BELOW_CLIENTS)


def _scale_text(runs: Sequence[RunView]) -> str:
    return "run(s) of an updating workload with scale < clients"


def _load_generator_busy(r: RunView) -> bool:
    saturated = (WarningCode.PGBENCH_SATURATED, WarningCode.GENERATOR_SATURATED)
    if any(_stored(r, code) for code in saturated) or r.diagnosis == Bottleneck.CLIENT_BOUND:
        return True
    if r.status == RunStatus.FAILED:
        return False
    return findings.pgbench_saturated(r.client_cpu_s, r.duration_s, r.threads) is not None


def _variation(
    runs: Sequence[RunView], cells: Sequence[CellView], axes: Sequence[Axis]
) -> list[Advice]:
    """One piece of advice for all cells whose repeats vary too much, the worst named first."""
    by_id = {r.id: r for r in runs}
    noisy: list[tuple[float, CellView]] = []
    for cell in cells:
        values = [by_id[i].tps for i in cell.run_ids if by_id[i].ok]
        warning = (
            high_variation_warning([v for v in values if v is not None])
            if len(values) > 1
            else None
        )
        if warning is not None:
            noisy.append((warning.cv, cell))
    if not noisy:
        return []
    noisy.sort(key=lambda item: -item[0])
    worst = "; ".join(
        f"{cell_title(c, axes)}: CV {cv:.0%}{_cause_text([by_id[i] for i in c.run_ids])}"
        for cv, c in noisy[:MAX_NAMED]
    )
    more = f"; and {len(noisy) - MAX_NAMED} more" if len(noisy) > MAX_NAMED else ""
    message = (
        f"{len(noisy)} cell(s) vary by more than {DEFAULT_CV_LIMIT:.0%} (CV of TPS) between "
        f"repeats: {worst}{more}"
    )
    run_ids = tuple(i for _, c in noisy for i in c.run_ids)
    cell_id = noisy[0][1].cell_id if len(noisy) == 1 else None
    return [
        Advice("high-variation", "warning", message, REMEDIES["high-variation"], run_ids, cell_id)
    ]


def _cause_text(runs: Sequence[RunView]) -> str:
    cause = likely_cause(runs)
    return f" (likely cause: {cause})" if cause else ""


def likely_cause(runs: Sequence[RunView]) -> str | None:
    """Why the repeats of a cell disagree, where telemetry can tell: the run farthest from the
    median TPS, and what was different while it ran (other processes' CPU, another limit)."""
    ok = [r for r in runs if r.ok and r.tps]
    if len(ok) < 2:
        return None
    middle = statistics.median(r.tps or 0.0 for r in ok)
    odd = max(ok, key=lambda r: abs(math.log((r.tps or middle) / middle)))
    rest = [r for r in ok if r is not odd]
    which = f"run {odd.id} ({(odd.tps or middle) / middle - 1:+.0%} TPS against the median)"
    loads = [r.other_load_share for r in rest if r.other_load_share is not None]
    load = odd.other_load_share
    if (
        load is not None
        and loads
        and (odd.tps or 0.0) < middle
        and load - statistics.median(loads) >= OTHER_LOAD_GAP
    ):
        return (
            f"{which} shared the host: other processes used {load:.0%} of the CPUs, "
            f"{statistics.median(loads):.0%} during the other repeats"
        )
    usual = Counter(r.diagnosis for r in rest if r.diagnosis).most_common(1)
    if odd.diagnosis and usual and odd.diagnosis != usual[0][0]:
        return (
            f"{which} was limited by {odd.diagnosis.replace('_', ' ')}, the other repeats "
            f"by {usual[0][0].replace('_', ' ')}"
        )
    return None


def _other_stored(runs: Sequence[RunView]) -> list[Advice]:
    """Warnings the runner stored that no check above already covers, grouped by text."""
    covered = (WarningCode.SCALE_BELOW_CLIENTS, WarningCode.PGBENCH_SATURATED)
    by_text: dict[str, list[RunView]] = {}
    for r in runs:
        for w in r.stored_warnings:
            if w.code not in covered:
                by_text.setdefault(w.text, []).append(r)
    return [
        _advice("run-warning", "warning", f"{len(group)} run(s): {text}", group)
        for text, group in by_text.items()
    ]
