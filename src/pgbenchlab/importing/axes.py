"""A run's cell from what pgbench printed and from the names of its files.

pgbench's report gives clients, threads, scale, query mode, duration (or transactions per
client), the script(s), the latency limit (-L) and, from 14 on, whether -C was used. The user's
pattern (`--map`, a regular expression with named groups, searched in each output's path under
the imported directory) adds what the report does not print: the server, the rate of -R, the
connection kind, and any other name as a setting of the server's variant (`shared_buffers`,
`kernel`...). A group naming something the report printed must agree with it: a disagreement
is the user's mistake, named with the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from pgbenchlab import files
from pgbenchlab.errors import UserError
from pgbenchlab.pgbench.report import PgbenchReport
from pgbenchlab.records.cell import DEFAULT_CONNECTION, RunCell

DEFAULT_SERVER = "imported"
BUILTIN_NAMES = {  # what `transaction type:` prints for each builtin, as plans name them
    "<builtin: TPC-B (sort of)>": "tpcb-like",
    "<builtin: simple update>": "simple-update",
    "<builtin: select only>": "select-only",
}
ALIASES = {"read-write": "tpcb-like", "read-only": "select-only"}
CONNECTIONS = ("socket", "tcp", "tls")
YES = ("1", "c", "-c", "y", "yes", "on", "true", "connect")


class Unusable(Exception):
    """The output cannot become a run without guessing: why (it is listed, not imported)."""


@dataclass(frozen=True)
class AxisMap:
    """The user's pattern; None matches nothing and names nothing."""

    text: str | None
    pattern: re.Pattern[str] | None

    @classmethod
    def parse(cls, text: str | None) -> AxisMap:
        if text is None:
            return cls(None, None)
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise UserError(f"--map {text!r} is not a regular expression: {exc}") from None
        if not pattern.groupindex:
            raise UserError(
                f"--map {text!r} names no group: name each axis, e.g. 'c(?P<clients>\\d+)'"
            )
        return cls(text, pattern)

    def groups(self, rel: str) -> dict[str, str]:
        """The named groups the pattern finds in a path: of its first match that sets any (a
        pattern of optional groups also matches nothing at the path's start)."""
        if self.pattern is None:
            return {}
        found = [
            {k: v for k, v in m.groupdict().items() if v is not None}
            for m in self.pattern.finditer(rel)
        ]
        if not found:
            raise UserError(f"{rel} does not match --map {self.text!r}: adjust the pattern")
        return next((groups for groups in found if groups), {})


def workload_name(report: PgbenchReport) -> str:
    """The workload as a plan names it: a builtin's name, a script file's stem, several
    scripts as name@weight joined by "+" (the plan's default name)."""
    scripts = [s for s in report.scripts if s.name is not None]
    if report.transaction_type == "multiple scripts" and scripts:
        return "+".join(f"{_script_name(s.name or '')}@{s.weight}" for s in scripts)
    return _script_name(report.transaction_type)


def _script_name(printed: str) -> str:
    return BUILTIN_NAMES.get(printed) or PurePosixPath(printed).stem


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"--map gave {text!r} where a whole number belongs") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--map gave {text!r} where a number belongs") from None


# Axes the report prints: the group's value read as the report's, and the report's value.
_REPORTED: dict[str, tuple[Callable[[str], Any], Callable[[PgbenchReport], Any]]] = {
    "clients": (_int, lambda r: r.clients),
    "threads": (_int, lambda r: r.threads),
    "scale": (_int, lambda r: r.scale),
    "duration": (_int, lambda r: r.duration_s),
    "transactions": (_int, lambda r: r.transactions_per_client),
    "protocol": (str.lower, lambda r: r.query_mode),
    "mode": (str.lower, lambda r: r.query_mode),
    "workload": (lambda t: ALIASES.get(t, t), workload_name),
    "script": (lambda t: ALIASES.get(t, t), workload_name),
    "latency_limit": (_float, lambda r: r.latency_limit_ms),
}


