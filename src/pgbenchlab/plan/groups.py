"""The [[server_group]] tables: servers a run drives together.

A group's run gives every member the whole cell (the same workload, scale, clients, threads and
rate each) and is stored once under the group's name. Its cells come from the matrix, the
members' own axes (which must agree: every member runs the same cell) and the group's own.
"""

from __future__ import annotations

from typing import Any

from pgbenchlab.plan.records import GroupPlan, RunSpec, ServerPlan
from pgbenchlab.plan.schema import AXIS_KEYS, GROUP_KEYS, SERVER_OPTIONS
from pgbenchlab.plan.values import Context, check_name, parse_bool

# tls: one authority file per run, and a group's members have two
UNSUPPORTED = {"connection": ("tls",)}


def parse_groups(
    value: Any, ctx: Context, servers: list[ServerPlan], server_axes: dict[str, dict[str, Any]]
) -> tuple[tuple[GroupPlan, ...], dict[str, dict[str, Any]]]:
    """The groups, and each one's axes (its members' shared ones, then its own)."""
    if value is None:
        return (), {}
    if not isinstance(value, list):
        raise ctx.fail("server_group", "must be one or more [[server_group]] tables")
    known = [s.name for s in servers]
    groups: list[GroupPlan] = []
    axes: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(value):
        key = f"server_group[{i}]"
        if not isinstance(item, dict):
            raise ctx.fail(key, "must be a table")
        ctx.check_keys(item, GROUP_KEYS, key)
        name = check_name(item.get("name"), ctx, f"{key}.name")
        if name in known or any(g.name == name for g in groups):
            raise ctx.fail(f"{key}.name", f'"{name}" is already the name of a server or group')
        members = _members(item.get("servers"), known, ctx, f"{key}.servers")
        shared = _shared_axes(members, server_axes, ctx, f"{key}.servers")
        solo = parse_bool(item.get("solo", True), ctx, f"{key}.solo")
        groups.append(GroupPlan(name, members, solo))
        axes[name] = shared | {k: v for k, v in item.items() if k in AXIS_KEYS}
    return tuple(groups), axes


def _members(value: Any, known: list[str], ctx: Context, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail(key, 'must be a list of server names, e.g. ["a", "b"]')
    if len(value) < 2:
        raise ctx.fail(key, "a group drives two or more servers; a single one is a [[server]]")
    for name in value:
        if name not in known:
            listed = ", ".join(known)
            raise ctx.fail(key, f'names server "{name}", which no [[server]] defines ({listed})')
    if len(set(value)) != len(value):
        raise ctx.fail(key, "names a server twice: each member runs once per run")
    return tuple(value)


def _shared_axes(
    members: tuple[str, ...], server_axes: dict[str, dict[str, Any]], ctx: Context, key: str
) -> dict[str, Any]:
    """The members' own axes, which must agree (every member runs the same cell); their own
    options (profile) stay with their runs alone."""

    def axes(name: str) -> dict[str, Any]:
        return {k: v for k, v in server_axes[name].items() if k not in SERVER_OPTIONS}

    first = axes(members[0])
    for name in members[1:]:
        other = axes(name)
        for axis in sorted(set(first) | set(other)):
            if first.get(axis) != other.get(axis):
                raise ctx.fail(
                    key,
                    f"servers {members[0]} and {name} differ in {axis} "
                    f"({first.get(axis, 'unset')!r} vs {other.get(axis, 'unset')!r}): a group "
                    f"runs the same cell on every member; give them the same {axis} or set it "
                    "in the group",
                )
    return dict(first)


def check_group_specs(
    specs: tuple[RunSpec, ...], groups: tuple[GroupPlan, ...], ctx: Context
) -> None:
    """What a group's run cannot do: be profiled (perf follows one server), connect with TLS."""
    names = {g.name for g in groups}
    for spec in specs:
        if spec.server not in names:
            continue
        if spec.options.profile != "off":
            raise ctx.fail("profile", f"group {spec.server}: a group's runs are not profiled")
        for option, values in UNSUPPORTED.items():
            if (value := getattr(spec.options, option)) in values:
                raise ctx.fail(
                    option, f'group {spec.server}: "{value}" is not available for a group\'s runs'
                )


def units(servers: list[ServerPlan], groups: tuple[GroupPlan, ...]) -> dict[str, list[ServerPlan]]:
    """What the matrix expands over: each server that runs alone, then each group (its
    members)."""
    by_name = {s.name: s for s in servers}
    hidden = {m for g in groups if not g.solo for m in g.servers}
    alone = {s.name: [s] for s in servers if s.name not in hidden}
    return alone | {g.name: [by_name[m] for m in g.servers] for g in groups}
