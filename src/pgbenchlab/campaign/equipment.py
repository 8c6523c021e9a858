"""What a campaign runs with: the plan's pgbench, its servers and the executor that starts
pgbench (here or on a load generator host), checked before anything starts, with the
connections to the plan's hosts open for as long as the campaign runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgbenchlab import builds, installs
from pgbenchlab.builds import prebuilt
from pgbenchlab.campaign.client import PgbenchClient, choose_pgbench
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import Executor, GeneratorExecutor, LocalExecutor
from pgbenchlab.campaign.generators import SEEDS_SINCE, FleetExecutor
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.campaign.preflight import check_before_start
from pgbenchlab.campaign.servers import Servers
from pgbenchlab.errors import PlanError
from pgbenchlab.plan import Plan
from pgbenchlab.telemetry.profiler import check_perf_for_pgbench
from pgbenchlab.tunables import KernelTunables


@contextmanager
def equipped(
    plan: Plan, results_dir: Path, built: list[installs.Installation] | None
) -> Iterator[tuple[PgbenchClient, Servers, Executor]]:
    """The plan's pgbench, servers and executor, checked (its builds made unless the caller
    made them, and held in use until the block ends, so no prune deletes them); the
    connections to its hosts stay open until the block ends."""
    with builds.using():
        if built is None:
            built = builds.ensure_all(plan.needed_builds)
        with _equipped(plan, results_dir, built) as kit:
            yield kit


@contextmanager
def _equipped(
    plan: Plan, results_dir: Path, built: list[installs.Installation]
) -> Iterator[tuple[PgbenchClient, Servers, Executor]]:
    found = installs.discover() + built + [prebuilt.ensure(b) for b in plan.needed_binaries]
    hosts = CampaignHosts(plan)
    try:
        hosts.check()
        executor: Executor
        if len(plan.pgbench_hosts) > 1:
            pgbench = fleet_pgbench(plan, hosts)
            generators = [(name, hosts.get(name)) for name in plan.pgbench_hosts]
            executor = FleetExecutor(
                generators, pgbench_cpus=plan.pgbench_cpus, keep_logs=plan.pgbench_keep_logs
            )
        elif plan.pgbench_hosts:
            generator = plan.pgbench_hosts[0]
            pgbench = choose_pgbench(plan, hosts.installations(generator), hosts.get(generator))
            executor = GeneratorExecutor(
                hosts.get(generator),
                pgbench_cpus=plan.pgbench_cpus,
                keep_logs=plan.pgbench_keep_logs,
            )
            if plan.profiles_pgbench:
                check_perf_for_pgbench(hosts.get(generator))
        else:
            pgbench = choose_pgbench(plan, found)
            executor = LocalExecutor(pgbench_cpus=plan.pgbench_cpus)
        servers = Servers(plan, results_dir, found, hosts)
        servers.validate()
        yield pgbench, servers, executor
    finally:
        hosts.close()


@contextmanager
def prepared(
    plan: Plan, results_dir: Path, built: list[installs.Installation] | None, reporter: Reporter
) -> Iterator[tuple[PgbenchClient, Servers, Executor, KernelTunables]]:
    """What a campaign (`run`, `capacity`) starts with, checked before any run: what
    `check_before_start` refuses (sources, compilers, perf, the kernel tunables); the plan's
    pgbench, servers and executor (`equipped`); then the tunables a killed campaign left
    changed put back, the journal held for this campaign's, and every planned value tried
    (`try_values`)."""
    check_before_start(plan)
    tunables = KernelTunables(plan.sysctl_names)
    with equipped(plan, results_dir, built) as (pgbench, servers, executor):
        repaired = tunables.repair()
        if repaired:
            put_back = ", ".join(f"{k} = {v}" for k, v in sorted(repaired.items()))
            reporter.note(f"restored the kernel tunables a killed campaign had changed: {put_back}")
        try:
            tunables.try_values(pair for spec in plan.specs for pair in spec.sysctl)
            yield pgbench, servers, executor, tunables
        finally:
            tunables.restore()


def fleet_pgbench(plan: Plan, hosts: CampaignHosts) -> PgbenchClient:
    """The pgbench every load generator runs: the same version at the same path on each (one
    argv for all), 11 or later (--random-seed)."""
    chosen = {
        name: choose_pgbench(plan, hosts.installations(name), hosts.get(name))
        for name in plan.pgbench_hosts
    }
    first = next(iter(chosen.values()))
    for name, client in chosen.items():
        if (client.binary, client.version) != (first.binary, first.version):
            raise PlanError(
                f"{plan.path}: the load generators need the same pgbench at the same path; "
                f"{plan.pgbench_hosts[0]} has {first.binary} ({first.version_text.strip()}), "
                f"{name} has {client.binary} ({client.version_text.strip()})"
            )
    if first.version.major < SEEDS_SINCE:
        raise PlanError(
            f"{plan.path}: several load generators need pgbench 11 or later (--random-seed); "
            f"theirs is {first.version_text.strip()}: choose a newer [pgbench] install"
        )
    return first
