"""What a campaign runs with: the plan's pgbench, its servers and the executor that starts
pgbench (here or on a load generator host), checked before anything starts, with the
connections to the plan's hosts open for as long as the campaign runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgbenchlab import builds, installs
from pgbenchlab.campaign.client import PgbenchClient, choose_pgbench
from pgbenchlab.campaign.executor import Executor, GeneratorExecutor, LocalExecutor
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.campaign.servers import Servers
from pgbenchlab.plan import Plan
from pgbenchlab.telemetry.profiler import check_perf_for_pgbench


@contextmanager
def equipped(
    plan: Plan, results_dir: Path, built: list[installs.Installation] | None
) -> Iterator[tuple[PgbenchClient, Servers, Executor]]:
    """The plan's pgbench, servers and executor, checked (its builds made unless the caller
    made them); the connections to its hosts stay open until the block ends."""
    if built is None:
        built = builds.ensure_all(plan.needed_builds)
    found = installs.discover() + built
    hosts = CampaignHosts(plan)
    try:
        hosts.check()
        executor: Executor
        if plan.pgbench_hosts:
            generator = plan.pgbench_hosts[0]
            pgbench = choose_pgbench(plan, hosts.installations(generator), hosts.get(generator))
            executor = GeneratorExecutor(hosts.get(generator), pgbench_cpus=plan.pgbench_cpus)
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
