"""How the lines of a server's log read: its log_line_prefix compiled into a pattern (or the
columns of csvlog and jsonlog), and its timestamps, printed in its log_timezone, turned into
epoch seconds.

A prefix is read when it has a timestamp (%m, %t or %n) and the process id (%p) before any %q:
the server's own processes (checkpointer, autovacuum workers) print only the part before %q.
Every other escape PostgreSQL prints (user, database, application, client, backend type,
session, line number, transaction ids, SQLSTATE, query id, padded or not) is matched and
skipped; an escape PostgreSQL does not know prints nothing, here as there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC_ZONES = frozenset(
    {"UTC", "GMT", "UCT", "Universal", "Zulu"}
    | {f"Etc/{z}" for z in ("UTC", "GMT", "UCT", "Universal", "Zulu")}
)
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
# What each escape prints (after `%`, an optional padding such as -10); timestamps and the
# process id are captured the first time they appear, the rest is skipped. Text that may hold
# anything (names, the command tag, a backend type with spaces) is matched as little as needed.
ESCAPES = {
    "m": rf"(?P<stamp>{STAMP}\.\d{{3}}) (?P<abbrev>\S+)",
    "t": rf"(?P<stamp>{STAMP}) (?P<abbrev>\S+)",
    "n": r"(?P<epoch>\d+\.\d{3})",
    "p": r"(?P<pid>\d+)",
    "s": rf"{STAMP} \S+",
    "l": r"\d+",
    "c": r"[0-9a-f]+\.[0-9a-f]+",
    "e": r"[0-9A-Z]{5}",
    "x": r"\d+",
    "v": r"(?:\d+/\d+)?",
    "P": r"\d*",
    "Q": r"-?\d*",
    **{free: r".*?" for free in "audhrbiL"},
}
TIMESTAMPS = ("m", "t", "n")
ESCAPE = re.compile(r"%(-?\d*)(.?)", re.DOTALL)
# After the prefix: a severity PostgreSQL prints (in English; the ATTACHED ones print what
# belongs to the record before them of the same process), two spaces, and under
# log_error_verbosity = verbose the SQLSTATE.
SEVERITIES = ("DEBUG[1-5]", "INFO", "NOTICE", "WARNING", "ERROR", "LOG", "FATAL", "PANIC")
ATTACHED = ("DETAIL", "HINT", "QUERY", "CONTEXT", "LOCATION", "BACKTRACE", "STATEMENT")
SEVERITY = re.compile(f"(?P<severity>{'|'.join(SEVERITIES + ATTACHED)}):  (?:[0-9A-Z]{{5}}: )?")
# A prefix prints at most this many characters (names of 63 bytes, a host name, timestamps):
# a severity further on is in a message.
PREFIX_MAX = 2048
NUMERIC_ABBREV = re.compile(r"([+-])(\d\d)(\d\d)?")
# log_destination's kinds of files pgbenchlab reads, in the order it prefers them, and how their
# names end (PostgreSQL names a csvlog or jsonlog file after the stderr one).
DESTINATIONS = {"stderr": "", "csvlog": ".csv", "jsonlog": ".json"}


class UnreadablePrefix(ValueError):
    """A log_line_prefix whose lines cannot be placed in time or told apart by process."""


@dataclass(frozen=True)
class LineFormat:
    """A log's line pattern (groups: stamp and abbrev or epoch, pid; severity and message
    unless prefix_only) and the time zone its stamps are printed in."""

    pattern: re.Pattern[str]  # csvlog, jsonlog: of their timestamp column alone
    zone: str = "UTC"
    destination: str = "stderr"  # or csvlog, jsonlog
    prefix_only: bool = False  # the pattern is of what comes before a line's severity

    def parse(self, line: str) -> tuple[re.Match[str], str, str] | None:
        """A record's line: its prefix's match, severity and message; None for a line that
        continues the previous one.

        A compiled prefix is matched against what precedes each severity in turn, never the
        whole line: text of any length (a name, the application) between fixed parts can be
        told apart only by trying where it ends, which on a whole line that does not match
        takes time growing with the line's length to the power of their number.
        """
        if not self.prefix_only:
            found = self.pattern.match(line)
            return None if found is None else (found, found["severity"], found["message"])
        for severity in SEVERITY.finditer(line, 0, PREFIX_MAX):
            prefix = self.pattern.fullmatch(line, 0, severity.start())
            if prefix is not None:
                return prefix, severity["severity"], line[severity.end() :]
        return None

    def epoch(self, found: re.Match[str]) -> float:
        """The epoch seconds of a matched line's timestamp."""
        groups = found.groupdict()
        if groups.get("epoch") is not None:
            return float(groups["epoch"])
        stamp = groups["stamp"]
        fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S"
        as_utc = datetime.strptime(stamp, fmt).replace(tzinfo=UTC).timestamp()
        return as_utc - _utc_offset(self.zone, stamp[:16], groups["abbrev"])


# pgbenchlab's own (a managed server's) and Debian's default prefix, in UTC: the pattern the
# managed path has always read, kept as it is.
MANAGED = LineFormat(
    re.compile(
        r"^(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<abbrev>UTC|GMT) "
        r"\[(?P<pid>\d+)\] (?:[^ @]*@[^ ]* )?(?P<severity>[A-Z]+):  (?P<message>.*)$"
    )
)


