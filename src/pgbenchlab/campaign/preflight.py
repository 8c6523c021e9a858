"""What is checked before a campaign starts, as one ordered list (`CHECKS`): each a named check
with what it checks and its remedy. They run in order and every problem is collected (a check
that needs an earlier one which failed is skipped, and says so); the problems are raised
together (`NotReady`: a line each with its fix, exit 2) before anything is started or changed.

Two passes over the same list. First what this machine alone can tell, with nothing built,
fetched, started or connected to (`check_before_start`: `run --dry-run` shows its outcomes;
`run` and `capacity` call it before they build). The items that need more (a build made,
prebuilt binaries fetched, a host reached, an external server connected to) are left to the
second pass (`check_equipment`, from `equipment.prepared`), which runs the checks that left some.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any

from pgbenchlab import builds, installs
from pgbenchlab.analysis.slo import Slo
from pgbenchlab.campaign.client import PgbenchClient, campaign_pgbench
from pgbenchlab.campaign.hosts import CampaignHosts, used_hosts
from pgbenchlab.campaign.pinning import check_cpu_list, cpu_lists
from pgbenchlab.campaign.servers import (
    Servers,
    check_external,
    check_settings,
    check_tls,
    data_dir_clashes,
)
from pgbenchlab.errors import NotReady, UserError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import BINARIES_PREFIX, BUILD_PREFIX, Installation
from pgbenchlab.plan import Plan, ServerPlan
from pgbenchlab.telemetry.profiler import check_perf
from pgbenchlab.tunables import KernelTunables

WHEN_IT_STARTS = "when the campaign starts"


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # a check it needs failed
    NOT_NEEDED = "not needed"  # nothing in the plan for it to check
    LATER = "checked when the campaign starts"  # every item needs what only the campaign has


WHICH = {Status.FAILED: "failed", Status.SKIPPED: "was skipped"}


@dataclass
class Readiness:
    """What the checks look at: the plan (and the capacity search's SLO), and in the second
    pass the campaign's servers, made builds, fetched binaries and reached hosts."""

    plan: Plan
    slo: Slo | None = None
    servers: Servers | None = None  # None in the first pass
    _here: list[Installation] | None = None
    _pgbench: PgbenchClient | None = None

    @property
    def hosts(self) -> CampaignHosts | None:
        return None if self.servers is None else self.servers.hosts

    def found(self) -> list[Installation]:
        """This machine's installations (in the second pass, with the builds and binaries)."""
        if self.servers is not None:
            return self.servers.found
        if self._here is None:
            self._here = installs.discover()
        return self._here

    def host(self, name: str | None) -> Host | None:
        """Where the plan names (None: this machine); None while its host is not reached."""
        if name is None:
            return LOCAL_HOST
        return None if self.hosts is None else self.hosts.get(name)

    def waits_for(self, server: ServerPlan) -> str | None:
        """What a managed server's installation waits for in the first pass (its build, its
        binaries, its host), or None: known now."""
        if self.servers is not None:
            return None
        spec = server.install or ""
        if server.host is not None:
            return f"on host {server.host}"
        if spec.startswith(BUILD_PREFIX):
            return f"build {spec.removeprefix(BUILD_PREFIX)}"
        if spec.startswith(BINARIES_PREFIX):
            return f"binaries {spec.removeprefix(BINARIES_PREFIX)}"
        return None

    def install(self, server: ServerPlan) -> Installation:
        if self.servers is not None:
            return self.servers.install(server)
        return installs.resolve(server.install or "embedded", self.found())

    def pgbench(self) -> PgbenchClient:
        """The campaign's pgbench, chosen once (the campaign runs the one checked)."""
        if self._pgbench is None:
            self._pgbench = campaign_pgbench(self.plan, self.hosts, self.found())
        return self._pgbench


@dataclass
class Findings:
    """What one check found: its problems, how many items it checked, and those it left for
    the campaign to check when it starts (saying what they wait for)."""

    problems: list[str] = field(default_factory=list)
    later: list[str] = field(default_factory=list)
    checked: int = 0

    def attempt(self, call: Callable[[], object], about: str = "") -> None:
        """Check one item: its UserError is a problem (about: what it is about, when the
        error does not say)."""
        self.checked += 1
        try:
            call()
        except UserError as exc:
            self.problems.append(f"{about}: {exc}" if about else str(exc))

    def add(self, problems: list[str]) -> None:
        self.checked += 1
        self.problems.extend(problems)

    def leave(self, item: str) -> None:
        self.later.append(f"{item} {WHEN_IT_STARTS}")


CheckFunction = Callable[[Readiness, Findings], None]


@dataclass(frozen=True)
class Check:
    name: str
    checks: str  # what it checks
    function: CheckFunction
    remedy: str
    needs: tuple[str, ...] = ()  # earlier checks it relies on


@dataclass(frozen=True)
class Outcome:
    check: Check
    status: Status
    problems: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    reason: str = ""  # why it was skipped

    @property
    def text(self) -> str:
        """The outcome in a few words: the status, and why or what is left."""
        if self.status == Status.SKIPPED:
            return f"skipped: {self.reason}"
        if self.status == Status.FAILED:
            return f"failed ({len(self.problems)}); fix: {self.check.remedy}"
        if self.later and self.status == Status.PASSED:
            return f"passed; {len(self.later)} more {WHEN_IT_STARTS}"
        return self.status.value

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.check.name,
            "checks": self.check.checks,
            "remedy": self.check.remedy,
            "outcome": self.status.value,
            "problems": list(self.problems),
            "later": list(self.later),
            "reason": self.reason or None,
        }


