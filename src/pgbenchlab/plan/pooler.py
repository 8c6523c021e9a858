"""The plan's `[pooler]`: how the managed PgBouncer of `connection = "pgbouncer"` runs, and what
the plan alone can tell cannot work through it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pgbenchlab.plan.records import (
    DEFAULT_MAX_CLIENT_CONN,
    DEFAULT_POOL_SIZE,
    PoolerPlan,
    RunSpec,
    Workload,
)
from pgbenchlab.plan.values import Context, choice, cpu_list, plan_path, positive_int

POOLER = "pgbouncer"  # the connection kind that goes through the managed pooler
POOL_MODES = ("session", "transaction", "statement")
POOLER_KEYS = ("pool_mode", "pool_size", "max_client_conn", "cpus", "install")
# Connections of pgbenchlab's own through the pooler beside pgbench's (its admin console).
OWN_CONNECTIONS = 2
# Builtins whose transaction is a BEGIN … END block: statement pooling refuses them.
BLOCK_BUILTINS = frozenset({"tpcb-like", "simple-update"})
_BLOCK = re.compile(r"^\s*(begin|start\s+transaction)\b", re.I | re.M)


def parse_pooler(value: Any, ctx: Context, base: Path) -> tuple[PoolerPlan, bool]:
    """The [pooler] table (defaults when absent), and whether it set max_client_conn."""
    if value is None:
        return PoolerPlan(), False
    if not isinstance(value, dict):
        raise ctx.fail("pooler", "must be a table")
    ctx.check_keys(value, POOLER_KEYS, "pooler")
    install = value.get("install")
    if install is not None and not isinstance(install, str):
        raise ctx.fail("pooler.install", f"must be a path to pgbouncer; got {install!r}")
    return PoolerPlan(
        choice(value.get("pool_mode", "transaction"), POOL_MODES, ctx, "pooler.pool_mode"),
        positive_int(value.get("pool_size", DEFAULT_POOL_SIZE), ctx, "pooler.pool_size"),
        positive_int(
            value.get("max_client_conn", DEFAULT_MAX_CLIENT_CONN), ctx, "pooler.max_client_conn"
        ),
        cpu_list(value["cpus"], ctx, "pooler.cpus") if "cpus" in value else None,
        None if install is None else plan_path(install, base),
    ), "max_client_conn" in value


def check_pooled(
    pooler: PoolerPlan,
    given: bool,
    specs: tuple[RunSpec, ...],
    ctx: Context,
) -> PoolerPlan:
    """The runs through the pooler (beside managed servers, here or on their hosts): with room
    for their clients (max_client_conn, when not given: enough for the largest cell), and a
    workload a statement pool can run; the pooler as the campaign starts it."""
    pooled = [s for s in specs if s.options.connection == POOLER]
    if not pooled:
        return pooler
    most = max(s.clients for s in pooled) + OWN_CONNECTIONS
    if given and pooler.max_client_conn < most:
        raise ctx.fail(
            "pooler.max_client_conn",
            f"{pooler.max_client_conn} is fewer than the {most} client connections of the "
            f"largest pgbouncer cell ({most - OWN_CONNECTIONS} clients and pgbenchlab's "
            f"{OWN_CONNECTIONS}): raise it or remove it",
        )
    if pooler.pool_mode == "statement":
        for spec in pooled:
            if has_transaction_block(spec.workload):
                raise ctx.fail(
                    "pooler.pool_mode",
                    f"workload {spec.workload.name} runs transaction blocks (BEGIN … END), "
                    'which a "statement" pool refuses: use pool_mode = "transaction" or a '
                    "workload of single statements (select-only)",
                )
    if given:
        return pooler
    return PoolerPlan(
        pooler.pool_mode,
        pooler.pool_size,
        max(DEFAULT_MAX_CLIENT_CONN, most),
        pooler.cpus,
        pooler.install,
    )


def has_transaction_block(workload: Workload) -> bool:
    """Whether a script of the workload opens a transaction block."""
    return any(
        script.name in BLOCK_BUILTINS
        if script.kind == "builtin"
        else bool(_BLOCK.search(script.text))
        for script in workload.scripts
    )
