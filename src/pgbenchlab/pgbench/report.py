"""Parse the final report pgbench prints on stdout, every format from PostgreSQL 9.6 to 18.

Lines are matched by key, never by position: pgbench adds, drops and moves lines between versions
and with options. A line no pattern knows is kept in ``unknown_lines``, not an error. A field is
``None`` when the version or the options did not print its line (never 0 for "absent").

Counters keep pgbench's meaning, which drifts between versions: "actually processed"
(``transactions``) includes skipped transactions in 9.6/10, excludes them in 11-14, and counts
successful transactions only in 15+. Percentages are kept as printed (``nan``/``NaN`` → NaN).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any

from pgbenchlab.errors import PgbenchParseError, StoreError

# int() refuses digit strings longer than 4300 characters, so integer groups are bounded.
_INT = r"[0-9]{1,20}"
# %f / %.3f output, plus the NaN spellings of glibc (nan, -nan) and of PostgreSQL 12+ (NaN).
_NUM = r"-?(?:[0-9]+(?:\.[0-9]+)?|nan|NaN|inf|Infinity)"


@dataclass(frozen=True, kw_only=True)
class StatementStats:
    """One row of the per-statement table (``-r``)."""

    latency_ms: float
    failures: int | None = None  # 15+ only
    retries: int | None = None  # 15+ with --max-tries != 1
    command: str  # first line of the command text only, so rows can repeat


@dataclass(frozen=True, kw_only=True)
class ScriptStats:
    """A per-script block: ``SQL script N: name`` (several scripts) or, in 9.6/10, the unnamed
    ``script statistics:`` block (``number`` and ``name`` are then None)."""

    number: int | None = None  # 1-based, as printed
    name: str | None = None
    weight: int | None = None
    weight_target_pct: float | None = None
    # " - N transactions (P% of total[, tps = T])": successful only in 15-17, successful +
    # skipped + failed in 18, including skipped in 9.6-14.
    transactions: int | None = None
    transactions_pct: float | None = None
    processed: int | None = None  # 18: " - number of transactions actually processed: N"
    tps: float | None = None
    failed: int | None = None
    failed_pct: float | None = None
    serialization_failures: int | None = None
    serialization_failures_pct: float | None = None
    deadlock_failures: int | None = None
    deadlock_failures_pct: float | None = None
    retried: int | None = None
    retried_pct: float | None = None
    retries: int | None = None
    skipped: int | None = None
    skipped_pct: float | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    statements: tuple[StatementStats, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PgbenchReport:
    """Everything in one pgbench report; see the module docstring for the conventions."""

    client_version: str | None = None  # 14+ header "pgbench (15.18 (Debian ...))"
    server_version: str | None = None  # 14+, printed only when it differs from the client's
    transaction_type: str
    scale: int
    partition_method: str | None = None  # 13+, partitioned pgbench_accounts only
    partitions: int | None = None
    query_mode: str
    clients: int
    threads: int
    max_tries: int | None = None  # 15+, absent with --max-tries=0 (unlimited)
    duration_s: int | None = None  # -T mode
    transactions_per_client: int | None = None  # -t mode
    transactions: int  # "number of transactions actually processed"
    transactions_planned: int | None = None  # -t mode: the "/N" (clients x -t)
    zipfian_cache_overflows: int | None = None  # 11 only
    failed: int | None = None  # 15+
    failed_pct: float | None = None
    serialization_failures: int | None = None  # 15+ --failures-detailed
    serialization_failures_pct: float | None = None
    deadlock_failures: int | None = None
    deadlock_failures_pct: float | None = None
    retried: int | None = None  # 15+ --max-tries != 1
    retried_pct: float | None = None
    retries: int | None = None
    skipped: int | None = None  # -R with -L
    skipped_pct: float | None = None
    latency_limit_ms: float | None = None  # -L
    late: int | None = None
    late_of: int | None = None  # 11+: the denominator printed after "/"
    late_pct: float | None = None
    latency_avg_ms: float | None = None
    # pgbench measures latency only with -P, -R or -L (then it prints a stddev); otherwise the
    # average is derived as duration x clients / transactions.
    latency_avg_measured: bool = False
    latency_stddev_ms: float | None = None
    includes_failures: bool = False  # 15+: "latency average = X ms (including failures)"
    lag_avg_ms: float | None = None  # -R
    lag_max_ms: float | None = None
    initial_connection_time_ms: float | None = None  # 14+ without -C
    average_connection_time_ms: float | None = None  # 14+ with -C
    # Connection time excluded: 14+ the single tps line, <=13 "excluding connections
    # establishing". With -C (14+) the single line includes reconnection times. None only for
    # a report that stops early because no transaction succeeded.
    tps: float | None = None
    tps_including_connections: float | None = None  # <=13
    reconnect_each_transaction: bool | None = None  # 14+: the -C form of the tps line; <=13 None
    scripts: tuple[ScriptStats, ...] = ()
    statements: tuple[StatementStats, ...] = ()  # table outside any per-script block
    unknown_lines: tuple[str, ...] = ()

    def stored(self) -> dict[str, Any]:
        """The report as the store keeps it (``report_json``)."""
        return asdict(self)

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> PgbenchReport | None:
        """The report `stored` wrote; None for a run that had none (stored as ``{}``)."""
        if not stored:
            return None
        values = _known(cls, stored)
        values["scripts"] = tuple(
            ScriptStats(**_known(ScriptStats, s) | {"statements": _statements(s)})
            for s in stored.get("scripts", ())
        )
        values["statements"] = _statements(stored)
        values["unknown_lines"] = tuple(stored.get("unknown_lines", ()))
        missing = [f.name for f in fields(cls) if f.name not in values and _required(f)]
        if missing:
            raise StoreError(
                f"a stored pgbench report lacks {', '.join(missing)}: the results database was "
                "damaged or not written by pgbenchlab"
            )
        return cls(**values)


def _required(field: Field[Any]) -> bool:
    return field.default is MISSING and field.default_factory is MISSING


def _known(record: type, stored: Mapping[str, Any]) -> dict[str, Any]:
    """The stored values of a record's plain fields (a field a later version dropped is left)."""
    nested = {"scripts", "statements", "unknown_lines"}
    names = {f.name for f in fields(record)} - nested
    return {k: v for k, v in stored.items() if k in names}


