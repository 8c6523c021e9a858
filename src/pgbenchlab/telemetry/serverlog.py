"""Events from a server's log: checkpoints (with their write/sync times and buffers),
autovacuum and autoanalyze runs, lock waits, errors — each on the run's time axis.

A managed server's log is written with ``log_line_prefix = '%m [%p] '`` and
``log_timezone = UTC``; an external server's with whatever prefix and zone it has, read through
its `LineFormat` (`telemetry.logformat`). A record's following lines (tab-indented autovacuum
figures) carry no prefix; DETAIL, HINT, CONTEXT and STATEMENT lines carry one and belong to the
previous record of the same process. The log is followed through its host (`Host.follow`); an
external server's may switch to a new file during the run (`LogFollower`).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath

from pgbenchlab.hosts import Host
from pgbenchlab.records.telemetry import LogEvent
from pgbenchlab.telemetry.logformat import ATTACHED, MANAGED, LineFormat, file_kind

# What ATTACHED lines print, as csvlog's columns and jsonlog's keys.
CSV_ATTACHED = {"detail": 14, "hint": 15, "query": 16, "context": 18, "statement": 19}
JSON_ATTACHED = {k: k for k in ("detail", "hint", "context", "statement")} | {
    "query": "internal_query"
}
ERRORS = ("ERROR", "FATAL", "PANIC")
CHECKPOINT_FIGURES = {  # checkpoint complete: pattern → field names (seconds, buffers, kB)
    r"wrote (\d+) buffers \(([\d.]+)%\)": ("buffers", "buffers_pct"),
    r"wrote (\d+) SLRU buffers": ("slru_buffers",),
    # "transaction log file(s)" before 10
    r"(\d+) (?:WAL|transaction log) file\(s\) added, (\d+) removed, (\d+) recycled": (
        "wal_added",
        "wal_removed",
        "wal_recycled",
    ),
    r"write=([\d.]+) s, sync=([\d.]+) s, total=([\d.]+) s": ("write_s", "sync_s", "total_s"),
    r"sync files=(\d+), longest=([\d.]+) s, average=([\d.]+) s": (
        "sync_files",
        "sync_longest_s",
        "sync_average_s",
    ),
    r"distance=(\d+) kB, estimate=(\d+) kB": ("distance_kb", "estimate_kb"),
}
VACUUM = re.compile(
    r'^automatic (?:aggressive )?(vacuum|analyze)(?: to prevent wraparound)? of table "([^"]+)"'
)
ELAPSED = re.compile(r"elapsed: ([\d.]+) s")


@dataclass
class Record:
    at: float  # epoch seconds
    pid: int
    severity: str
    message: str
    attached: dict[str, str] = field(default_factory=dict)


def records(text: str, fmt: LineFormat = MANAGED) -> Iterator[Record]:
    """Log records with their continuation lines and attached DETAIL/STATEMENT lines."""
    if fmt.destination == "csvlog":
        return _csv_records(text, fmt)
    if fmt.destination == "jsonlog":
        return _json_records(text, fmt)
    return _text_records(text, fmt)


def _csv_records(text: str, fmt: LineFormat) -> Iterator[Record]:
    """csvlog's rows: a quoted field keeps its newlines; the time, pid, severity and message
    columns, then what the stderr log prints on lines of its own."""
    rows = csv.reader(io.StringIO(text))
    with contextlib.suppress(csv.Error):  # a row cut short at the end
        for row in rows:
            stamp = fmt.pattern.match(row[0]) if len(row) > max(CSV_ATTACHED.values()) else None
            if stamp is not None and row[3].isdigit():
                attached = {key: row[i] for key, i in CSV_ATTACHED.items() if row[i]}
                yield Record(fmt.epoch(stamp), int(row[3]), row[11], row[13], attached)


def _json_records(text: str, fmt: LineFormat) -> Iterator[Record]:
    """jsonlog's objects, one per line."""
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        stamp = (
            fmt.pattern.match(str(entry.get("timestamp", ""))) if isinstance(entry, dict) else None
        )
        if stamp is not None and isinstance(entry.get("pid"), int):
            attached = {key: str(entry[k]) for key, k in JSON_ATTACHED.items() if entry.get(k)}
            severity, message = str(entry.get("error_severity")), str(entry.get("message"))
            yield Record(fmt.epoch(stamp), entry["pid"], severity, message, attached)


def _text_records(text: str, fmt: LineFormat) -> Iterator[Record]:
    last: dict[int, Record] = {}
    current: Record | None = None
    attached: tuple[Record, str] | None = None  # where an unprefixed line continues
    for line in text.splitlines():
        parsed = fmt.parse(line)
        if parsed is None:
            if attached is not None:
                rec, key = attached
                rec.attached[key] += "\n" + line
            elif current is not None:
                current.message += "\n" + line
            continue
        match, severity, message = parsed
        pid = int(match["pid"])
        if severity in ATTACHED:
            if pid in last:
                last[pid].attached[severity.lower()] = message
                attached = (last[pid], severity.lower())
            continue
        if current is not None:
            yield current
        current = Record(fmt.epoch(match), pid, severity, message)
        last[pid], attached = current, None
    if current is not None:
        yield current