def cell_of(report: PgbenchReport, groups: Mapping[str, str], rel: str) -> RunCell:
    """The run's cell; UserError when a group contradicts the report, Unusable when the cell
    would need a guess (a rate-limited run whose rate no name gives)."""
    cut = report.tps is None  # pgbench stopped its report early: later lines are not absent
    for name, (read, printed) in _REPORTED.items():
        if name in groups and printed(report) is None and cut:
            continue
        if name in groups and read(groups[name]) != printed(report):
            raise UserError(
                f"{rel}: --map gives {name}={groups[name]} but pgbench's report says "
                f"{_printed(printed(report))}: fix the pattern or the file"
            )
    rate = _rate(report, groups, rel)
    connect = _connect(report, groups, rel)
    connection = groups.get("connection", DEFAULT_CONNECTION)
    if connection not in CONNECTIONS:
        raise UserError(f"{rel}: --map gives connection={connection}; give one of {CONNECTIONS}")
    settings = {k: v for k, v in groups.items() if k not in _OWN}
    server = groups.get("server", DEFAULT_SERVER)
    if not files.is_plain_name(server):
        raise UserError(f"{rel}: --map gives server={server!r}: a server is named by a plain name")
    return RunCell(
        server=server,
        server_settings=tuple(sorted(settings.items())),
        scale=report.scale,
        workload=workload_name(report),
        clients=report.clients,
        duration_s=report.duration_s,
        transactions=report.transactions_per_client,
        warmup_s=0,
        protocol=report.query_mode,
        threads=report.threads,
        rate=rate,
        latency_limit_ms=_latency_limit(report, groups),
        connect=connect,
        vacuum="unknown",
        checkpoint=False,
        latency_log="imported",
        max_tries=_max_tries(report),
        connection=connection,
    )


# "repeat" names a repeat of a cell: its runs are numbered in path order, so it only matches
_OWN = {*_REPORTED, "server", "rate", "connect", "connection", "repeat"}


def _printed(value: Any) -> str:
    return "nothing (the option was not used)" if value is None else str(value)


def _rate(report: PgbenchReport, groups: Mapping[str, str], rel: str) -> float | None:
    limited = report.lag_avg_ms is not None  # pgbench prints the schedule lag only under -R
    if "rate" in groups:
        if not limited and report.tps is not None:
            raise UserError(
                f"{rel}: --map gives rate={groups['rate']} but pgbench's report shows no rate "
                "limit (-R): fix the pattern or the file"
            )
        return _float(groups["rate"])
    if limited:
        raise Unusable(
            "a rate-limited run (-R) whose rate its report does not print: give it in the "
            "file or directory name with --map '(?P<rate>[0-9.]+)'"
        )
    return None


def _latency_limit(report: PgbenchReport, groups: Mapping[str, str]) -> float | None:
    """-L as printed; a report pgbench stopped early does not reach its line: the name's."""
    if report.latency_limit_ms is None and "latency_limit" in groups:
        return _float(groups["latency_limit"])
    return report.latency_limit_ms


def _connect(report: PgbenchReport, groups: Mapping[str, str], rel: str) -> bool:
    """-C: printed from 14 on; before, only a name can say it (default: persistent)."""
    printed = report.reconnect_each_transaction
    if "connect" not in groups:
        return bool(printed)
    given = groups["connect"].lower() in YES
    if printed is not None and given != printed:
        raise UserError(
            f"{rel}: --map gives connect={groups['connect']} but pgbench's report says "
            f"{'-C' if printed else 'persistent connections'}: fix the pattern or the file"
        )
    return given


def _max_tries(report: PgbenchReport) -> int:
    """15+ prints it (absent: --max-tries=0, unlimited); before 15 a transaction had one try."""
    if report.failed is None:
        return 1
    return 0 if report.max_tries is None else report.max_tries


def cell_id(cell: RunCell) -> str:
    """The imported cell's identity: a digest of its options, as a plan's cell id is."""
    identity = json.dumps([cell.stored(), "imported"], sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()[:16]
