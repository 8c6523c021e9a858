"""The [[server]] tables: managed installations or external servers (a libpq dsn)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo

from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.plan.builds import install_spec
from pgbenchlab.plan.dataset import TEMP_SETTING, DatasetOptions
from pgbenchlab.plan.records import PreparePlan, ServerPlan
from pgbenchlab.plan.schema import (
    AXIS_KEYS,
    BUILTINS,
    CONNECTIONS,
    PREPARE_KEYS,
    RESERVED_SETTINGS,
    SERVER_KEYS,
    SERVER_OPTIONS,
)
from pgbenchlab.plan.values import (
    Context,
    as_list,
    check_name,
    cpu_list,
    numa_policy,
    parse_seconds,
    plan_path,
    setting_text,
)

TLS_SSLMODES = ("require", "verify-ca", "verify-full")


def parse_servers(
    value: Any, ctx: Context, base: Path, builds: dict[str, BuildRecipe]
) -> tuple[list[ServerPlan], dict[str, dict[str, Any]]]:
    if value is None:
        value = [{"name": "default", "install": "embedded"}]
    if not isinstance(value, list) or not value:
        raise ctx.fail("server", "must be one or more [[server]] tables")
    servers: list[ServerPlan] = []
    axes: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(value):
        key = f"server[{i}]"
        if not isinstance(item, dict):
            raise ctx.fail(key, "must be a table")
        ctx.check_keys(item, SERVER_KEYS, key)
        server = parse_server(item, ctx, key, base, builds)
        if any(s.name == server.name for s in servers):
            raise ctx.fail(f"{key}.name", f'server name "{server.name}" is used twice')
        servers.append(server)
        own = (*AXIS_KEYS, "setting", *SERVER_OPTIONS)
        axes[server.name] = {k: v for k, v in item.items() if k in own}
        if axes[server.name].get("setting") and not server.managed:
            raise ctx.fail(f"{key}.setting", "setting axes need a managed server, not a dsn")
    return servers, axes


def parse_server(
    item: dict[str, Any], ctx: Context, key: str, base: Path, builds: dict[str, BuildRecipe]
) -> ServerPlan:
    name = check_name(item.get("name"), ctx, f"{key}.name")
    if ("install" in item) == ("dsn" in item):
        if "dsn" in item:
            raise ctx.fail(key, 'give "install" (a managed server) or "dsn" (external), not both')
        # This machine always has the embedded wheel; another host, its newest server.
        item = {**item, "install": "newest" if "host" in item else "embedded"}
    settings = item.get("settings", {})
    if not isinstance(settings, dict):
        raise ctx.fail(f"{key}.settings", "must be a table of setting = value")
    for setting in settings:
        if setting in RESERVED_SETTINGS:
            raise ctx.fail(f"{key}.settings.{setting}", "is managed by pgbenchlab; remove it")
    if "dsn" in item:
        check_dsn(item["dsn"], ctx, f"{key}.dsn")
        for field_name in ("settings", "data_dir", "cpus", "numa"):
            if field_name in item:
                raise ctx.fail(f"{key}.{field_name}", "applies to managed servers only, not a dsn")
    init = item.get("init", False)
    if not isinstance(init, bool):
        raise ctx.fail(f"{key}.init", "must be true or false")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise ctx.fail(f"{key}.description", f"must be a string; got {description!r}")
    host = item.get("host")
    if host is not None:
        host = check_name(host, ctx, f"{key}.host")
    data_dir = item.get("data_dir")
    if data_dir is not None:
        if not isinstance(data_dir, str) or not data_dir:
            raise ctx.fail(f"{key}.data_dir", "must be a directory path")
        if host is not None and not data_dir.startswith("/"):
            raise ctx.fail(f"{key}.data_dir", f"must be an absolute path on host {host}")
        data_dir = data_dir if host is not None else plan_path(data_dir, base)
    install = item.get("install")
    if host is None and isinstance(install, str) and "/" in install:
        install = plan_path(install, base)  # a bin directory here (on a host: its own path)
    return ServerPlan(
        name=name,
        install=install_spec(install, builds, ctx, f"{key}.install") if "install" in item else None,
        dsn=str(item["dsn"]) if "dsn" in item else None,
        settings=tuple(sorted((str(k), setting_text(v)) for k, v in settings.items())),
        data_dir=data_dir,
        init=init,
        cpus=cpu_list(item["cpus"], ctx, f"{key}.cpus") if "cpus" in item else None,
        numa=numa_policy(item["numa"], ctx, f"{key}.numa") if "numa" in item else None,
        host=host,
        description=description,
        prepare=parse_prepare(item["prepare"], ctx, f"{key}.prepare")
        if "prepare" in item
        else None,
    )


def parse_prepare(value: Any, ctx: Context, key: str) -> PreparePlan:
    """prepare = { duration = "5min", workload = "select-only", clients = 4 }: a builtin
    workload (read-only by default) for a duration, at 1 client unless told."""
    if not isinstance(value, dict) or "duration" not in value:
        raise ctx.fail(key, 'must be a table with a duration, such as { duration = "5min" }')
    ctx.check_keys(value, PREPARE_KEYS, key)
    workload = value.get("workload", "select-only")
    if workload not in BUILTINS:
        raise ctx.fail(f"{key}.workload", f"must be a builtin: {', '.join(BUILTINS)}")
    clients = value.get("clients", 1)
    if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
        raise ctx.fail(f"{key}.clients", f"must be a whole number ≥ 1; got {clients!r}")
    duration = parse_seconds(value["duration"], ctx, f"{key}.duration")
    return PreparePlan(duration, BUILTINS[workload], clients)


def with_tablespaces(
    options: DatasetOptions, servers: Sequence[ServerPlan], ctx: Context
) -> list[ServerPlan]:
    """The servers with the settings the dataset needs (temp_tablespaces): tablespaces are made
    in managed clusters (here or on their hosts: the directories are the server's host's), and
    the plan's own temp_tablespaces would fight the temporary files' directory."""
    if not options.tablespaces:
        return list(servers)
    for server in servers:
        if not server.managed:
            raise ctx.fail(
                "dataset",
                f"tablespaces are made in managed servers; server {server.name} is external "
                "(a dsn): remove the tablespace keys or let pgbenchlab run that server",
            )
        if any(k == TEMP_SETTING for k, _ in server.settings) and options.temp_tablespaces:
            raise ctx.fail(
                f"server {server.name}: settings.{TEMP_SETTING}",
                "is set by [dataset] temp_tablespaces; remove one of them",
            )
    added = options.server_settings()
    return [replace(s, settings=tuple(sorted(s.settings + added))) for s in servers]


def check_temp_axis(
    options: DatasetOptions,
    matrix: Mapping[str, Any],
    server_axes: Mapping[str, Mapping[str, Any]],
    ctx: Context,
) -> None:
    """A setting axis over temp_tablespaces would fight [dataset] temp_tablespaces (and name
    tablespaces the campaign does not make)."""
    if not options.temp_tablespaces:
        return
    places = [("matrix.setting", matrix)] + [
        (f"server {name}: setting", axes) for name, axes in server_axes.items()
    ]
    for where, axes in places:
        if TEMP_SETTING in (axes.get("setting") or {}):
            raise ctx.fail(
                f"{where}.{TEMP_SETTING}",
                "is set by [dataset] temp_tablespaces; remove one of them",
            )


def check_dsn(value: Any, ctx: Context, key: str) -> None:
    """A libpq connection string that parses, with one port number (its own or PGPORT). Its
    text is never echoed: it may hold a password."""
    if not isinstance(value, str):
        raise ctx.fail(key, 'must be a connection string such as "host=db1 dbname=bench"')
    try:
        params = pg_conninfo.conninfo_to_dict(value)
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "cannot be parsed"
        reason = _hide_tokens(reason, words=not _has_password(value))
        raise ctx.fail(key, f"invalid connection string: {reason}") from None
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ctx.fail(key, f"port {port!r} is not a port number: give one number, 1 to 65535")


def _hide_tokens(text: str, *, words: bool) -> str:
    """libpq quotes the offending token, which may be part of a password: only single
    characters stay, and names (words) when the string holds no password."""
    keep = r"\w+|\W" if words else r"\W"
    return re.sub(r'"([^"]*)"', lambda m: m[0] if re.fullmatch(keep, m[1]) else '"…"', text)


def _has_password(dsn: str) -> bool:
    return "password" in dsn.lower() or re.search(r"://[^/@]*:[^/@]*@", dsn) is not None


def external_connection(server: ServerPlan, layer: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """An external server connects as its dsn says: the connection axis defaults to that
    kind, and any other kind asked of it is refused."""
    assert server.dsn is not None
    kind = dsn_connection(server.dsn)
    for asked in as_list(layer.get("connection", kind)):
        if asked == "pgbouncer":
            raise ctx.fail(
                "connection",
                f'server {server.name}: "pgbouncer" needs a managed server (the pooler is '
                "started beside the server pgbenchlab runs); an external one connects as its "
                "dsn says",
            )
        if asked != kind and asked in CONNECTIONS:
            raise ctx.fail(
                "connection",
                f'server {server.name}: "{asked}" cannot be had from its dsn, which connects '
                f"over {kind}"
                f"{_KIND_NEEDS[asked]}; an external server connects as its dsn says",
            )
    return {**layer, "connection": layer.get("connection", kind)}


_KIND_NEEDS = {
    "socket": " (a socket needs host = a directory)",
    "tcp": " (tcp needs a host name or address and an sslmode that does not require TLS)",
    "tls": " (tls needs a host name or address and sslmode = require, verify-ca or verify-full)",
}


def dsn_connection(dsn: str) -> str:
    """socket | tcp | tls: how libpq connects with this dsn (and libpq's environment)."""
    params = pg_conninfo.conninfo_to_dict(dsn)
    env = {k: os.environ.get(f"PG{k.upper()}") for k in ("host", "hostaddr", "sslmode")}
    host = str(params.get("hostaddr") or env["hostaddr"] or params.get("host") or env["host"] or "")
    if not host or host.startswith(("/", "@")):
        return "socket"
    sslmode = str(params.get("sslmode") or env["sslmode"] or "prefer")
    return "tls" if sslmode in TLS_SSLMODES else "tcp"
