"""The machinery of `preflight`'s list of checks: a check (a frozen record: its name, what it
checks, its function, its remedy, the earlier checks it needs), what the checks look at
(`Readiness`), what one finds (`Findings`) and its outcome; running them in order, every problem
collected, one whose needed check failed skipped; and the problems raised together
(`NotReady`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pgbenchlab import installs
from pgbenchlab.analysis.slo import Slo
from pgbenchlab.campaign.client import PgbenchClient, campaign_pgbench
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.campaign.servers import Servers
from pgbenchlab.errors import NotReady, UserError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import BINARIES_PREFIX, BUILD_PREFIX, Installation
from pgbenchlab.plan import Plan, ServerPlan

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
    # `run --check`'s second pass, which makes no build: install specs it could not have yet
    # (a build not made: what it waits for) or not at all (binaries not fetched: why)
    waiting: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    _here: list[Installation] | None = None
    _pgbench: PgbenchClient | None = None

    @property
    def hosts(self) -> CampaignHosts | None:
        return None if self.servers is None else self.servers.hosts

    @property
    def managed(self) -> list[ServerPlan]:
        """The plan's managed servers (here and on hosts), in plan order."""
        return [s for s in self.plan.servers if s.managed]

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
        spec = server.install or ""
        if self.servers is not None:
            return self.waiting.get(spec)
        if server.host is not None:
            return f"on host {server.host}"
        if spec.startswith(BUILD_PREFIX):
            return f"build {spec.removeprefix(BUILD_PREFIX)}"
        if spec.startswith(BINARIES_PREFIX):
            return f"binaries {spec.removeprefix(BINARIES_PREFIX)}"
        return None

    def pgbench_waits_for(self) -> str | None:
        """What the choice of the campaign's pgbench waits for (its load generator hosts,
        its build), or None: it can be chosen now."""
        plan = self.plan
        if self.servers is None and plan.pgbench_hosts:
            return f"pgbench is chosen on {', '.join(plan.pgbench_hosts)}"
        if plan.pgbench_install.startswith(BUILD_PREFIX):
            build = plan.pgbench_install.removeprefix(BUILD_PREFIX)
            if self.servers is None or plan.pgbench_install in self.waiting:
                return f"pgbench (build {build}) is checked"
        return None

    def install(self, server: ServerPlan) -> Installation:
        if (server.install or "") in self.unavailable:
            raise UserError(self.unavailable[server.install or ""])
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
            said = str(exc)
            self.problems.append(f"{about}: {said}" if about not in said else said)

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
class CheckOutcome:
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


def run_checks(
    ready: Readiness, checks: tuple[Check, ...], before: list[CheckOutcome] | None = None
) -> list[CheckOutcome]:
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
            outcomes.append(CheckOutcome(check, Status.SKIPPED, reason=reason))
            unmet[check.name] = Status.SKIPPED  # what needs it is skipped too
            continue
        found = Findings()
        check.function(ready, found)
        outcomes.append(outcome_of(check, found))
        if found.problems:
            unmet[check.name] = Status.FAILED
    return outcomes


def outcome_of(check: Check, found: Findings) -> CheckOutcome:
    if found.problems:
        status = Status.FAILED
    elif found.checked:
        status = Status.PASSED
    else:
        status = Status.LATER if found.later else Status.NOT_NEEDED
    return CheckOutcome(check, status, tuple(found.problems), tuple(found.later))


def refuse(outcomes: list[CheckOutcome]) -> None:
    """NotReady with every problem found, each on its line with its check's name (alone, as
    it was said, when it is the only one)."""
    named = [(o.check.name, p) for o in outcomes for p in o.problems]
    if len(named) == 1:
        raise NotReady([named[0][1]])
    if named:
        raise NotReady([f"{name}: {problem}" for name, problem in named])
