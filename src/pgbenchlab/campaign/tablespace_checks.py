"""The plan's tablespace directories checked before a campaign starts: each outside every
managed server's data directory (a tablespace inside a cluster would be copied, removed and
counted with it) and one the server account can create or write in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pgbenchlab.osuser import OsAccount
from pgbenchlab.plan import Plan
from pgbenchlab.plan.dataset import TABLESPACE_KEYS


def tablespace_problems(
    plan: Plan, data_dirs: Mapping[str, Path], account: OsAccount | None
) -> list[str]:
    """A line per directory that cannot serve (data_dirs: each managed server's, as far as
    known; account: the server account, None while it is not known)."""
    problems = []
    for key in TABLESPACE_KEYS:
        directory = getattr(plan.dataset, key)
        if directory is None:
            continue
        place = Path(directory).resolve()
        for server, data_dir in data_dirs.items():
            if place.is_relative_to(data_dir.resolve()):
                problems.append(
                    f"[dataset] {key} {directory} lies inside server {server}'s data directory "
                    f"{data_dir}: choose a directory outside every cluster"
                )
        if account is not None and not account.can_create(place):
            problems.append(
                f"[dataset] {key} {directory}: the server account {account.name} can neither "
                "create it nor write in it: make it (or its parent) writable for that account, "
                "or choose another directory"
            )
    return problems
