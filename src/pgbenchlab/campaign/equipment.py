"""What a campaign runs with: the plan's pgbench, its servers and the executor that starts
pgbench (here or on a load generator host), made once `preflight`'s checks pass, with the
connections to the plan's hosts open for as long as the campaign runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pgbenchlab import builds, installs
from pgbenchlab.builds import prebuilt
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import Executor, GeneratorExecutor, LocalExecutor
from pgbenchlab.campaign.generators import FleetExecutor
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.campaign.preflight import (
    CheckOutcome,
    Readiness,
    check_before_start,
    check_equipment,
    completed,
    first_pass,
    run_checks,
)
from pgbenchlab.campaign.script_trial import TRIAL
from pgbenchlab.campaign.servers import Servers
from pgbenchlab.errors import UserError
from pgbenchlab.installs import BINARIES_PREFIX, BUILD_PREFIX
from pgbenchlab.plan import Plan
from pgbenchlab.tunables import KernelTunables


@contextmanager
def equipped(
    plan: Plan,
    results_dir: Path,
    built: list[installs.Installation] | None,
    first: list[CheckOutcome] | None = None,
    say: Callable[[str], None] | None = None,
) -> Iterator[tuple[PgbenchClient, Servers, Executor]]:
    """The plan's pgbench, servers and executor, once the checks the first pass (first) left
    pass (without first: every check): its builds made unless the caller made them (and held
    in use until the block ends, so no prune deletes them), its binaries fetched and its hosts
    reached (a download's progress told to `say`); the connections to its hosts stay open
    until the block ends."""
    with builds.using():
        if built is None:
            built = builds.ensure_all(plan.needed_builds)
        fetched = [prebuilt.ensure(b, say=say) for b in plan.needed_binaries]
        found = installs.discover() + built + fetched
        hosts = CampaignHosts(plan)
        try:
            servers = Servers(plan, results_dir, found, hosts)
            ready = Readiness(plan, servers=servers)
            check_equipment(ready, first)
            hosts.stop_leftovers()
            yield ready.pgbench(), servers, executor_for(plan, hosts)
        finally:
            hosts.close()


def checked(
    plan: Plan, results_dir: Path, say: Callable[[str], None] | None = None
) -> list[CheckOutcome]:
    """`run --check`: every check as far as it goes with nothing built, started or changed:
    the plan's hosts reached, its prebuilt binaries fetched (the campaign needs them; a fetch
    that fails is that server's problem), its builds taken from the cache when made (those
    not made are left, with what needs them); then its custom scripts tried on a throwaway
    dataset (`script_trial`)."""
    first = first_pass(plan)
    with builds.using():
        made, waiting = [], {}
        for recipe in plan.needed_builds:
            found = builds.cached(recipe)
            if found is None:
                waiting[f"{BUILD_PREFIX}{recipe.name}"] = f"build {recipe.name} (not made yet)"
            else:
                made.append(found)
        fetched, unavailable = [], {}
        for spec in plan.needed_binaries:
            try:
                fetched.append(prebuilt.ensure(spec, say=say))
            except UserError as exc:
                unavailable[f"{BINARIES_PREFIX}{spec}"] = str(exc)
        hosts = CampaignHosts(plan)
        try:
            servers = Servers(plan, results_dir, installs.discover() + made + fetched, hosts)
            ready = Readiness(plan, servers=servers, waiting=waiting, unavailable=unavailable)
            outcomes = completed(ready, first)
            return outcomes + run_checks(ready, (TRIAL,), outcomes)
        finally:
            hosts.close()


def executor_for(plan: Plan, hosts: CampaignHosts) -> Executor:
    """What starts pgbench: here, on the load generator host, or split across several."""
    if len(plan.pgbench_hosts) > 1:
        generators = [(name, hosts.get(name)) for name in plan.pgbench_hosts]
        return FleetExecutor(
            generators,
            pgbench_cpus=plan.pgbench_cpus,
            keep_logs=plan.pgbench_keep_logs,
            pgbench_numa=plan.pgbench_numa,
        )
    if plan.pgbench_hosts:
        return GeneratorExecutor(
            hosts.get(plan.pgbench_hosts[0]),
            pgbench_cpus=plan.pgbench_cpus,
            keep_logs=plan.pgbench_keep_logs,
            pgbench_numa=plan.pgbench_numa,
        )
    return LocalExecutor(pgbench_cpus=plan.pgbench_cpus, pgbench_numa=plan.pgbench_numa)


@contextmanager
def prepared(
    plan: Plan, results_dir: Path, built: list[installs.Installation] | None, reporter: Reporter
) -> Iterator[tuple[PgbenchClient, Servers, Executor, KernelTunables]]:
    """What a campaign (`run`, `capacity`) starts with, checked before any run: `preflight`'s
    checks (every problem at once; what needs the builds, binaries or hosts once they are
    there), the plan's pgbench, servers and executor (`equipped`); then the tunables a killed
    campaign left changed put back, the journal held for this campaign's, and every planned
    value tried (`try_values`)."""
    first = check_before_start(plan)
    tunables = KernelTunables(plan.sysctl_names)
    with equipped(plan, results_dir, built, first, reporter.note) as (pgbench, servers, executor):
        repaired = tunables.repair()
        if repaired:
            put_back = ", ".join(f"{k} = {v}" for k, v in sorted(repaired.items()))
            reporter.note(f"restored the kernel tunables a killed campaign had changed: {put_back}")
        try:
            tunables.try_values(pair for spec in plan.specs for pair in spec.sysctl)
            yield pgbench, servers, executor, tunables
        finally:
            tunables.restore()
