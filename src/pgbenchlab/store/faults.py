"""Faults of the results directory and database that the user can fix, as one-line errors.

Every query of a results database runs through `GuardedConnection`: SQLite's environment
errors (the disk is full, another process holds the write lock, the file is damaged, not a
database, read-only, cannot be opened) become a `StoreError` naming the file and the fix, while
SQL errors (bugs) stay as they are. Once a campaign writes (`campaign_running`), they become
`CampaignStopped` instead: the campaign stops cleanly (exit 1) and keeps every committed run.
`results_os_error` does the same for files written in the results directory.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pgbenchlab.errors import CampaignStopped, StoreError

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's lock on results.db
STOPPED = (
    "; the campaign stopped: every finished run is kept (run the same command again to continue)"
)
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)

_T = TypeVar("_T")


def _fix(code: int, path: Path) -> str | None:
    """What to tell the user for SQLite's primary result code, or None for a bug."""
    another_dir = "or give --results another directory"
    fixes = {
        sqlite3.SQLITE_BUSY: f"another process holds the write lock of {path} (waited "
        f"{BUSY_TIMEOUT_S:g} s): let it finish or stop it, then run again",
        sqlite3.SQLITE_FULL: f"the results disk is full ({path}): free space on it, "
        "or give --results a directory on another disk",
        sqlite3.SQLITE_IOERR: f"cannot read or write {path} (disk I/O error): check the disk "
        f"and its free space, {another_dir}",
        sqlite3.SQLITE_READONLY: f"{path} cannot be written (read-only): make it and its "
        f"directory writable, {another_dir}",
        sqlite3.SQLITE_CANTOPEN: f"cannot open {path}: make its directory writable, {another_dir}",
        sqlite3.SQLITE_CORRUPT: f"{path} is damaged (truncated or overwritten): restore it "
        f"from a copy, {another_dir}",
        sqlite3.SQLITE_NOTADB: f"{path} is not an SQLite database: move it away, {another_dir}",
    }
    fixes[sqlite3.SQLITE_LOCKED] = fixes[sqlite3.SQLITE_PROTOCOL] = fixes[sqlite3.SQLITE_BUSY]
    fixes[sqlite3.SQLITE_PERM] = fixes[sqlite3.SQLITE_READONLY]
    return fixes.get(code & 0xFF)


def stop_or_refuse(message: str, *, running: bool) -> StoreError:
    """A campaign under way stops (exit 1, runs kept); before it started, a plain refusal."""
    return CampaignStopped(message + STOPPED) if running else StoreError(message)


def results_os_error(exc: OSError, *, running: bool, where: Path | None = None) -> StoreError:
    """An OSError writing a file or directory of the results (``where`` when the error names
    none), as the error that says the fix."""
    path = exc.filename or where or "the results directory"
    if exc.errno in DISK_FULL_ERRNOS:
        message = (
            f"the results disk is full ({path}: {exc.strerror}): free space on it, "
            "or give --results a directory on another disk"
        )
    else:
        message = f"cannot write {path}: {exc.strerror}: give --results a writable directory"
    return stop_or_refuse(message, running=running)


@contextmanager
def results_writes(where: Path | None = None, *, running: bool = True) -> Iterator[None]:
    """Files written into the results directory (in ``where``): an OSError says what to fix
    (a full disk, a read-only directory)."""
    try:
        yield
    except OSError as exc:
        raise results_os_error(exc, running=running, where=where) from None


class GuardedConnection(sqlite3.Connection):
    """A connection whose cursors turn SQLite's environment errors into StoreErrors."""

    def __init__(self, database: str | Path, *args: Any, **kwargs: Any) -> None:
        self.path = Path(database)
        self.campaign_running = False
        try:
            super().__init__(database, *args, **kwargs)
        except sqlite3.Error as exc:
            raise self.translate(exc) from None

    def translate(self, exc: sqlite3.Error) -> Exception:
        """The StoreError for an environment fault, else exc itself (a bug: traceback)."""
        code = getattr(exc, "sqlite_errorcode", None)
        fix = _fix(code, self.path) if isinstance(code, int) else None
        if fix is None:
            return exc
        return stop_or_refuse(fix, running=self.campaign_running)

    def guarded(self, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except sqlite3.Error as exc:
            raise self.translate(exc) from None

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or GuardedCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        cursor: GuardedCursor = self.cursor()
        return cursor.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> GuardedCursor:
        cursor: GuardedCursor = self.cursor()
        return cursor.executemany(sql, parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        cursor: GuardedCursor = self.cursor()
        return cursor.executescript(sql_script)


class GuardedCursor(sqlite3.Cursor):
    """Every step of a query guarded: rows are read lazily, so fetching can fail too."""

    def _guard(self, call: Callable[[], _T]) -> _T:
        connection = self.connection
        assert isinstance(connection, GuardedConnection)
        return connection.guarded(call)

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        return self._guard(partial(super().execute, sql, parameters))

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> GuardedCursor:
        return self._guard(partial(super().executemany, sql, seq_of_parameters))

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        return self._guard(partial(super().executescript, sql_script))

    def fetchone(self) -> Any:
        return self._guard(super().fetchone)

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        return self._guard(partial(super().fetchmany, size))

    def fetchall(self) -> list[Any]:
        return self._guard(super().fetchall)

    def __next__(self) -> Any:
        return self._guard(super().__next__)


def connect(path: Path) -> GuardedConnection:
    """Open (or create) a results database with every query guarded."""
    db = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, factory=GuardedConnection
    )
    assert isinstance(db, GuardedConnection)
    return db