def _statements(stored: Mapping[str, Any]) -> tuple[StatementStats, ...]:
    return tuple(StatementStats(**_known(StatementStats, s)) for s in stored.get("statements", ()))


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)  # float() accepts nan, -nan, NaN, Infinity


def _text(text: str | None) -> str | None:
    return text


def _flag(text: str | None) -> bool:
    return text is not None


_BY_TYPE: dict[str, Callable[[str | None], Any]] = {
    "int": _int,
    "int | None": _int,
    "float | None": _float,
    "str": _text,
    "str | None": _text,
    "bool": _flag,
}


def _converters(cls: type) -> dict[str, Callable[[str | None], Any]]:
    """Regex group names are field names; the field's annotation picks the conversion."""
    return {f.name: _BY_TYPE[str(f.type)] for f in fields(cls) if str(f.type) in _BY_TYPE}


_Rule = tuple[re.Pattern[str], dict[str, Any]]


def _rule(pattern: str, **fixed: Any) -> _Rule:
    return re.compile(pattern, re.ASCII), fixed


def _pct(name: str) -> str:
    # "(1.234%)" in 15+, "(1.234 %)" in <=14's global section.
    return rf"\((?P<{name}_pct>{_NUM}) ?%\)"


def _counter_rules(prefix: str) -> list[_Rule]:
    """Failure, retry and skip counters: same text globally and (with " - ") per script."""
    return [
        _rule(rf"{prefix}number of failed transactions: (?P<failed>{_INT}) {_pct('failed')}"),
        _rule(
            rf"{prefix}number of serialization failures: (?P<serialization_failures>{_INT}) "
            + _pct("serialization_failures")
        ),
        _rule(
            rf"{prefix}number of deadlock failures: (?P<deadlock_failures>{_INT}) "
            + _pct("deadlock_failures")
        ),
        _rule(rf"{prefix}number of transactions retried: (?P<retried>{_INT}) {_pct('retried')}"),
        _rule(rf"{prefix}total number of retries: (?P<retries>{_INT})"),
        _rule(rf"{prefix}number of transactions skipped: (?P<skipped>{_INT}) {_pct('skipped')}"),
    ]


