"""What `[dataset] reset = "snapshot"` needs: a data directory pgbenchlab owns and can reach,
so each server it restores is managed and on this machine (images through a [[host]] are not
taken: the plan check says so instead)."""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.plan.dataset import SNAPSHOT, DatasetOptions, run_reset
from pgbenchlab.plan.records import GroupPlan, RunSpec, ServerPlan
from pgbenchlab.plan.values import Context


def check_reset(
    specs: Sequence[RunSpec],
    servers: Sequence[ServerPlan],
    groups: Sequence[GroupPlan],
    dataset: DatasetOptions,
    ctx: Context,
) -> None:
    """Refuse, with the fix, a snapshot reset of a server whose data directory it cannot
    image: an external one, or one on another host."""
    by_name = {s.name: s for s in servers}
    placed = [d for d in (dataset.tablespace, dataset.index_tablespace) if d is not None]
    if dataset.reset == SNAPSHOT and placed:
        raise ctx.fail(
            "dataset.reset",
            f'"snapshot" images the data directory, not the tablespace in {placed[0]}: use '
            'reset = "reuse" or "init" with tablespaces',
        )
    for name in restored_servers(specs, groups, dataset):
        server = by_name[name]
        if not server.managed:
            raise ctx.fail(
                "dataset.reset",
                f'"snapshot" restores a managed server\'s data directory: server {name} is '
                'external (dsn); use reset = "reuse" or "init"',
            )
        if server.host is not None:
            raise ctx.fail(
                "dataset.reset",
                f'"snapshot" images data directories on this machine only: server {name} runs '
                f'on [[host]] {server.host}; use reset = "reuse" or "init"',
            )


def restored_servers(
    specs: Sequence[RunSpec], groups: Sequence[GroupPlan], dataset: DatasetOptions
) -> list[str]:
    """The servers some run restores from a snapshot (a group's runs: each member), sorted."""
    members = {g.name: g.servers for g in groups}
    return sorted(
        {
            name
            for spec in specs
            if run_reset(dataset.reset, spec.options.reinit) == SNAPSHOT
            for name in members.get(spec.server, (spec.server,))
        }
    )
