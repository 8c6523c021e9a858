"""CPU pinning checked before a campaign starts: the plan's CPU lists against the host (CPUs it
lacks, no tool to pin with). The server and pgbench are started pinned (`hosts.pinned`); what
the kernel then allowed each process is read back during every run by the telemetry
(`telemetry.affinity`) and stored with it."""

from __future__ import annotations

from pgbenchlab import cpusets
from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import Host
from pgbenchlab.plan import Plan


def check_cpus(plan: Plan, host: Host) -> None:
    """Every CPU list of the plan names CPUs this host has, and the host can pin."""
    listed = [(f"server {s.name} cpus", s.cpus) for s in plan.servers if s.cpus]
    if plan.pgbench_cpus:
        listed.append(("[pgbench] cpus", plan.pgbench_cpus))
    if not listed:
        return
    allowed = host.allowed_cpus()
    for what, cpus in listed:
        missing = set(cpusets.parse(cpus)) - allowed
        if missing:
            raise PlanError(
                f'{what} = "{cpus}" names CPU {cpusets.text(missing)}, which this machine '
                f"lacks: it has CPU {cpusets.text(allowed)}",
                where=plan.path,
            )
    if host.pin_prefix(listed[0][1]) is None:
        raise PlanError(
            f"{listed[0][0]}: pinning needs taskset (util-linux) or numactl on {host.name}; "
            "install one or remove cpus",
            where=plan.path,
        )