def line_format(prefix: str, zone: str) -> LineFormat:
    """The format of a log written with this log_line_prefix and log_timezone; raises
    UnreadablePrefix (saying what to change) when its lines cannot be read."""
    pattern = compile_prefix(prefix)
    if "(?P<epoch>" not in pattern.pattern:
        _check_zone(zone)
    return LineFormat(pattern, zone, prefix_only=True)


def structured_format(destination: str, zone: str) -> LineFormat:
    """The format of a csvlog or jsonlog file: columns, their timestamp printed as %m's."""
    _check_zone(zone)
    return LineFormat(re.compile(f"^{ESCAPES['m']}$"), zone, destination)


def _check_zone(zone: str) -> None:
    if zone in UTC_ZONES:
        return
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnreadablePrefix(
            f"the server logs in time zone {zone!r}, which this machine's time zone database "
            "does not know: set log_timezone to a zone name (or UTC), or put %n in "
            "log_line_prefix, to have its events"
        ) from exc


def file_kind(name: str) -> str:
    """The log_destination a log file is written for, told by its name."""
    return next((d for d, end in DESTINATIONS.items() if end and name.endswith(end)), "stderr")


def compile_prefix(prefix: str) -> re.Pattern[str]:
    """The pattern of what this log_line_prefix prints (see the module docstring)."""
    parts: list[str] = []
    seen: set[str] = set()
    optional_from: int | None = None  # where %q cuts off the part only sessions print
    before_q: set[str] | None = None  # what the server's own processes print too
    position = 0
    for escape in ESCAPE.finditer(prefix):
        parts.append(re.escape(prefix[position : escape.start()]))
        position = escape.end()
        padding, letter = escape.groups()
        if letter == "%" and not padding:
            parts.append("%")
        elif letter == "q" and optional_from is None:
            optional_from, before_q = len(parts), set(seen)
        elif letter in ESCAPES:
            parts.append(_escape_pattern(letter, padding, seen))
    parts.append(re.escape(prefix[position:]))
    _check_readable(prefix, seen if before_q is None else before_q, before_q is not None)
    if optional_from is not None:
        parts[optional_from:] = ["(?:" + "".join(parts[optional_from:]) + ")?"]
    return re.compile("".join(parts))


def _escape_pattern(letter: str, padding: str, seen: set[str]) -> str:
    """What one escape prints, captured if it is the first timestamp or process id; padding
    (%-10p, %10p) adds spaces after or before it."""
    pattern = ESCAPES[letter]
    kind = "time" if letter in TIMESTAMPS else letter
    if letter in (*TIMESTAMPS, "p") and kind not in seen:
        seen.add(kind)
    elif "(?P<" in pattern:
        pattern = re.sub(r"\(\?P<\w+>", "(?:", pattern)
    if padding.startswith("-"):
        return pattern + " *"
    return " *" + pattern if padding else pattern


def _check_readable(prefix: str, seen: set[str], has_q: bool) -> None:
    """Raise UnreadablePrefix unless a timestamp and %p are there for every process."""
    cut = " before %q (the server's own processes print only what comes before it)"
    where = cut if has_q else ""
    if "time" not in seen:
        raise UnreadablePrefix(
            f"the server's log_line_prefix ({prefix!r}) has no timestamp{where}: add %m (or "
            "%t, %n) to it to have its events"
        )
    if "p" not in seen:
        raise UnreadablePrefix(
            f"the server's log_line_prefix ({prefix!r}) has no process id{where}: add %p to it "
            "to have its events"
        )


@lru_cache(maxsize=4096)
def _utc_offset(zone: str, minute: str, abbrev: str) -> float:
    """Seconds a local minute of zone, printed with this abbreviation, is ahead of UTC.

    PostgreSQL prints %m and %t in log_timezone with the zone's abbreviation. A numeric one
    ("+03", "-0330") is the offset itself. A named one is read in the zone the server names:
    a local time is ambiguous only in the hour repeated when summer time ends, and there the
    abbreviation tells which of the two it is (CEST before, CET after). Where it does not —
    an abbreviation this machine's time zone database spells otherwise than the server's, or a
    zone whose abbreviation stays the same across a change — the earlier one is taken. %n
    (epoch seconds) has no such ambiguity.
    """
    numeric = NUMERIC_ABBREV.fullmatch(abbrev)
    if numeric:
        sign, hours, minutes = numeric.groups()
        seconds = int(hours) * 3600 + int(minutes or 0) * 60
        return float(seconds if sign == "+" else -seconds)
    if zone in UTC_ZONES:
        return 0.0
    local = datetime.strptime(minute, "%Y-%m-%d %H:%M")
    tz = ZoneInfo(zone)
    candidates = [local.replace(tzinfo=tz, fold=fold) for fold in (0, 1)]
    named = [c for c in candidates if c.tzname() == abbrev] or candidates
    offset = named[0].utcoffset()
    return 0.0 if offset is None else offset.total_seconds()
