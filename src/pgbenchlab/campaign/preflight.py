"""What a campaign refuses before anything starts, from this machine alone: nothing is built,
fetched, started or connected to. `run` and `run --dry-run` both call `check_before_start`, so
a dry run refuses what the run would."""

from __future__ import annotations

from pgbenchlab import builds
from pgbenchlab.plan import Plan
from pgbenchlab.telemetry.profiler import check_perf
from pgbenchlab.tunables import KernelTunables


def check_before_start(plan: Plan) -> None:
    """UserError naming the fix for the first of: a build's compiler, build system, patches or
    source (a missing file, repository or ref), perf for profiled runs, the kernel tunables of
    [matrix.sysctl] (root, and each one existing here)."""
    for recipe in plan.needed_builds:
        builds.check(recipe)
    if any(spec.profiled for spec in plan.specs):
        check_perf()
    KernelTunables(plan.sysctl_names).check()
