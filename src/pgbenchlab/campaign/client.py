"""Which pgbench a campaign runs: the plan's [pgbench] install (here, on its load generator
host, or the same one on each of several), its version, and the options that version lacks
(refused before anything starts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import installs
from pgbenchlab.campaign.generators import SEEDS_SINCE
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation
from pgbenchlab.invocation import command
from pgbenchlab.plan import Plan
from pgbenchlab.records.version import PgVersion, parse_version
from pgbenchlab.telemetry.profiler import check_perf_for_pgbench

RETRIES_SINCE = (15,)  # pgbench --max-tries


@dataclass(frozen=True)
class PgbenchClient:
    install: Installation
    version: PgVersion
    version_text: str

    @property
    def binary(self) -> Path:
        return self.install.binary("pgbench")


def campaign_pgbench(
    plan: Plan, hosts: CampaignHosts | None, found: list[Installation]
) -> PgbenchClient:
    """The campaign's pgbench: among found (this machine's installations), or on its load
    generator host (reached: hosts) with perf there when it is profiled, or the same on each
    of several."""
    if not plan.pgbench_hosts:
        return choose_pgbench(plan, found)
    assert hosts is not None, "load generator hosts are reached first"
    if len(plan.pgbench_hosts) > 1:
        return fleet_pgbench(plan, hosts)
    generator = hosts.get(plan.pgbench_hosts[0])
    chosen = choose_pgbench(plan, hosts.installations(plan.pgbench_hosts[0]), generator)
    if plan.profiles_pgbench:
        check_perf_for_pgbench(generator)
    return chosen


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


def choose_pgbench(plan: Plan, found: list[Installation], host: Host = LOCAL_HOST) -> PgbenchClient:
    """The plan's pgbench among found, the installations of host (where it runs)."""
    if plan.pgbench_install == "newest":
        install = installs.newest_pgbench(found)
        if plan.uses_connection("tls"):  # the newest of those whose libpq has TLS, if any
            install = next((i for i in _pgbench_installs(found) if _has_tls(i, host)), install)
    else:
        install = installs.resolve(plan.pgbench_install, found, need_server=False, host=host)
    text = command.version_of(install.binary("pgbench"), host)
    version = parse_version(text)
    require_client_features(plan, version, text, install.binary("pgbench"), host)
    return PgbenchClient(install, version, text)


def require_client_features(
    plan: Plan,
    version: PgVersion,
    version_text: str,
    binary: Path | None = None,
    host: Host = LOCAL_HOST,
) -> None:
    """Refuse, before anything starts, options the campaign's pgbench does not have."""
    if version.major < RETRIES_SINCE and any(s.options.max_tries != 1 for s in plan.specs):
        raise PlanError(
            f"{plan.path}: max_tries needs pgbench 15 or later; this campaign's pgbench is "
            f"{version_text.strip()}: remove max_tries or choose a newer [pgbench] install"
        )
    needs = plan.dataset.needs_pgbench()
    if needs is not None and version.major < needs[0]:
        since = ".".join(str(n) for n in needs[0])
        raise PlanError(
            f"{plan.path}: dataset.{needs[1]} needs pgbench {since} or later; this campaign's "
            f"pgbench is {version_text.strip()}: remove it or choose a newer [pgbench] install"
        )
    if plan.uses_connection("tls") and binary and not command.supports_tls(binary, host):
        raise PlanError(
            f'{plan.path}: connection "tls" needs a pgbench whose libpq has TLS support; this '
            f"campaign's pgbench ({version_text.strip()}, {binary}) has none: choose another "
            "[pgbench] install"
        )


def _pgbench_installs(found: list[Installation]) -> list[Installation]:
    return [i for i in found if i.has_pgbench and not i.build]


def _has_tls(install: Installation, host: Host) -> bool:
    return command.supports_tls(install.binary("pgbench"), host)
