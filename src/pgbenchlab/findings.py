"""Warnings as data: what a run's checks found, with the numbers that show it.

Each `WarningCode` has one rule here that decides it (with its one threshold) and one wording
that renders it as the sentence users read, plus, where there is one, the remedy the report
gives for a group of runs. The runner stores warnings as codes with their evidence; readers
select them by code, never by their text. Imports nothing from the project: the plan check,
the runner, the analysis and the report all use it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Evidence = Mapping[str, int | float | str]

# The builtins that update pgbench_branches, whose `scale` rows every client shares: tpcb-like
# only (simple-update updates pgbench_accounts and inserts into pgbench_history).
BRANCH_UPDATING_BUILTINS = frozenset({"tpcb-like"})
_BRANCH_UPDATE = re.compile(r"\bupdate\s+pgbench_branches\b", re.I)
# pgbench using this share of its threads' time (CPU, or CPU and waiting for one) is
# measuring itself, not the server.
PGBENCH_SATURATED = 0.9
# A run's server CPU accounted is at least what its processes were seen to use by their own
# figures, and at most what the host's CPUs did meanwhile (less pgbench's there), each within
# this share and these seconds (/proc counts in 10 ms ticks, rounded down per process read).
CPU_CHECK_SHARE = 0.05
CPU_CHECK_SLACK_S = 0.1
# -T is checked between transactions only: a run this much longer than asked stalled.
STALL_FACTOR = 1.5
STALL_SLACK_S = 5


class WarningCode(StrEnum):
    SCALE_BELOW_CLIENTS = "scale_below_clients"
    THREADS_REDUCED = "threads_reduced"
    RUN_STALLED = "run_stalled"
    PGBENCH_SATURATED = "pgbench_saturated"
    LOG_UNREADABLE = "log_unreadable"
    CHECKPOINT_REFUSED = "checkpoint_refused"
    COMMITS_DISAGREE = "commits_disagree"
    PINNING_NOT_APPLIED = "pinning_not_applied"
    GENERATOR_SATURATED = "generator_saturated"
    GENERATORS_WINDOW = "generators_window"
    SERVER_LOG_UNREAD = "server_log_unread"
    CPU_UNACCOUNTED = "cpu_unaccounted"
    LEGACY = "legacy"  # a sentence stored by an older pgbenchlab, kept as it was written


@dataclass(frozen=True)
class RunWarning:
    code: WarningCode
    evidence: Evidence = field(default_factory=dict)

    @property
    def text(self) -> str:
        return _SENTENCES[self.code](self.evidence)

    @property
    def remedy(self) -> str | None:
        return REMEDIES.get(self.code)

    def stored(self) -> dict[str, Any]:
        """The JSON object stored for this warning (the text for readers without this code)."""
        return {"code": self.code.value, "evidence": dict(self.evidence), "text": self.text}


# -- the rules: one per code, each with its one threshold ---------------------------------------


def updates_branch_rows(script_text: str) -> bool:
    """Whether a custom script updates pgbench_branches (its rows: one per scale unit)."""
    return _BRANCH_UPDATE.search(script_text) is not None


def scale_below_clients(updates: bool, scale: int, clients: int) -> RunWarning | None:
    """Fewer branch rows than clients on a workload that updates them (``updates``): updates
    queue on row locks."""
    if not updates or scale >= clients:
        return None
    return RunWarning(WarningCode.SCALE_BELOW_CLIENTS, {"scale": scale, "clients": clients})


def threads_reduced(used: int, asked: int) -> RunWarning | None:
    if used >= asked:
        return None
    return RunWarning(WarningCode.THREADS_REDUCED, {"used": used, "asked": asked})


def run_stalled(wall_s: float, duration_s: int | None) -> RunWarning | None:
    if not duration_s or wall_s <= duration_s * STALL_FACTOR + STALL_SLACK_S:
        return None
    return RunWarning(WarningCode.RUN_STALLED, {"wall_s": wall_s, "duration_s": duration_s})


def saturated(share: float) -> bool:
    """Whether pgbench's threads were busy for so much of the run that TPS measures pgbench."""
    return share >= PGBENCH_SATURATED


def pgbench_saturated(
    cpu_s: float | None, duration_s: float | None, threads: int
) -> RunWarning | None:
    if not cpu_s or not duration_s:
        return None
    busy = cpu_s / (duration_s * max(1, threads))
    if not saturated(busy):
        return None
    return RunWarning(WarningCode.PGBENCH_SATURATED, {"busy": busy, "threads": threads})


