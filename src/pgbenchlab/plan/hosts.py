"""The [[host]] tables (machines reached over SSH) and who names them: a server's `host`, the
[pgbench] `hosts` where the load generators run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgbenchlab.installs import BUILD_PREFIX
from pgbenchlab.plan.records import HostPlan, RunSpec, ServerPlan
from pgbenchlab.plan.schema import HOST_KEYS
from pgbenchlab.plan.values import Context, check_name, plan_path

LOCAL_NAMES = ("local", "localhost")  # this machine: never a [[host]] name
FILE_KINDS = {"identity": "private key ssh -i takes", "known_hosts": "known_hosts file"}


def parse_hosts(value: Any, ctx: Context, base: Path) -> tuple[HostPlan, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ctx.fail("host", "must be one or more [[host]] tables")
    hosts: list[HostPlan] = []
    for i, item in enumerate(value):
        key = f"host[{i}]"
        if not isinstance(item, dict):
            raise ctx.fail(key, "must be a table")
        ctx.check_keys(item, HOST_KEYS, key)
        host = parse_host(item, ctx, key, base)
        if any(h.name == host.name for h in hosts):
            raise ctx.fail(f"{key}.name", f'host name "{host.name}" is used twice')
        hosts.append(host)
    return tuple(hosts)


def parse_host(item: dict[str, Any], ctx: Context, key: str, base: Path) -> HostPlan:
    name = check_name(item.get("name"), ctx, f"{key}.name")
    if name in LOCAL_NAMES:
        raise ctx.fail(f"{key}.name", f'"{name}" means this machine; choose another name')
    target = item.get("ssh")
    if not isinstance(target, str) or not target or any(c.isspace() for c in target):
        raise ctx.fail(f"{key}.ssh", 'must be "user@address" or "address" (as ssh takes it)')
    if ":" in target.rpartition("@")[0]:
        raise ctx.fail(f"{key}.ssh", "must not hold a password: keys and the agent log in")
    port = item.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise ctx.fail(f"{key}.port", f"must be a port number; got {port!r}")
    if port is not None and not 0 < port < 65536:
        raise ctx.fail(f"{key}.port", f"must be 1 to 65535; got {port}")
    paths = {}
    for field_name in ("identity", "known_hosts"):
        value = item.get(field_name)
        if value is not None and (not isinstance(value, str) or not value):
            raise ctx.fail(f"{key}.{field_name}", "must be a file path")
        found = None if value is None else plan_path(value, base)  # files of this machine
        if found is not None and not Path(found).is_file():
            raise ctx.fail(
                f"{key}.{field_name}",
                f"host {name}: {found}: no such file; give the path of the "
                f"{FILE_KINDS[field_name]} on this machine",
            )
        paths[field_name] = found
    return HostPlan(name, target, port, paths["identity"], paths["known_hosts"])


def check_host_names(
    hosts: tuple[HostPlan, ...], servers: list[ServerPlan], pgbench: dict[str, Any], ctx: Context
) -> tuple[str, ...]:
    """Every host named by a server or [pgbench] exists; the load generator hosts."""
    known = {h.name for h in hosts}
    for i, server in enumerate(servers):
        if server.host is not None and server.host not in known:
            raise ctx.fail(f"server[{i}].host", _unknown(server.host, known))
    value = pgbench.get("hosts", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail("pgbench.hosts", 'must be a list of host names, e.g. ["lg1", "lg2"]')
    for name in value:
        if name not in known:
            raise ctx.fail("pgbench.hosts", _unknown(name, known))
    if len(set(value)) != len(value):
        raise ctx.fail("pgbench.hosts", "names a host twice")
    for i, server in enumerate(servers):
        if value and server.managed and server.host is None:
            raise ctx.fail(
                f"server[{i}].host",
                "a managed server on this machine is not reachable from a load generator "
                "host: give it a host too",
            )
    return tuple(value)


def check_builds_here(pgbench_install: str, pgbench_hosts: tuple[str, ...], ctx: Context) -> None:
    """A build's pgbench runs on this machine only: load generator hosts run a pgbench
    installed there. (A server on a [[host]] may use a build: its copy goes there.)"""
    if pgbench_hosts and pgbench_install.startswith(BUILD_PREFIX):
        raise ctx.fail(
            "pgbench.install",
            "a build's pgbench runs on this machine only: pgbench runs on "
            f"{', '.join(pgbench_hosts)}; name a pgbench installed there",
        )


def _unknown(name: str, known: set[str]) -> str:
    listed = ", ".join(sorted(known)) or "none"
    return f'names host "{name}", which no [[host]] table defines (defined: {listed})'


def check_generator_clients(specs: tuple[RunSpec, ...], generators: int, ctx: Context) -> None:
    """Every cell has at least one client per load generator host (clients are split)."""
    if generators < 2:
        return
    fewest = min(specs, key=lambda s: s.clients, default=None)
    if fewest is not None and fewest.clients < generators:
        raise ctx.fail(
            "pgbench.hosts",
            f"{generators} load generators but a cell has {fewest.clients} client(s) "
            f"({fewest.cell_id}): each generator needs at least one; use clients ≥ {generators}",
        )


def split_evenly(total: int, parts: int) -> list[int]:
    """total over parts: each total // parts, the first total % parts one more (plan order)."""
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


def auto_threads(clients: int, cpus: Sequence[int]) -> int:
    """threads = "auto": on each load generator (this machine alone, or the [pgbench] hosts,
    clients split evenly over them) one thread per CPU pgbench may use there, at most one per
    client; cpus: those CPUs, per generator."""
    shares = split_evenly(clients, len(cpus))
    return sum(max(1, min(share, count)) for share, count in zip(shares, cpus, strict=True))
