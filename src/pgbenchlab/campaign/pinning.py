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


def check_cpus(plan: Plan, host_of: Callable[[str | None], Host]) -> None:
    """Every CPU list of the plan names CPUs its host has (a server's, or pgbench's: the load
    generator's or this machine), and that host can pin."""
    generator = plan.pgbench_hosts[0] if plan.pgbench_hosts else None
    listed = [(f"server {s.name} cpus", s.cpus, s.host) for s in plan.servers if s.cpus]
    if plan.pgbench_cpus:
        listed.append(("[pgbench] cpus", plan.pgbench_cpus, generator))
    for what, cpus, where in listed:
        host = host_of(where)
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
