"""CPU pinning checked before a campaign starts: the plan's CPU lists against the host (CPUs it
lacks, no tool to pin with). The server and pgbench are started pinned (`hosts.pinned`); what
the kernel then allowed each process is read back during every run by the telemetry
(`telemetry.affinity`) and stored with it."""

from __future__ import annotations

from collections.abc import Callable

from pgbenchlab import cpusets
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