_GLOBAL_RULES: list[_Rule] = [
    _rule(
        r"pgbench \((?P<client_version>[^,()]+(?:\([^)]*\))?)"
        r"(?:, server (?P<server_version>.+))?\)"
    ),
    _rule(r"transaction type: (?P<transaction_type>.+)"),
    _rule(rf"scaling factor: (?P<scale>{_INT})"),
    _rule(r"partition method: (?P<partition_method>\S+)"),
    _rule(rf"partitions: (?P<partitions>{_INT})"),
    _rule(r"query mode: (?P<query_mode>\S+)"),
    _rule(rf"number of clients: (?P<clients>{_INT})"),
    _rule(rf"number of threads: (?P<threads>{_INT})"),
    _rule(rf"maximum number of tries: (?P<max_tries>{_INT})"),
    _rule(rf"number of transactions per client: (?P<transactions_per_client>{_INT})"),
    _rule(rf"duration: (?P<duration_s>{_INT}) s"),
    _rule(
        rf"number of transactions actually processed: (?P<transactions>{_INT})"
        rf"(?:/(?P<transactions_planned>{_INT}))?"
    ),
    _rule(rf"zipfian cache array overflowed (?P<zipfian_cache_overflows>{_INT}) time\(s\)"),
    *_counter_rules(""),
    _rule(
        rf"number of transactions above the (?P<latency_limit_ms>{_NUM}) ms latency limit: "
        rf"(?P<late>{_INT})(?:/(?P<late_of>{_INT}))? {_pct('late')}"
    ),
    _rule(
        rf"latency average = (?P<latency_avg_ms>{_NUM}) ms"
        r"(?P<includes_failures> \(including failures\))?"
    ),
    _rule(rf"latency stddev = (?P<latency_stddev_ms>{_NUM}) ms"),
    _rule(
        rf"rate limit schedule lag: avg (?P<lag_avg_ms>{_NUM}) \(max (?P<lag_max_ms>{_NUM})\) ms"
    ),
    _rule(rf"initial connection time = (?P<initial_connection_time_ms>{_NUM}) ms"),
    _rule(rf"average connection time = (?P<average_connection_time_ms>{_NUM}) ms"),
    _rule(rf"tps = (?P<tps_including_connections>{_NUM}) \(including connections establishing\)"),
    _rule(rf"tps = (?P<tps>{_NUM}) \(excluding connections establishing\)"),
    _rule(
        rf"tps = (?P<tps>{_NUM}) \(without initial connection time\)",
        reconnect_each_transaction=False,
    ),
    _rule(
        rf"tps = (?P<tps>{_NUM}) \(including reconnection times\)",
        reconnect_each_transaction=True,
    ),
]

_SCRIPT_RULES: list[_Rule] = [
    _rule(rf" - weight: (?P<weight>{_INT}) \(targets (?P<weight_target_pct>{_NUM})% of total\)"),
    _rule(
        rf" - (?P<transactions>{_INT}) transactions \((?P<transactions_pct>{_NUM})% of total"
        rf"(?:, tps = (?P<tps>{_NUM}))?\)"
    ),
    _rule(
        rf" - number of transactions actually processed: (?P<processed>{_INT}) "
        rf"\(tps = (?P<tps>{_NUM})\)"
    ),
    *_counter_rules(" - "),
    _rule(rf" - latency average = (?P<latency_avg_ms>{_NUM}) ms"),
    _rule(rf" - latency stddev = (?P<latency_stddev_ms>{_NUM}) ms"),
]

_SCRIPT_START = re.compile(rf"SQL script (?P<number>{_INT}): (?P<name>.*)", re.ASCII)
_UNNAMED_SCRIPT_START = "script statistics:"  # 9.6/10, a single script
_TABLE_START = re.compile(
    r"(?P<in_block> - )?statement latencies in milliseconds"
    r"(?P<columns>| and failures|, failures and retries):",
    re.ASCII,
)
# Rows: latency, then as many integer columns as the header announced, then the command.
_ROWS: dict[str, re.Pattern[str]] = {
    "": re.compile(rf"\s+(?P<latency_ms>{_NUM})(?:\s+(?P<command>.*))?", re.ASCII),
    " and failures": re.compile(
        rf"\s+(?P<latency_ms>{_NUM})\s+(?P<failures>{_INT})(?:\s+(?P<command>.*))?", re.ASCII
    ),
    ", failures and retries": re.compile(
        rf"\s+(?P<latency_ms>{_NUM})\s+(?P<failures>{_INT})\s+(?P<retries>{_INT})"
        r"(?:\s+(?P<command>.*))?",
        re.ASCII,
    ),
}

_REPORT_CONVERT = _converters(PgbenchReport)
_SCRIPT_CONVERT = _converters(ScriptStats)


def _apply(
    rules: Iterable[_Rule],
    line: str,
    convert: dict[str, Callable[[str | None], Any]],
    into: dict[str, Any],
) -> bool:
    """Store the fields of the first rule matching the whole line; False if none matches."""
    for pattern, fixed in rules:
        match = pattern.fullmatch(line)
        if match:
            into.update({k: convert[k](v) for k, v in match.groupdict().items()})
            into.update(fixed)
            return True
    return False


