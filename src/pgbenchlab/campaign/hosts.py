"""The campaign's [[host]]s: each reached over SSH once, checked before anything starts (an
unknown host key, a refused login, an unreachable address: exit 2 with the fix; one of
`preflight`'s checks), then the detached processes a killed campaign left there stopped,
their installations and login account found, and every connection closed at the end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import installs
from pgbenchlab.errors import HostError
from pgbenchlab.hosts import LOCAL_HOST, Host, RemoteHost, SshTarget
from pgbenchlab.installs import Installation
from pgbenchlab.osuser import OsAccount
from pgbenchlab.plan import HostPlan, Plan, RunSpec, load
from pgbenchlab.results import RunHost
from pgbenchlab.telemetry.machine import machine_facts

LOCAL = "local"  # the machine that runs the campaign, in stored run hosts


def remote_host(plan: HostPlan) -> RemoteHost:
    return RemoteHost(SshTarget(plan.name, plan.ssh, plan.port, plan.identity, plan.known_hosts))


def load_plan(path: Path) -> Plan:
    """The plan a campaign runs: threads = "auto" counts each load generator host's CPUs
    (reached to ask them) where pgbench runs on [pgbench] hosts, unpinned."""
    loaded = load(path)
    if not loaded.counts_generator_cpus:
        return loaded
    return load(path, generator_cpus=generator_cpus(loaded))


def generator_cpus(loaded: Plan) -> tuple[int, ...]:
    """The CPUs of each [pgbench] host, in plan order (HostError when one cannot be used)."""
    counts = []
    for name in loaded.pgbench_hosts:
        host = remote_host(loaded.host(name))
        try:
            host.check()
            counts.append(host.cpu_count() or 1)
        finally:
            host.close()
    return tuple(counts)


def used_hosts(plan: Plan) -> list[str]:
    """The hosts some server or load generator runs on, in plan order."""
    named = {s.host for s in plan.servers} | set(plan.pgbench_hosts)
    return [h.name for h in plan.hosts if h.name in named]


class CampaignHosts:
    """The plan's hosts by name; None names this machine."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.remote = {h.name: remote_host(h) for h in plan.hosts}
        self._installs: dict[str, list[Installation]] = {}
        self._accounts: dict[str, OsAccount] = {}

    @property
    def used(self) -> list[str]:
        return used_hosts(self.plan)

    def get(self, name: str | None) -> Host:
        return LOCAL_HOST if name is None else self.remote[name]

    def check(self, name: str) -> None:
        """Connect to a used host (HostError otherwise) and refuse a root login where a
        managed server would run."""
        self.remote[name].check()
        if managed_servers(self.plan, name):
            check_login(self.plan, name, self.account(name))

    def stop_leftovers(self) -> None:
        """Stop what a killed campaign left running on the used hosts (once they are checked)."""
        for name in self.used:
            self.remote[name].stop_leftovers()

    def installations(self, name: str) -> list[Installation]:
        if name not in self._installs:
            self._installs[name] = installs.discover_on(self.remote[name])
        return self._installs[name]

    def account(self, name: str) -> OsAccount:
        """The SSH login there: managed servers run as it."""
        if name not in self._accounts:
            self._accounts[name] = login_account(self.remote[name])
        return self._accounts[name]

    def close(self) -> None:
        for host in self.remote.values():
            host.close()


def login_account(host: RemoteHost) -> OsAccount:
    """The SSH login's account there: name, user and group ids."""
    ids = host.run(["sh", "-c", "id -u; id -g"], timeout=30).stdout.split()
    if len(ids) != 2:
        raise HostError("cannot read the login's user and group ids", where=host.name)
    return OsAccount(host.user, int(ids[0]), int(ids[1]))


def managed_servers(plan: Plan, name: str) -> list[str]:
    return [s.name for s in plan.servers if s.host == name and s.managed]


def check_login(plan: Plan, name: str, account: OsAccount) -> None:
    """A managed server runs as the SSH login, and PostgreSQL refuses to run as root."""
    if account.uid == 0:
        servers = ", ".join(managed_servers(plan, name))
        raise HostError(
            f"the SSH login is root ({plan.host(name).ssh}) and PostgreSQL refuses to run as "
            f"root, so server {servers} cannot run there: log in as an unprivileged account "
            '(ssh = "bench@…"), which the cluster will belong to',
            where=f"host {name}",
        )


def run_hosts(plan: Plan, spec: RunSpec) -> tuple[RunHost, ...]:
    """Which hosts ran what in this run: its server's (a group's: each member's, once per
    host) and its load generators'."""

    def named(role: str, name: str | None) -> RunHost:
        if name is None:
            return RunHost(role, LOCAL)
        return RunHost(role, name, plan.host(name).ssh.rpartition("@")[2])

    generators = plan.pgbench_hosts or (None,)
    servers = dict.fromkeys(plan.server(m).host for m in plan.members(spec.server))
    return (
        *(named("server", s) for s in servers),
        *(named("pgbench", g) for g in generators),
    )


@dataclass(frozen=True)
class HostSurvey:
    """What `pgbenchlab hosts` tells about one host."""

    name: str
    ssh: str
    problem: str | None  # why it cannot be used (with the fix); None: usable
    roles: tuple[str, ...] = ()  # what the plan runs there: "server pg", "pgbench"
    os: str | None = None
    kernel: str | None = None
    cpus: int | None = None
    memory_bytes: int | None = None
    installs: tuple[Installation, ...] = ()
    clock_offset_s: float | None = None  # its clock minus this machine's
    clock_uncertainty_s: float | None = None  # half the round trip of the best probe
    reachable: bool = True  # the login worked (a host may be reached, yet not usable)


def survey(plan: Plan) -> list[HostSurvey]:
    """Every [[host]] of the plan: reachable or why not, and what it is."""
    surveys = []
    for host_plan in plan.hosts:
        host = remote_host(host_plan)
        roles = host_roles(plan, host_plan.name)
        try:
            host.check()
            if managed_servers(plan, host_plan.name):
                check_login(plan, host_plan.name, login_account(host))
            facts = machine_facts(host)
            offset, uncertainty = clock_offset(host)
            surveys.append(
                HostSurvey(
                    host_plan.name,
                    host_plan.ssh,
                    None,
                    roles,
                    facts.get("os"),
                    facts.get("kernel"),
                    facts.get("cpus"),
                    facts.get("memory_bytes"),
                    tuple(installs.discover_on(host)),
                    offset,
                    uncertainty,
                )
            )
        except (HostError, OSError) as exc:
            surveys.append(
                HostSurvey(host_plan.name, host_plan.ssh, str(exc), roles, reachable=host.logged_in)
            )
        finally:
            host.close()
    return surveys


def host_roles(plan: Plan, name: str) -> tuple[str, ...]:
    """What the plan runs on a host: its servers (managed or external) and pgbench."""
    roles = [
        f"server {s.name}" + ("" if s.managed else " (external)")
        for s in plan.servers
        if s.host == name
    ]
    return (*roles, *(["pgbench"] if name in plan.pgbench_hosts else []))


def clock_offset(host: Host, probes: int = 5) -> tuple[float, float]:
    """The host's clock minus this machine's, from the probe with the shortest round trip
    (NTP's way), and its uncertainty: half that round trip."""
    before, there, after = min(host.clock_readings(probes), key=lambda r: r[2] - r[0])
    half_trip = (after - before) / 2
    return there - (before + half_trip), half_trip
