"""Where an external server runs, when the plan names its host: its postmaster (the parent of a
backend of ours, read from /proc there), its data directory and its log file (stderr's, else
csvlog's or jsonlog's, with how its lines read: from its own settings), each as far as the
server lets its role read them and the SSH account there can.

What cannot be had is told (`log_problem`, with the fix) and left out of the telemetry; it
never fails a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath
from typing import Any

import psycopg

from pgbenchlab.hosts import Host
from pgbenchlab.server import Endpoint
from pgbenchlab.telemetry.logformat import (
    DESTINATIONS,
    MANAGED,
    LineFormat,
    UnreadablePrefix,
    file_kind,
    line_format,
    structured_format,
)
from pgbenchlab.telemetry.serverlog import ServerLog

SETTINGS = (
    "data_directory",
    "logging_collector",
    "log_destination",
    "log_directory",
    "log_filename",
    "log_line_prefix",
    "log_timezone",
)
# pg_settings hides a superuser-only setting (data_directory, log_directory, …) from a role
# without pg_read_all_settings: such a row is absent.
SETTINGS_SQL = "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)"
CURRENT_LOGFILE_SQL = "SELECT pg_current_logfile(%s)"
CAN_READ_LOGFILE_SQL = "SELECT has_function_privilege('pg_current_logfile(text)', 'execute')"


@dataclass(frozen=True)
class ExternalPlace:
    """An external server's processes and files on its host."""

    postmaster_pid: int | None
    data_dir: PurePath | None
    log: ServerLog | None  # None: not read (log_problem says why)
    log_problem: str | None = None
    postmaster_problem: str | None = None


def locate(endpoint: Endpoint, host: Host) -> ExternalPlace:
    """Where the server behind endpoint runs on host (see the module docstring)."""
    try:
        with endpoint.connect(timeout=10) as conn:
            backend = int(_one(conn, "SELECT pg_backend_pid()"))
            rows = conn.execute(SETTINGS_SQL, (list(SETTINGS),)).fetchall()
            settings = {str(k): str(v) for k, v in rows}
            destination = _destination(settings)
            current = None
            if destination is not None and _one(conn, CAN_READ_LOGFILE_SQL):
                current = _one(conn, CURRENT_LOGFILE_SQL, destination)
            postmaster, postmaster_problem = _parent_postmaster(backend, host)
    except psycopg.Error as exc:
        reason = f"cannot ask the server where it runs: {str(exc).strip().splitlines()[0]}"
        return ExternalPlace(None, None, None, reason, reason)
    data_dir = _path(settings.get("data_directory"))
    current_text = None if current is None else str(current)
    log_path, problem = _log_file(settings, data_dir, current_text, destination, host)
    fmt = MANAGED
    if log_path is not None and destination is not None:
        problem = _unreadable(log_path, host)
        try:
            fmt = _line_format(settings, destination)
        except UnreadablePrefix as exc:
            problem = problem or str(exc)
    names = _names_start(settings["log_filename"]) if "log_filename" in settings else None
    log = None if problem or log_path is None else ServerLog(log_path, fmt, names)
    return ExternalPlace(postmaster, data_dir, log, problem, postmaster_problem)


def _one(conn: psycopg.Connection[Any], sql: str, *params: str) -> Any:
    row = conn.execute(sql, params or None).fetchone()
    return None if row is None else row[0]


def _path(text: str | None) -> PurePath | None:
    return PurePosixPath(text) if text else None


def _parent_postmaster(backend: int, host: Host) -> tuple[int | None, str | None]:
    """The postmaster: the parent of our backend, when that backend is a postgres process of
    host (else the host named is not the server's, or its pids are another namespace's)."""
    try:
        stat = host.read_text(PurePosixPath(f"/proc/{backend}/stat"))
        parent = int(stat.rpartition(")")[2].split()[1])
        name = host.read_text(PurePosixPath(f"/proc/{parent}/comm")).strip()
    except (OSError, ValueError, IndexError):
        name, parent = "", 0
    if name not in ("postgres", "postmaster"):
        return None, (
            f"the server's backend (pid {backend}) is no postgres process of host {host.name}: "
            "is that the host it runs on (and not in a container of its own)?"
        )
    return parent, None