def pinning_not_applied(
    role: str, requested: str | None, observed: tuple[str, ...]
) -> RunWarning | None:
    """The kernel let a pinned role's processes run elsewhere than the plan asked."""
    if requested is None or observed == (requested,):
        return None
    return RunWarning(
        WarningCode.PINNING_NOT_APPLIED,
        {"role": role, "requested": requested, "observed": " | ".join(observed)},
    )


def generator_saturated(host: str, busy: float | None, cpus: int) -> RunWarning | None:
    """One load generator of several used nearly all the CPU its threads could."""
    if busy is None or not saturated(busy):
        return None
    return RunWarning(WarningCode.GENERATOR_SATURATED, {"host": host, "busy": busy, "cpus": cpus})


def generators_window(
    generators: int, window: tuple[float, float], spread_ms: float, cut: int
) -> RunWarning:
    """What a run split across load generators kept: the window (epoch seconds, [start, end))
    where all were measuring, how far apart they started, the log lines cut."""
    start, end = window
    evidence = {"generators": generators, "start": start, "end": end, "kept_s": end - start}
    return RunWarning(
        WarningCode.GENERATORS_WINDOW, evidence | {"spread_ms": spread_ms, "cut_lines": cut}
    )


def cpu_unaccounted(
    method: str,
    accounted_s: float,
    seen_s: float | None,
    host_busy_s: float | None,
    others_s: float | None,
) -> RunWarning | None:
    """The server's CPU accounted over a run (by `method`) that does not cover what its
    processes were seen to use, or that is more than the host's CPUs did besides pgbench."""
    evidence: dict[str, int | float | str] = {"method": method, "accounted_s": accounted_s}
    if seen_s is not None and accounted_s < seen_s * (1 - CPU_CHECK_SHARE) - CPU_CHECK_SLACK_S:
        evidence |= {"bound": "seen", "seen_s": seen_s}
    elif host_busy_s is not None and (
        accounted_s + (others_s or 0.0) > host_busy_s * (1 + CPU_CHECK_SHARE) + CPU_CHECK_SLACK_S
    ):
        evidence |= {"bound": "host", "host_busy_s": host_busy_s, "others_s": others_s or 0.0}
    else:
        return None
    return RunWarning(WarningCode.CPU_UNACCOUNTED, evidence)


def log_unreadable(error: str) -> RunWarning:
    return RunWarning(WarningCode.LOG_UNREADABLE, {"error": error})


def server_log_unread(reason: str) -> RunWarning:
    """An external server's log, on the host the plan names, could not be read."""
    return RunWarning(WarningCode.SERVER_LOG_UNREAD, {"reason": reason})


def checkpoint_refused() -> RunWarning:
    return RunWarning(WarningCode.CHECKPOINT_REFUSED)


def commits_disagree(
    pgbench_transactions: int, server_commits: int, unexplained: int, sampler_statements: int
) -> RunWarning:
    return RunWarning(
        WarningCode.COMMITS_DISAGREE,
        {
            "pgbench_transactions": pgbench_transactions,
            "server_commits": server_commits,
            "unexplained": unexplained,
            "sampler_statements": sampler_statements,
        },
    )


# -- the one place a warning becomes words ------------------------------------------------------


def _cpu_text(e: Evidence) -> str:
    server = f"server {e['server']}: " if e.get("server") else ""  # a group's member
    accounted = f"{server}the server's CPU accounted over the run ({e['method']}: "
    accounted += f"{float(e['accounted_s']):.2f} s)"
    if e.get("bound") == "seen":
        return (
            f"{accounted} is less than its processes were seen to use "
            f"({float(e['seen_s']):.2f} s): some escaped the accounting; its CPU per "
            "transaction is too low"
        )
    pgbench = f", of which pgbench {float(e['others_s']):.2f} s" if e.get("others_s") else ""
    return (
        f"{accounted} is more than the host's CPUs did besides pgbench (busy "
        f"{float(e['host_busy_s']):.2f} s{pgbench}): it counted what was not the server's; its "
        "CPU per transaction is too high"
    )


