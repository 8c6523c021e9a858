"""`follow`: a branch's commits built, measured, searched for changes and bisected.

Each selected commit of the branch's first-parent line is built through the persistent tree
(as a bisection builds commits), its suite run as a campaign of its own (NAME.HASH, so an
interrupted commit resumes where it stopped) and recorded in the results database with what
it is. Commits recorded as measured, or as not building or starting, are never taken again.
Then the change points of every cell's series are found over the commits measured, and a
change with commits between its two measured ends that were not measured is bisected by the
`bisect` machinery over that range, within what is left of the budget (its ends measured again
in interleaved rounds, which runs made one commit at a time are not); a bisection `bisect`
refuses is stored with its reason and not tried again unless asked (`retry_bisections`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgbenchlab import plan, tomltext
from pgbenchlab.bisect.plans import BisectPlan, cell_options
from pgbenchlab.bisect.plans import load as load_plan
from pgbenchlab.bisect.running import Build, Equip, build_at, run_campaign
from pgbenchlab.bisect.search import REFUSED, Bisection, BisectRequest, build_incrementally
from pgbenchlab.builds.history import BranchCommit, branch_line
from pgbenchlab.builds.recipe import split_source
from pgbenchlab.builds.sources import resolve_ref
from pgbenchlab.campaign import RESULTS_DB, Reporter
from pgbenchlab.campaign.equipment import equipped
from pgbenchlab.errors import BisectionRefused, BuildError, PlanError, UserError
from pgbenchlab.follow.history import (
    DEFAULT_THRESHOLD,
    FOLLOWED,
    MEASURED,
    Change,
    History,
    bisection_name,
    load_history,
)
from pgbenchlab.follow.selection import Selection, select
from pgbenchlab.installs import Installation
from pgbenchlab.results import RunStatus
from pgbenchlab.store import BisectionRecord, FollowCommit, Store
from pgbenchlab.store.metrics import METRICS

Say = Callable[[str], None]
RUNNING = "running"
NO_BUILD = "does not build"
NO_START = "does not start"
SETTLED = (MEASURED, NO_BUILD, NO_START)  # never measured again


@dataclass(frozen=True)
class FollowRequest:
    plan: Path
    source: str | None
    branch: str
    results: Path
    selection: Selection = field(default_factory=Selection)
    range: tuple[str, str] | None = None  # refs, resolved into selection.range
    budget_s: float | None = None
    threshold: float = DEFAULT_THRESHOLD
    bisect: bool = True
    retry_bisections: bool = False  # those refused before are tried again
    max_rounds: int = 10
    metrics: tuple[str, ...] = FOLLOWED  # whose changes are bisected and gate a call


@dataclass
class FollowOutcome:
    measured: list[FollowCommit] = field(default_factory=list)  # by this call
    skipped: list[FollowCommit] = field(default_factory=list)  # did not build or start
    history: History | None = None
    budget_spent: bool = False
    bisected: dict[str, str] = field(default_factory=dict)  # bisection name -> its status
    metrics: tuple[str, ...] = FOLLOWED  # those followed

    @property
    def changes(self) -> list[Change]:
        """The changes of the metrics followed."""
        found = self.history.changes if self.history else ()
        return [c for c in found if c.series.metric in self.metrics]

    def new_bad_changes(self) -> list[Change]:
        """Regressions with an end among the commits this call measured."""
        mine = {c.commit_hash for c in self.measured}
        return [
            c
            for c in self.changes
            if c.regressed and {c.before.commit_hash, c.after.commit_hash} & mine
        ]


class FollowBudgetSpent(Exception):
    pass


class Follow:
    def __init__(
        self,
        request: FollowRequest,
        reporter: Reporter,
        say: Say,
        *,
        build: Build = build_incrementally,
        equip: Equip = equipped,
    ) -> None:
        unknown = sorted(set(request.metrics) - set(METRICS))
        if unknown or not request.metrics:
            raise UserError(
                f"--metric names stored metrics ({', '.join(METRICS)}); got {unknown or 'none'}"
            )
        if not 0 < request.threshold < 1:
            raise UserError("--threshold must be a percentage between 0 and 100, such as 2%")
        self.request, self.reporter, self.say = request, reporter, say
        self.build, self.equip = build, equip
        self.plan: BisectPlan = load_plan(request.plan, request.source, suite=True)
        if self.plan.data.get("campaign", {}).get("repeats") == "auto":
            raise PlanError(
                "a followed suite has a fixed number of repeats: give campaign.repeats a number",
                where=str(request.plan),
            )
        self.source = self.plan.source
        self.repo = Path(split_source(self.source)[1])
        self.line = branch_line(self.repo, request.branch)
        self.selection = self._selection()
        self.database = request.results.resolve() / RESULTS_DB
        self.started = time.monotonic()

    @property
    def name(self) -> str:
        return self.plan.name

    def _selection(self) -> Selection:
        if self.request.range is None:
            return self.request.selection
        first, last = (resolve_ref(self.repo, ref) for ref in self.request.range)
        on_line = {c.commit.hash for c in self.line}
        for ref, found in zip(self.request.range, (first, last), strict=True):
            if found not in on_line:
                raise UserError(
                    f'--range: "{ref}" is not on the first-parent line of {self.request.branch}'
                )
        return replace(self.request.selection, range=(first, last))

    def remaining(self) -> float | None:
        budget = self.request.budget_s
        return None if budget is None else budget - (time.monotonic() - self.started)

    def _spent(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    # -- measuring ----------------------------------------------------------------------------

    def run(self) -> FollowOutcome:
        outcome = FollowOutcome(metrics=self.request.metrics)
        settled = self._settled()
        todo = [c for c in select(self.line, self.selection) if c.commit.hash not in settled]
        self.say(
            f"following {self.request.branch}: {len(todo)} commit(s) to measure "
            f"({len(settled)} measured before)"
        )
        try:
            for commit in todo:
                if self._spent():
                    raise FollowBudgetSpent
                found = self._measure(commit)
                (outcome.measured if found.status == MEASURED else outcome.skipped).append(found)
            outcome.history = self._history()
            if self.request.bisect:
                self._bisect_changes(outcome)
        except FollowBudgetSpent:
            outcome.budget_spent = True
            self.say("budget spent: the next call continues where this one stopped")
        if outcome.history is None:
            outcome.history = self._history()
        return outcome

    def _settled(self) -> set[str]:
        """The commits no call measures again; a suite follows one branch of one source."""
        if not self.database.is_file():
            return set()
        with Store(self.database) as store:
            stored = store.follow_commits(self.name)
        for commit in stored[:1]:
            if (commit.source, commit.branch) != (self.source, self.request.branch):
                raise UserError(
                    f'suite "{self.name}" in this results database follows {commit.branch} of '
                    f"{commit.source}: rename its campaign or use another --results directory"
                )
        return {c.commit_hash for c in stored if c.status in SETTLED}

    def _history(self) -> History:
        """The history of the metrics followed, those this call names kept for later calls."""
        added = tuple(m for m in self.request.metrics if m not in FOLLOWED)
        with Store(self.database) as store:
            store.add_follow_metrics(self.name, added)
            return load_history(store, self.name, self.request.threshold)

    def _measure(self, at: BranchCommit) -> FollowCommit:
        commit = at.commit
        started = time.monotonic()
        self.say(f"{commit.short} {commit.subject[:70]}")
        record = FollowCommit(
            self.name, commit.hash, at.parent, at.position, commit.subject, commit.author_date,
            self.source, self.request.branch, f"{self.name}.{commit.hash[:12]}", RUNNING, "",
            None, time.time(),
        )  # fmt: skip
        self._save(record)
        try:
            built = self._build(commit.hash)
        except BuildError as exc:
            detail = str(exc).splitlines()[0].removesuffix("; its last lines:")
            self.say(f"  skipped: does not build ({detail})")
            return self._save(self._done(record, NO_BUILD, detail, started))
        commit_plan = self._commit_plan(record.campaign, commit.hash)
        self._run_campaign(commit_plan, built)
        statuses, error = self._stored_runs(record.campaign)
        if statuses and RunStatus.OK not in statuses:
            self.say(f"  skipped: does not start ({error})")
            return self._save(self._done(record, NO_START, error, started))
        self.say(f"  measured: {statuses.count(RunStatus.OK)} run(s)")
        return self._save(self._done(record, MEASURED, "", started))

    def _stored_runs(self, campaign: str) -> tuple[list[RunStatus], str]:
        """The statuses of the campaign's runs, and the first failure's error."""
        with Store(self.database) as store:
            found = store.find_campaign(campaign)
            records = () if found is None else store.run_records(found.id)
        errors = [str(r.error).splitlines()[0] for r in records if r.error]
        return [r.status for r in records], (errors[0] if errors else "")

    @staticmethod
    def _done(record: FollowCommit, status: str, detail: str, started: float) -> FollowCommit:
        seconds = round(time.monotonic() - started, 1)
        return replace(record, status=status, detail=detail, seconds=seconds)

    def _save(self, record: FollowCommit) -> FollowCommit:
        self.database.parent.mkdir(parents=True, exist_ok=True)
        with Store(self.database) as store:
            store.save_follow_commit(record)
        return record

    def _build(self, commit: str) -> list[Installation]:
        return [build_at(self.build, self.plan.recipe(self.plan.build, commit), self.say)]

    def _commit_plan(self, campaign: str, commit: str) -> plan.Plan:
        """The suite as a campaign of its own for the commit: its build at that commit."""
        data = copy.deepcopy(self.plan.data)
        data["build"][self.plan.build]["ref"] = commit
        data.setdefault("campaign", {})["name"] = campaign
        text = tomltext.document(data)
        return plan.parse(text, str(self.plan.path), base=self.plan.path.resolve().parent)

    def _run_campaign(self, commit_plan: plan.Plan, built: list[Installation]) -> None:
        """The commit's campaign, its runs not yet stored, until the budget is spent
        (FollowBudgetSpent: the commit stays running, and the next call resumes it)."""
        results = self.request.results.resolve()
        if run_campaign(commit_plan, built, results, self.reporter, self.equip, self._spent):
            raise FollowBudgetSpent

    # -- changes and their bisections -----------------------------------------------------------

    def _bisect_changes(self, outcome: FollowOutcome) -> None:
        """Each change with unmeasured commits inside its range bisected once (per cell and
        range, whichever metric found it first), within what is left of the budget."""
        for change in outcome.changes:
            name = bisection_name(self.name, change)
            if change.untested < 1 or name in outcome.bisected:
                continue
            if self._spent():
                raise FollowBudgetSpent
            outcome.bisected[name] = self._bisect(name, change)

    def _bisect(self, name: str, change: Change) -> str:
        with Store(self.database) as store:
            stored = store.bisection(name)
        retried = stored is not None and stored.status == REFUSED
        if stored is not None and (
            stored.status == "answered" or (retried and not self.request.retry_bisections)
        ):
            return bisection_status(stored)
        spent_before = 0.0 if stored is None else float(stored.request.get("spent_s", 0.0))
        left = self.remaining()
        cell = next(
            cell_options(s) for s in self._commit_plan(self.name, "HEAD").specs
            if s.cell_id == change.series.cell_id
        )  # fmt: skip
        request = BisectRequest(
            plan=self.request.plan, source=self.source, good=change.before.commit_hash,
            bad=change.after.commit_hash, results=self.request.results,
            metric=change.series.metric, threshold=self.request.threshold,
            expect="worse" if change.regressed else "better",
            budget_s=None if left is None else spent_before + left,
            max_rounds=self.request.max_rounds, name=name, cell=cell,
        )  # fmt: skip
        self.say(
            f"change in {change.series.cell} ({change.series.metric} "
            f"{change.found.relative_step:+.1%}) between {change.before.short} and "
            f"{change.after.short}: {'bisecting again' if retried else 'bisecting'} "
            f"{change.untested} commit(s)"
        )
        bisection = None
        try:
            bisection = Bisection(request, self.reporter, lambda line: self.say(f"  {line}"),
                                  build=self.build, equip=self.equip)  # fmt: skip
            record = bisection.run()
        except BisectionRefused:  # by the search, once the bisection is open and stored
            assert bisection is not None
            record = bisection.record
            self.say(f"  {bisection_status(record)}")
        except UserError as exc:
            self.say(f"  bisection not made: {exc}")
            return f"not made: {exc}"
        if record.status == "budget spent":
            raise FollowBudgetSpent
        return bisection_status(record)


def bisection_status(record: BisectionRecord) -> str:
    """A bisection's status; a refused one's with its reason and how to try it again."""
    if record.status != REFUSED:
        return record.status
    reason = (record.answer or {}).get("refused", "")
    return f"{REFUSED}: {reason} (not tried again unless follow --retry-bisections)"