def _destination(settings: dict[str, str]) -> str | None:
    """The log_destination whose file is read: stderr's, else csvlog's, else jsonlog's."""
    named = {d.strip() for d in settings.get("log_destination", "stderr").split(",")}
    return next((d for d in DESTINATIONS if d in named), None)


def _log_file(
    settings: dict[str, str],
    data_dir: PurePath | None,
    current: str | None,
    destination: str | None,
    host: Host,
) -> tuple[PurePath | None, str | None]:
    """The log file the server writes now, or why it cannot be told."""
    if current:
        return _under(PurePosixPath(current), data_dir)
    collector = settings.get("logging_collector")
    if collector == "off" or destination is None:
        return None, (
            "the server writes no log file of its own (logging_collector = off, or "
            "log_destination with none of stderr, csvlog, jsonlog): its log goes where its "
            "standard error does (or to syslog), which its settings do not tell; set "
            "logging_collector = on, with stderr, csvlog or jsonlog in log_destination, to "
            "have its events"
        )
    directory, pattern = settings.get("log_directory"), settings.get("log_filename")
    if collector is None or directory is None or pattern is None:
        return None, (
            "the server's log settings are hidden from its role: grant it pg_read_all_settings "
            "(or EXECUTE on pg_current_logfile(text)) to have its events"
        )
    folder, problem = _under(PurePosixPath(directory), data_dir)
    if folder is None:
        return None, problem
    return _newest(folder, pattern, destination, host)


def _newest(
    folder: PurePath, pattern: str, destination: str, host: Host
) -> tuple[PurePath | None, str | None]:
    """The newest file log_filename names in folder for destination: its strftime fields from
    the largest unit down (the default's), so the last name in order is the newest."""
    literal = _names_start(pattern)
    try:
        names = sorted(
            n
            for n in host.list_dir(folder)
            if n.startswith(literal) and file_kind(n) == destination
        )
    except OSError as exc:
        return None, (
            f"the SSH account on host {host.name} cannot list the server's log directory "
            f"{folder} ({exc.strerror or exc}): add it to the server account's group to have "
            "its events"
        )
    if not names:
        return None, f"no log file named {pattern} in {folder} on host {host.name}"
    return folder / names[-1], None


def _under(path: PurePath, data_dir: PurePath | None) -> tuple[PurePath | None, str | None]:
    """path, made absolute: a relative one is under the data directory."""
    if path.is_absolute():
        return path, None
    if data_dir is None:
        return None, (
            f"the server's log ({path}) is relative to its data directory, hidden from its "
            "role: grant it pg_read_all_settings to have its events"
        )
    return data_dir / path, None


def _unreadable(path: PurePath, host: Host) -> str | None:
    if host.run(["test", "-r", str(path)], timeout=30).returncode == 0:
        return None
    return (
        f"the SSH account on host {host.name} cannot read the server's log {path}: add it to "
        "the server account's group and set log_file_mode = 0640, to have its events"
    )


def _line_format(settings: dict[str, str], destination: str) -> LineFormat:
    """How the server's log lines read (raises UnreadablePrefix, with the fix)."""
    prefix, zone = settings.get("log_line_prefix"), settings.get("log_timezone")
    if zone is not None and destination != "stderr":
        return structured_format(destination, zone)
    if prefix is None or zone is None:  # hidden: read as PostgreSQL's default prefix
        return MANAGED
    return line_format(prefix, zone)


def _names_start(pattern: str) -> str:
    """What every file log_filename names starts with."""
    return pattern.partition("%")[0]