def _number(text: str) -> float | int:
    return float(text) if "." in text else int(text)


def checkpoint_figures(message: str) -> dict[str, object]:
    found: dict[str, object] = {}
    for pattern, names in CHECKPOINT_FIGURES.items():
        match = re.search(pattern, message)
        if match:
            found |= {n: _number(v) for n, v in zip(names, match.groups(), strict=True)}
    return found


def classify(rec: Record) -> tuple[str, str, dict[str, object]] | None:
    """(kind, summary, detail) of a record worth keeping, or None."""
    msg = rec.message
    first = msg.split("\n", 1)[0]
    if rec.severity in ERRORS:
        detail: dict[str, object] = {"severity": rec.severity, "message": msg, **rec.attached}
        return "error", f"{rec.severity}: {first}", detail
    if rec.severity != "LOG":
        return None
    for what in ("checkpoint", "restartpoint"):
        if first.startswith(f"{what} starting: "):
            flags = first.removeprefix(f"{what} starting: ").split()
            return (
                "checkpoint_start",
                f"{what} starts ({' '.join(flags)})",
                {"flags": flags, "what": what},
            )
        if first.startswith(f"{what} complete: "):
            figures = checkpoint_figures(first)
            summary = (
                f"{what} done: {figures.get('buffers', '?')} buffers, write "
                f"{figures.get('write_s', '?')} s, sync {figures.get('sync_s', '?')} s"
            )
            return "checkpoint_end", summary, {"what": what, **figures}
    if first.startswith("checkpoints are occurring too frequently"):
        return "checkpoint_warning", first, {"hint": rec.attached.get("hint", "")}
    vacuum = VACUUM.match(first)
    if vacuum:
        kind = "autovacuum" if vacuum.group(1) == "vacuum" else "autoanalyze"
        elapsed = ELAPSED.search(msg)
        found: dict[str, object] = {"table": vacuum.group(2), "text": msg}
        if elapsed:
            found["elapsed_s"] = float(elapsed.group(1))
        table = vacuum.group(2).rsplit(".", 1)[-1]
        return kind, f"{kind} {table}" + (f" ({elapsed.group(1)} s)" if elapsed else ""), found
    if re.match(r"process \d+ (still waiting|detected deadlock while waiting) for ", first):
        return "lock_wait", first, {"detail": rec.attached.get("detail", "")}
    return None


def parse_events(text: str, t0: float, fmt: LineFormat = MANAGED) -> list[LogEvent]:
    """The events in a piece of server log, with t in seconds relative to epoch t0."""
    events = []
    for rec in records(text, fmt):
        found = classify(rec)
        if found is not None:
            kind, summary, detail = found
            events.append(
                LogEvent(round(rec.at - t0, 3), kind, summary, {"pid": rec.pid, **detail})
            )
    return events


@dataclass(frozen=True)
class ServerLog:
    """A server's log file and how its lines read; when ``names_start`` (the literal start of
    its log_filename) is given, the server may switch to newer files of its directory."""

    path: PurePath
    fmt: LineFormat = MANAGED
    names_start: str | None = None


class LogFollower:
    """A server's log file followed through its host from its end when the run starts. When
    ``names_start`` (the literal start of its log_filename) is given, the server may switch to
    a new file of the same directory during the run (log_rotation_age or _size,
    pg_rotate_logfile()): the files named after the followed one (the default name's
    timestamp sorts in time order, as `telemetry.external` finds the newest), of the same kind
    (stderr's, .csv, .json), are read whole at the end, after the followed file's rest."""

    def __init__(self, host: Host, log: ServerLog) -> None:
        self.host, self.path, self.fmt, self.names_start = host, log.path, log.fmt, log.names_start
        self.tail = host.follow(log.path)

    def events(self, t0: float) -> tuple[tuple[LogEvent, ...], list[str]]:
        """The events written since the start (t relative to epoch t0), and what could not be
        read."""
        problems: list[str] = []
        try:
            text = self.read(problems)
        except OSError as exc:
            return (), [f"server log: {exc}"]
        return tuple(parse_events(text, t0, self.fmt)), problems

    def read(self, problems: list[str]) -> str:
        """The whole lines written since the start (the followed file's raise OSError; the
        newer files' are told in problems)."""
        text = self.tail.read()
        try:
            for newer in self._newer_files():
                written = self.host.read_text(newer)
                text += written[: written.rfind("\n") + 1]
        except OSError as exc:
            problems.append(f"the server's newer log files in {self.path.parent}: {exc}")
        return text

    def _newer_files(self) -> list[PurePath]:
        if self.names_start is None:
            return []
        followed, kind = self.path.name, file_kind(self.path.name)
        names = self.host.list_dir(self.path.parent)
        return [
            self.path.parent / name
            for name in sorted(names)
            if name > followed and name.startswith(self.names_start) and file_kind(name) == kind
        ]