def _commits_text(e: Evidence) -> str:
    server = f"server {e['server']}: " if e.get("server") else ""  # a group's member
    return (
        f"{server}pgbench counted {e['pgbench_transactions']:,} transactions but the server "
        f"committed {e['server_commits']:,} in the database during the run "
        f"({e['unexplained']:+,} beyond the sampler's own {e['sampler_statements']:,}): "
        "another client, a pooler or another server was involved; the numbers may not be "
        "this server's"
    )


_SENTENCES: dict[WarningCode, Callable[[Evidence], str]] = {
    WarningCode.SCALE_BELOW_CLIENTS: lambda e: (
        f"scale {e['scale']} < {e['clients']} clients on an updating workload: "
        "branch-row contention limits TPS; use scale ≥ clients"
    ),
    WarningCode.THREADS_REDUCED: lambda e: f"pgbench used {e['used']} threads, not {e['asked']}",
    WarningCode.RUN_STALLED: lambda e: (
        f"the run took {e['wall_s']:.0f} s for -T {e['duration_s']}: "
        "transactions stalled (-T is only checked between transactions)"
    ),
    WarningCode.PGBENCH_SATURATED: lambda e: (
        f"pgbench used {e['busy']:.0%} of its {e['threads']} threads' CPU: "
        "the load generator may be the bottleneck; give it more threads or cores"
    ),
    WarningCode.LOG_UNREADABLE: lambda e: (
        f"the per-transaction log could not be analysed: {e['error']}"
    ),
    WarningCode.CHECKPOINT_REFUSED: lambda e: (
        "CHECKPOINT refused (needs superuser or pg_checkpoint): runs start without one"
    ),
    WarningCode.COMMITS_DISAGREE: _commits_text,
    WarningCode.PINNING_NOT_APPLIED: lambda e: (
        f"{e['role']} was to be pinned to CPU {e['requested']}, but the kernel allowed its "
        f"processes CPU {e['observed']} (/proc/PID/status): the pinning did not hold"
    ),
    WarningCode.GENERATOR_SATURATED: lambda e: (
        f"load generator {e['host']} wanted {e['busy']:.0%} of the CPU its threads could use "
        f"({e['cpus']} CPU(s)): it may be the bottleneck; give it more threads or cores"
    ),
    WarningCode.GENERATORS_WINDOW: lambda e: (
        f"{e['generators']} load generators started {e['spread_ms']:.1f} ms apart: the run "
        f"keeps the {e['kept_s']:.3f} s all were measuring; {e['cut_lines']:,} log line(s) "
        "outside it were cut"
    ),
    WarningCode.SERVER_LOG_UNREAD: lambda e: (
        f"the server's log on its host was not read (no checkpoint, autovacuum or error "
        f"events): {e['reason']}"
    ),
    WarningCode.CPU_UNACCOUNTED: _cpu_text,
    WarningCode.LEGACY: lambda e: str(e.get("text", "")),
}

# What to do about a group of runs with the same finding (the report's advice).
REMEDIES: dict[WarningCode, str] = {
    WarningCode.SCALE_BELOW_CLIENTS: "with fewer branch rows than clients, updates queue on "
    "row locks and TPS measures that contention: initialise with scale ≥ clients",
    WarningCode.PGBENCH_SATURATED: "TPS measures pgbench, not the server: give pgbench more "
    "threads (-j) or cores, or run it on another machine",
}


# -- stored form ---------------------------------------------------------------------------------


def to_json(warnings: Iterable[RunWarning]) -> str:
    """The runs.warnings_json column: a list of {"code", "evidence", "text"} objects."""
    return json.dumps([w.stored() for w in warnings])


def from_json(text: str | None) -> tuple[RunWarning, ...]:
    """Warnings as stored by any version: objects with a code, or an older version's plain
    sentences (and codes this version does not know), which are kept as their text."""
    return from_stored(json.loads(text or "[]"))


def from_stored(items: Iterable[Any]) -> tuple[RunWarning, ...]:
    """Warnings from the decoded warnings_json column (see `from_json`)."""
    return tuple(_from_stored(item) for item in items)


def _from_stored(item: Any) -> RunWarning:
    if isinstance(item, dict):
        try:
            code = WarningCode(str(item.get("code")))
        except ValueError:
            code = WarningCode.LEGACY
        if code is not WarningCode.LEGACY:
            return RunWarning(code, dict(item.get("evidence") or {}))
        return legacy(str(item.get("text", "")))
    return legacy(str(item))


def legacy(text: str) -> RunWarning:
    return RunWarning(WarningCode.LEGACY, {"text": text})
