"""The backend type of a server process, from the title PostgreSQL gives it in
/proc/PID/cmdline ("postgres: checkpointer", "postgres: USER DB HOST(PORT) SELECT", with the
cluster name after "postgres: " when one is set, " process" after the name before 11)."""

from __future__ import annotations

POSTMASTER = "postmaster"
CLIENT = "client backend"
UNSEEN = "exited unseen"  # forked and gone between two looks at /proc
AUXILIARY = (
    "autovacuum launcher",
    "autovacuum worker",
    "background writer",
    "checkpointer",
    "walwriter",
    "wal writer",
    "logical replication launcher",
    "logical replication worker",
    "logical replication apply worker",
    "parallel worker",
    "stats collector",
    "archiver",
    "walsender",
    "walreceiver",
    "walsummarizer",
    "startup",
    "io worker",
    "slotsync worker",
)


def backend_type(cmdline: str) -> str:
    """The backend type a process title names; client backend for a session's title."""
    title = cmdline.replace("\0", " ").strip()
    if not title.startswith("postgres:"):
        return POSTMASTER if title else UNSEEN
    rest = title.removeprefix("postgres:").strip()
    for candidate in (rest, rest.partition(": ")[2]):  # without, then with a cluster name
        for kind in AUXILIARY:
            if candidate.startswith(kind):
                return "walwriter" if kind == "wal writer" else kind
    return CLIENT