def capacity_search(ready: Readiness, found: Findings) -> None:
    if ready.slo is not None:
        found.add(searchable_problems(ready.plan, ready.slo))


def searchable_problems(plan: Plan, slo: Slo) -> list[str]:
    """Why the plan's cells cannot be searched for a capacity under slo, a line each."""
    problems = []
    if rated := next((s for s in plan.specs if s.options.rate is not None), None):
        problems.append(
            f"the plan gives a rate (-R {rated.options.rate:g}, cell {rated.label}): capacity "
            "searches the rate itself; remove the rate axis"
        )
    if counted := next((s for s in plan.specs if s.options.duration_s is None), None):
        problems.append(
            f"workload {counted.workload.name} runs a fixed count of transactions "
            "(transactions = N) and cannot be rate-limited for a time: give it a duration"
        )
    if slo.latency_bound_ms is None and any(s.options.latency_limit_ms is None for s in plan.specs):
        problems.append(
            "the SLO bounds no latency and the plan gives no latency_limit: -L needs one "
            "of them for late and skipped transactions"
        )
    return problems


def build_sources(ready: Readiness, found: Findings) -> None:
    for recipe in ready.plan.needed_builds:
        found.attempt(partial(builds.check, recipe))


def perf(ready: Readiness, found: Findings) -> None:
    if any(spec.profiled for spec in ready.plan.specs):
        found.attempt(check_perf)


def kernel_tunables(ready: Readiness, found: Findings) -> None:
    if ready.plan.sysctl_names:
        found.add(KernelTunables(ready.plan.sysctl_names).problems())


def shared_data_dirs(ready: Readiness, found: Findings) -> None:
    if any(s.managed and s.data_dir for s in ready.plan.servers):
        found.add(data_dir_clashes(ready.plan))


def hosts(ready: Readiness, found: Findings) -> None:
    reached = ready.hosts
    for name in used_hosts(ready.plan):
        if reached is None:
            found.leave(f"host {name} is reached")
        else:
            found.attempt(partial(reached.check, name))


