"""The plan's tablespace directories checked before a campaign starts, on each host that runs
a managed server (this machine included): each outside every managed server's data directory
there (a tablespace inside a cluster would be copied, removed and counted with it) and one the
server account there can create or write in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath

from pgbenchlab.campaign.checklist import Findings, Readiness
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.osuser import OsAccount, known_server_account
from pgbenchlab.plan import Plan
from pgbenchlab.plan.dataset import TABLESPACE_KEYS


def tablespace_problems(
    plan: Plan,
    data_dirs: Mapping[str, PurePath],
    account: OsAccount | None,
    host: Host = LOCAL_HOST,
) -> list[str]:
    """A line per directory that cannot serve on host (data_dirs: each managed server's there,
    as far as known; account: the server account there, None while it is not known)."""
    there = "" if host is LOCAL_HOST else f" on host {host.name}"
    problems = []
    for key in TABLESPACE_KEYS:
        directory = getattr(plan.dataset, key)
        if directory is None:
            continue
        place = host.resolve(PurePath(directory))
        for server, data_dir in data_dirs.items():
            if place.is_relative_to(host.resolve(data_dir)):
                problems.append(
                    f"[dataset] {key} {directory} lies inside server {server}'s data directory "
                    f"{data_dir}{there}: choose a directory outside every cluster"
                )
        if account is not None and not account.can_create(place, host=host):
            problems.append(
                f"[dataset] {key} {directory}{there}: the server account {account.name} can "
                "neither create it nor write in it: make it (or its parent) writable for that "
                "account, or choose another directory"
            )
    return problems


def tablespace_dirs(ready: Readiness, found: Findings) -> None:
    if not ready.plan.dataset.tablespaces:
        return
    servers = ready.servers
    local = [s for s in ready.managed if s.host is None]
    if servers is None:  # the data directories named now, the others when the campaign starts
        named = {s.name: PurePath(s.data_dir) for s in local if s.data_dir}
        account = known_server_account()  # as root, made when the first campaign starts
        if local:
            found.add(tablespace_problems(ready.plan, named, account))
        if len(named) < len(local) or (local and account is None):
            found.leave("the tablespace directories (as the server account) are checked")
    elif local:
        every = {s.name: servers.data_dir(s) for s in local}
        found.add(tablespace_problems(ready.plan, every, servers.account))
    for name in sorted({s.host for s in ready.managed if s.host is not None}):
        host = ready.host(name)
        if servers is None or host is None:
            found.leave(f"the tablespace directories on host {name} are checked")
            continue
        there = {s.name: servers.data_dir(s) for s in ready.managed if s.host == name}
        account = servers.hosts.account(name)
        found.add(tablespace_problems(ready.plan, there, account, host))
