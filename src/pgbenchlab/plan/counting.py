"""What a counted run needs (`count = "instructions"`): the server runs under callgrind, so it
is managed, serves only counted runs, and each run is a fixed number of transactions per client
at full speed (a simulator's throughput is no time base: no -T, no rate, no latency limit)."""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.plan.records import GroupPlan, RunSpec, ServerPlan
from pgbenchlab.plan.values import Context


def check_counting(
    specs: Sequence[RunSpec],
    servers: Sequence[ServerPlan],
    groups: Sequence[GroupPlan],
    ctx: Context,
) -> None:
    """Refuse, with the fix, a counted run that cannot be counted."""
    by_name = {s.name: s for s in servers}
    grouped = {g.name for g in groups}
    for spec in (s for s in specs if s.counted):
        where = f"count: server {spec.server}"
        if spec.server in grouped:
            raise ctx.fail("count", f"group {spec.server}: a group's runs are not counted")
        if not by_name[spec.server].managed:
            raise ctx.fail(
                "count", f"{where} is external (dsn): only a managed server runs under callgrind"
            )
        if spec.options.transactions is None:
            raise ctx.fail(
                "count", f"{where}: give `transactions` (per client, -t), not a duration (-T)"
            )
        if spec.options.rate is not None or spec.options.latency_limit_ms is not None:
            raise ctx.fail("count", f"{where}: counted runs take no rate or latency_limit")
        if spec.profiled:
            raise ctx.fail("count", f"{where}: a counted run is not profiled by perf as well")
    counted = {s.server for s in specs if s.counted}
    mixed = sorted(counted & {s.server for s in specs if not s.counted})
    if mixed:
        raise ctx.fail(
            "count",
            f"server {mixed[0]} has counted and timed runs: it runs under callgrind for all or "
            'none; give it `count = "instructions"` in its [[server]] table',
        )