def cpus(ready: Readiness, found: Findings) -> None:
    for listed in cpu_lists(ready.plan):
        host = ready.host(listed[2])
        if host is None:
            found.leave(f"{listed[0]}: checked on host {listed[2]}")
        else:
            found.attempt(partial(check_cpu_list, ready.plan, listed, host))


def managed(ready: Readiness) -> list[ServerPlan]:
    return [s for s in ready.plan.servers if s.managed]


def installations(ready: Readiness, found: Findings) -> None:
    for server in managed(ready):
        if waits := ready.waits_for(server):
            found.leave(f"server {server.name}: its installation ({waits}) is checked")
        else:
            found.attempt(partial(ready.install, server), f"server {server.name}")


def pgbench(ready: Readiness, found: Findings) -> None:
    plan = ready.plan
    if ready.servers is None and plan.pgbench_hosts:
        found.leave(f"pgbench is chosen on {', '.join(plan.pgbench_hosts)}")
    elif ready.servers is None and plan.pgbench_install.startswith(BUILD_PREFIX):
        build = plan.pgbench_install.removeprefix(BUILD_PREFIX)
        found.leave(f"pgbench (build {build}) is checked")
    else:
        found.attempt(ready.pgbench)


def settings(ready: Readiness, found: Findings) -> None:
    """Every combination of settings each managed server starts with, judged by its own
    postgres; and TLS where the plan connects with it."""
    for server in managed(ready):
        host = ready.host(server.host)
        if (waits := ready.waits_for(server)) or host is None:
            found.leave(f"server {server.name}: its settings ({waits}) are judged")
        else:
            found.attempt(partial(judge_settings, ready, server, host))


def judge_settings(ready: Readiness, server: ServerPlan, host: Host) -> None:
    install = ready.install(server)
    check_settings(server, ready.plan, install, host)
    if ready.plan.uses_connection("tls", server.name):
        check_tls(server, ready.plan, install, host)


def data_dirs(ready: Readiness, found: Findings) -> None:
    for server in (s for s in managed(ready) if s.data_dir):
        if ready.servers is None:  # as the server account, known (or made) when it starts
            found.leave(f"server {server.name}: its data_dir is checked")
        else:
            found.attempt(partial(ready.servers.check_data_dir, server))


def external_servers(ready: Readiness, found: Findings) -> None:
    for server in (s for s in ready.plan.servers if not s.managed):
        if ready.servers is None:
            found.leave(f"server {server.name} is connected to")
        else:
            found.attempt(partial(check_external, server, ready.plan))


CHECKS: tuple[Check, ...] = (
    Check(
        "capacity search",
        "capacity only: no rate axis, a duration for every workload, a latency bound for -L",
        capacity_search,
        "remove the rate axis, give durations, and a latency bound in the SLO or latency_limit",
    ),
    Check(
        "builds",
        "each [build.NAME] used: its compiler, build system, patch files and source (a file, "
        "a repository and its ref, a source tree)",
        build_sources,
        "correct the [build.NAME] table (source, ref, compiler, patches) or install what it needs",
    ),
    Check(
        "perf",
        "profiled runs: perf installed here and allowed to profile other users' processes",
        perf,
        "install linux-perf and run as root (or lower kernel.perf_event_paranoid)",
    ),
    Check(
        "kernel tunables",
        "[matrix.sysctl]: pgbenchlab runs as root, and each tunable exists here",
        kernel_tunables,
        "run as root, and name tunables this kernel has (or remove [matrix.sysctl])",
    ),
    Check(
        "data directories apart",
        "no two managed servers share a data_dir",
        shared_data_dirs,
        "give each server a data_dir of its own",
    ),
    Check(
        "hosts",
        "each [[host]] a server or load generator runs on: reached over SSH, its host key "
        "known, and a login other than root where a managed server runs",
        hosts,
        "correct the [[host]] (ssh, identity, known_hosts) or the host itself",
    ),
    Check(
        "cpus",
        "every CPU list names CPUs its host has, and the host can pin (taskset or numactl)",
        cpus,
        "name CPUs the host has, install taskset or numactl, or remove cpus",
        needs=("hosts",),
    ),
    Check(
        "installations",
        "each managed server's installation found (a version, a source, a bin directory, a "
        "made build or fetched binaries)",
        installations,
        "name an installation that exists (`pgbenchlab installs` lists them)",
        needs=("hosts",),
    ),
    Check(
        "pgbench",
        "the [pgbench] install: found, the options its version lacks (max_tries, tls), the "
        "same one on every load generator, perf where pgbench is profiled",
        pgbench,
        "choose another [pgbench] install or remove the option it lacks",
        needs=("hosts",),
    ),
    Check(
        "server settings",
        "each managed server's settings (every variant), and TLS where it is used, as its own "
        "postgres judges them",
        settings,
        "correct or remove the setting (or build with --with-openssl for TLS)",
        needs=("installations",),
    ),
    Check(
        "server data directories",
        "each data_dir named: not inside another cluster, creatable by the server account",
        data_dirs,
        "choose another data_dir, or make its parent writable for the server account",
        needs=("hosts",),
    ),
    Check(
        "external servers",
        "each external server reached with its dsn, its pgbench tables there unless init = true",
        external_servers,
        "correct the dsn, start the server, or set init = true",
    ),
)


