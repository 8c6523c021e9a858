"""Every run checks itself against the server: pgbench's transaction count against the commits
the server counted in the benchmark's database over the same interval.

A builtin pgbench transaction commits exactly once. Beside pgbench, the database's counter also
sees the sampler's own statements (each one commits; counted by the capture) and pgbench's few
start-up queries. A larger difference means another client used the database, a pooler sat in
between, or the run reached another server (a standby): the numbers are not what they seem.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.findings import RunWarning, commits_disagree
from pgbenchlab.records.telemetry import RunTelemetry
from pgbenchlab.telemetry.capture import ACTIVITY_HZ

COMMITS = ("pg_stat_database", "xact_commit")
# pgbench's own queries besides the transactions: the scale check and the like, once a run.
STARTUP_SLACK = 10
# Per connection: under -M prepared each command of the script is prepared once, and each
# preparation commits (the builtins have at most 7 commands); one more for the session's start.
PER_CONNECTION = 8
# A backend reports its statistics at most once a second, so up to a second of the sampler's
# own statements can land on either side of the first or the final counter sample.
SAMPLER_FLUSH_SLACK = 2 * (ACTIVITY_HZ + 1)


@dataclass(frozen=True)
class CommitCheck:
    pgbench_transactions: int
    server_commits: int
    sampler_statements: int
    tolerance: int

    @property
    def unexplained(self) -> int:
        """Commits the server counted that neither pgbench nor the sampler made (negative:
        transactions pgbench counted that the server did not see)."""
        return self.server_commits - self.sampler_statements - self.pgbench_transactions

    @property
    def agrees(self) -> bool:
        return abs(self.unexplained) <= self.tolerance

    def finding(self) -> RunWarning:
        return commits_disagree(
            self.pgbench_transactions,
            self.server_commits,
            self.unexplained,
            self.sampler_statements,
        )

    def warning(self) -> str:
        return self.finding().text


def check_commits(
    transactions: int | None,
    telemetry: RunTelemetry | None,
    *,
    clients: int,
    connect_each: bool,
    builtin_only: bool,
) -> CommitCheck | None:
    """The check, where it can be made: builtin scripts only (a custom script may commit any
    number of times per transaction) and a sampler that read the counter throughout. With
    ``connect_each`` (pgbench -C) every transaction opens a connection of its own."""
    if not builtin_only or transactions is None or telemetry is None or telemetry.errors:
        return None
    commits = telemetry.total(*COMMITS)
    if commits is None:
        return None
    connections = clients + (transactions if connect_each else 0)
    return CommitCheck(
        pgbench_transactions=transactions,
        server_commits=round(commits),
        sampler_statements=telemetry.sampler_statements,
        tolerance=STARTUP_SLACK + SAMPLER_FLUSH_SLACK + PER_CONNECTION * connections,
    )
