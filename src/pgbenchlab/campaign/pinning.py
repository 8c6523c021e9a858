"""CPU pinning and NUMA placement checked before a campaign starts: the plan's CPU lists and
NUMA policies against the host (CPUs or nodes it lacks, no tool to pin or place with). The
server and pgbench are started pinned and placed (`hosts.pinned`); what the kernel then allowed
each process is read back during every run by the telemetry (`telemetry.affinity`) and stored
with it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pgbenchlab import cpusets
from pgbenchlab.cpusets import NumaPolicy
from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import Host
from pgbenchlab.plan import Plan

CpuList = tuple[str, str, str | None]  # what names it, the CPU list, its host (None: here)


def cpu_lists(plan: Plan) -> list[CpuList]:
    """Every CPU list of the plan: each server's, and pgbench's (on the load generator or
    this machine)."""
    generator = plan.pgbench_hosts[0] if plan.pgbench_hosts else None
    listed = [(f"server {s.name} cpus", s.cpus, s.host) for s in plan.servers if s.cpus]
    if plan.pgbench_cpus:
        listed.append(("[pgbench] cpus", plan.pgbench_cpus, generator))
    return listed


def check_cpus(plan: Plan, host_of: Callable[[str | None], Host]) -> None:
    """Every CPU list of the plan names CPUs its host has, and that host can pin."""
    for listed in cpu_lists(plan):
        check_cpu_list(plan, listed, host_of(listed[2]))


def check_cpu_list(plan: Plan, listed: CpuList, host: Host) -> None:
    """One CPU list against its host: CPUs it has, and a tool to pin with."""
    what, cpus, where = listed
    machine = "this machine" if where is None else f"host {where}"
    allowed = host.allowed_cpus()
    missing = set(cpusets.parse(cpus)) - allowed
    if missing:
        raise PlanError(
            f'{what} = "{cpus}" names CPU {cpusets.text(missing)}, which {machine} '
            f"lacks: it has CPU {cpusets.text(allowed)}",
            where=plan.path,
        )
    if host.pin_prefix(cpus) is None:
        raise PlanError(
            f"{what}: pinning needs taskset (util-linux) or numactl on {machine}; "
            "install one or remove cpus",
            where=plan.path,
        )


NumaPlace = tuple[str, NumaPolicy, str | None]  # what names it, the policy, its host


def numa_places(plan: Plan) -> list[NumaPlace]:
    """Every NUMA policy of the plan: each server's, and pgbench's."""
    generator = plan.pgbench_hosts[0] if plan.pgbench_hosts else None
    listed = [(f"server {s.name} numa", s.numa, s.host) for s in plan.servers if s.numa]
    if plan.pgbench_numa:
        listed.append(("[pgbench] numa", plan.pgbench_numa, generator))
    return listed


# A CPU list or NUMA policy of the plan: what names it, its host (None: here), its check there.
Placement = tuple[str, str | None, Callable[[Host], None]]


def placements(plan: Plan) -> list[Placement]:
    """Every CPU list and NUMA policy of the plan, each with its check against its host."""
    found: list[Placement] = [
        (listed[0], listed[2], partial(check_cpu_list, plan, listed)) for listed in cpu_lists(plan)
    ]
    found += [(place[0], place[2], partial(check_numa, plan, place)) for place in numa_places(plan)]
    return found


def check_numa(plan: Plan, place: NumaPlace, host: Host) -> None:
    """One NUMA policy against its host: numactl there, and the nodes it names."""
    what, policy, where = place
    machine = "this machine" if where is None else f"host {where}"
    if host.numactl() is None:
        raise PlanError(
            f"{what} ({policy.text}) needs numactl on {machine}; install it (Debian: numactl) "
            "or remove numa",
            where=plan.path,
        )
    nodes = host.numa_nodes()
    if missing := policy.nodes() - nodes:
        raise PlanError(
            f"{what} names node {cpusets.text(missing)}, which {machine} lacks: it has node "
            f"{cpusets.text(nodes)}",
            where=plan.path,
        )