def run_checks(
    ready: Readiness, checks: tuple[Check, ...] = CHECKS, before: list[Outcome] | None = None
) -> list[Outcome]:
    """Each check in order, every problem collected; one whose needed check failed (here or
    in before) is skipped."""
    unmet: dict[str, Status] = {
        o.check.name: o.status for o in before or [] if o.status == Status.FAILED
    }
    outcomes = []
    for check in checks:
        broken = [f"{n}, which {WHICH[unmet[n]]}" for n in check.needs if n in unmet]
        if broken:
            reason = f"needs {' and '.join(broken)}"
            outcomes.append(Outcome(check, Status.SKIPPED, reason=reason))
            unmet[check.name] = Status.SKIPPED  # what needs it is skipped too
            continue
        found = Findings()
        check.function(ready, found)
        outcomes.append(outcome_of(check, found))
        if found.problems:
            unmet[check.name] = Status.FAILED
    return outcomes


def outcome_of(check: Check, found: Findings) -> Outcome:
    if found.problems:
        status = Status.FAILED
    elif found.checked:
        status = Status.PASSED
    else:
        status = Status.LATER if found.later else Status.NOT_NEEDED
    return Outcome(check, status, tuple(found.problems), tuple(found.later))


def refuse(outcomes: list[Outcome]) -> None:
    """NotReady with every problem found, each on its line with its check's name (alone, as
    it was said, when it is the only one)."""
    named = [(o.check.name, p) for o in outcomes for p in o.problems]
    if len(named) == 1:
        raise NotReady([named[0][1]])
    if named:
        raise NotReady([f"{name}: {problem}" for name, problem in named])


def first_pass(plan: Plan, slo: Slo | None = None) -> list[Outcome]:
    """The checks from this machine alone; what needs more is left for the campaign."""
    return run_checks(Readiness(plan, slo))


def check_before_start(plan: Plan, slo: Slo | None = None) -> list[Outcome]:
    """The first pass (`first_pass`), NotReady when it found a problem."""
    outcomes = first_pass(plan, slo)
    refuse(outcomes)
    return outcomes


def check_equipment(ready: Readiness, first: list[Outcome] | None) -> list[Outcome]:
    """The second pass: the checks that left items for it (without a first pass: every
    check), now that the campaign has its builds, binaries and hosts; NotReady when it found
    a problem."""
    left = CHECKS if first is None else tuple(o.check for o in first if o.later)
    outcomes = run_checks(ready, left, first)
    refuse(outcomes)
    return outcomes
