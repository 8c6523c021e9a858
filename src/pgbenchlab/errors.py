"""The one error family for user mistakes.

A `UserError` is something the user can fix (a plan key, a path, an option, the results disk).
The CLI prints its message as one line and exits with its `exit_code`: 2 before anything
started, 1 for a campaign that stopped cleanly (`CampaignStopped`). Anything else is a bug and
shows a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; the message says what to fix."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class PlanError(UserError):
    """The plan file cannot run as written."""


class InstallError(UserError):
    """A PostgreSQL installation named by the user cannot be found or used."""


class BuildError(UserError):
    """A PostgreSQL build cannot be made: a bad source, ref, patch, compiler or option, or a
    compilation that failed (its message ends with the compiler's last lines and the log)."""


class BisectionRefused(UserError):
    """A bisection's range cannot be searched as asked: its ends not told apart, alike, or
    changed the other way than expected (the message says what to change)."""


class ServerError(UserError):
    """A server cannot be prepared or reached for a reason the user can act on."""


class HostError(UserError):
    """A host named by the plan cannot be reached or used over SSH (the message says why and
    the fix: a host key to verify, a login refused, no route)."""


class StoreError(UserError):
    """The results database cannot be used (locked by another campaign, newer schema, ...)."""


class CampaignStopped(StoreError):
    """The results could no longer be written during a campaign (disk full, database locked):
    the campaign stopped cleanly; every run committed before is kept."""

    exit_code = 1


class PgbenchParseError(Exception):
    """pgbench wrote something the parser cannot turn into a result (not a user mistake)."""


class ProfilerError(UserError):
    """perf cannot profile the server here: missing, or refused by the kernel."""


class NotReady(UserError):
    """The checks made before a campaign starts found problems: the message holds every one,
    a line each with its fix (one problem: that line alone). Nothing was started or changed."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        if len(problems) == 1:
            message = problems[0]
        else:
            lines = "\n".join(f"  - {p}" for p in problems)
            message = f"{len(problems)} problems, found before anything started; fix each:\n{lines}"
        super().__init__(message)


def first_line(error: object) -> str:
    """An error's first line: what a one-line message or a table cell has room for."""
    return str(error).strip().split("\n", 1)[0]