def _statement_row(line: str, pattern: re.Pattern[str], into: list[StatementStats]) -> bool:
    match = pattern.fullmatch(line)
    if not match:
        return False
    groups = match.groupdict()
    into.append(
        StatementStats(
            latency_ms=float(groups["latency_ms"]),
            failures=_int(groups.get("failures")),
            retries=_int(groups.get("retries")),
            command=groups["command"] or "",
        )
    )
    return True


@dataclass
class _ScriptDraft:
    values: dict[str, Any]
    statements: list[StatementStats] = field(default_factory=list)

    def freeze(self) -> ScriptStats:
        return ScriptStats(**self.values, statements=tuple(self.statements))


@dataclass
class _ReportBuilder:
    """Reads lines in order, remembering which block and statement table they belong to."""

    values: dict[str, Any] = field(default_factory=dict)
    statements: list[StatementStats] = field(default_factory=list)
    scripts: list[_ScriptDraft] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    # The open statement table: its row pattern and where its rows go.
    table: tuple[re.Pattern[str], list[StatementStats]] | None = None

    def feed(self, line: str) -> None:
        if self.table is not None and _statement_row(line, *self.table):
            return
        self.table = None  # the rows of a table are contiguous
        if line.strip() and not self._structure(line) and not self._key(line):
            self.unknown.append(line)

    def _structure(self, line: str) -> bool:
        """Script block and statement table headers."""
        if line == _UNNAMED_SCRIPT_START:
            self.scripts.append(_ScriptDraft({}))
            return True
        if match := _SCRIPT_START.fullmatch(line):
            self.scripts.append(
                _ScriptDraft({"number": int(match["number"]), "name": match["name"]})
            )
            return True
        if match := _TABLE_START.fullmatch(line):
            in_block = match["in_block"] is not None and bool(self.scripts)
            rows = self.scripts[-1].statements if in_block else self.statements
            self.table = (_ROWS[match["columns"]], rows)
            return True
        return False

    def _key(self, line: str) -> bool:
        if line.startswith(" - "):
            block = self.scripts[-1].values if self.scripts else None
            return block is not None and _apply(_SCRIPT_RULES, line, _SCRIPT_CONVERT, block)
        return _apply(_GLOBAL_RULES, line, _REPORT_CONVERT, self.values)

    def freeze(self) -> PgbenchReport:
        values = self.values
        _check_complete(values)
        measured = values.get("latency_avg_ms") is not None and "latency_stddev_ms" in values
        return PgbenchReport(
            **values,
            latency_avg_measured=measured,
            scripts=tuple(s.freeze() for s in self.scripts),
            statements=tuple(self.statements),
            unknown_lines=tuple(self.unknown),
        )


# Lines every version prints before the counters; without them there is no report to trust.
_REQUIRED = {
    "transaction_type": "transaction type",
    "scale": "scaling factor",
    "query_mode": "query mode",
    "clients": "number of clients",
    "threads": "number of threads",
    "transactions": "number of transactions actually processed",
}


def _check_complete(values: dict[str, Any]) -> None:
    """Refuse empty or cut reports; accept pgbench's own early stop after zero transactions."""
    if "transaction_type" not in values:
        raise PgbenchParseError(
            "pgbench report has no 'transaction type' line: the benchmark did not run or the "
            "output was cut (setup error, killed pgbench, --exit-on-abort)"
        )
    missing = [line for key, line in _REQUIRED.items() if key not in values]
    if missing:
        raise PgbenchParseError(
            f"pgbench report lacks the line(s) {', '.join(map(repr, missing))}: "
            "the output was cut (pgbench killed?) or is not a pgbench report"
        )
    if "tps" not in values and values["transactions"] != 0:
        raise PgbenchParseError(
            f"pgbench report has no tps line after {values['transactions']} processed "
            "transactions: the output was cut (pgbench killed?)"
        )


def parse_report(stdout: str) -> PgbenchReport:
    """Parse pgbench's stdout (any version 9.6-18) into a :class:`PgbenchReport`.

    A report that stops right after the counters because no transaction succeeded (an aborted
    run) is accepted, with ``tps`` None. Raises PgbenchParseError when there is no report or it
    was cut before its tps line; never any other exception.
    """
    builder = _ReportBuilder()
    for line in stdout.split("\n"):
        builder.feed(line.removesuffix("\r"))
    return builder.freeze()
