"""A performance bisection run: the ends confirmed, then commit after commit built and measured
against both ends in interleaved rounds until what it is like is decided, then the change the
first bad commit introduced measured against its parent. Every step is a campaign in the results
database (NAME.ends, NAME.at-COMMIT, NAME.confirm) and the bisection's record is saved after
each, so an interrupted bisection resumes from what is stored. Every step's commits are
measured in rounds of their own, interleaved: runs measured earlier (a followed branch's, one
commit at a time) are not paired, since a pair measured apart holds whatever changed on the
machine between its two runs. A range that cannot be searched is refused (`BisectionRefused`,
raised once the refusal is stored with its reason).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pgbenchlab import builds
from pgbenchlab.analysis.bisection import (
    BisectionAnswer,
    CommitOutcome,
    CommitProbe,
    bracket,
    classify,
    next_probe,
)
from pgbenchlab.bisect.plans import BisectPlan, same_but_rounds
from pgbenchlab.bisect.plans import load as load_plan
from pgbenchlab.bisect.rounds import Rounds, judge, stored_rounds
from pgbenchlab.bisect.running import Build, Equip, Say, build_at, run_campaign
from pgbenchlab.bisect.running import Kit as Kit  # the equipment seam, as bench/ names it
from pgbenchlab.builds.compile import Progress
from pgbenchlab.builds.history import first_parent_range
from pgbenchlab.builds.recipe import BuildRecipe, split_source
from pgbenchlab.campaign import RESULTS_DB, Reporter
from pgbenchlab.campaign.equipment import equipped
from pgbenchlab.campaign.resume import plan_difference
from pgbenchlab.errors import BisectionRefused, BuildError, CampaignStopped, UserError
from pgbenchlab.installs import Installation
from pgbenchlab.plan import Plan
from pgbenchlab.results import RunResult
from pgbenchlab.store import BisectionRecord, Store
from pgbenchlab.store.metrics import metric

EXPECTATIONS = ("worse", "better")
REFUSED = "refused"


def build_incrementally(recipe: BuildRecipe, progress: Progress) -> Installation:
    """A commit's build, through the persistent tree of its source and options."""
    return builds.ensure(recipe, progress, incremental=True)


class BudgetSpent(Exception):
    """The budget ran out during a step's runs (those finished are stored)."""

    def __init__(self, campaign: str) -> None:
        super().__init__(campaign)
        self.campaign = campaign


@dataclass(frozen=True)
class BisectRequest:
    """What the user asked. threshold: the smallest relative change that counts."""

    plan: Path
    source: str | None
    good: str
    bad: str
    results: Path
    metric: str = "tps"
    threshold: float = 0.03
    expect: str = "worse"  # the bad end is worse than the good one (a regression), or better
    budget_s: float | None = None
    min_rounds: int = 3
    max_rounds: int = 10
    name: str | None = None  # the bisection's name (else the plan's campaign name)
    cell: Mapping[str, Any] | None = None  # the plan's cell to measure (its options but the server)

    def identity(self) -> dict[str, Any]:
        """What a resumed bisection must share with the stored one."""
        return {
            "source": self.source, "good": self.good, "bad": self.bad, "metric": self.metric,
            "threshold": self.threshold, "expect": self.expect,
        }  # fmt: skip


class Bisection:
    """build makes a commit's installation and equip a step's pgbench, servers and executor:
    the defaults build and run for real; a test may measure something else."""

    def __init__(
        self,
        request: BisectRequest,
        reporter: Reporter,
        say: Say,
        *,
        build: Build = build_incrementally,
        equip: Equip = equipped,
    ) -> None:
        self.metric = metric(request.metric)  # a user error naming the metrics
        if request.expect not in EXPECTATIONS:
            raise UserError(f"--expect must be one of {', '.join(EXPECTATIONS)}")
        if not 0 < request.threshold < 1:
            raise UserError("--threshold must be a percentage between 0 and 100, such as 3%")
        if not 2 <= request.min_rounds <= request.max_rounds:
            raise UserError("need 2 <= --min-rounds <= --max-rounds")
        self.request, self.reporter, self.say = request, reporter, say
        self.build, self.equip = build, equip
        self.plan: BisectPlan = load_plan(request.plan, request.source, request.cell)
        if request.name is not None:
            self.plan = replace(self.plan, name=request.name)
        self.source = self.plan.source
        self.commits = first_parent_range(
            Path(split_source(self.source)[1]), request.good, request.bad
        )
        self.database = request.results.resolve() / RESULTS_DB
        self.record = self._open_record()
        self.started = time.monotonic()

    @property
    def threshold(self) -> float:
        return self.request.threshold

    # -- the search ---------------------------------------------------------------------------

    def run(self) -> BisectionRecord:
        self.say(
            f"bisecting {len(self.commits) - 2} commit(s) between {self.commits[0].short} "
            f"and {self.commits[-1].short}; {self.request.metric}, threshold "
            f"{self.request.threshold:.0%}"
        )
        try:
            self._confirm_ends()
            while not isinstance(
                found := next_probe(len(self.commits), self._probes()), BisectionAnswer
            ):
                if self._budget_spent():
                    return self._stop_on_budget(None)
                self._step(found)
            return self._save("answered", self._answer(found))
        except BudgetSpent as spent:
            return self._stop_on_budget(spent.campaign)
        except BisectionRefused as refused:  # stored, so that its page and `follow` show it
            self._save(REFUSED, {"refused": str(refused)})
            raise

    def _stop_on_budget(self, campaign: str | None) -> BisectionRecord:
        """The record as the budget leaves it: the range still to search and, when the budget
        ran out inside a step, that step and its rounds so far (a later run continues them)."""
        edges = bracket(len(self.commits), self._probes())
        stopped: dict[str, Any] = {"reason": "budget", "inside": edges.bad - edges.good - 1}
        where = ""
        if campaign is not None:
            rounds = stored_rounds(self.database, campaign, self.metric).complete
            stopped |= {"step": campaign.removeprefix(f"{self.plan.name}."), "rounds": rounds}
            where = f" during step {stopped['step']} after {rounds} complete round(s)"
        good, bad = self.commits[edges.good].short, self.commits[edges.bad].short
        self.say(
            f"budget spent{where}; {stopped['inside']} commit(s) left between {good} and {bad}"
        )
        return self._save("budget spent", {**self._answer_so_far(), "stopped": stopped})

    def _confirm_ends(self) -> None:
        if self.record.steps and self.record.steps[0].get("step") == "ends":
            return
        labels = {"good": 0, "bad": len(self.commits) - 1}
        rounds = self._measure("ends", labels, lambda r: judge(r, "good", "bad", self).decided)
        verdict = judge(rounds, "good", "bad", self)
        said = f"bad against good: {verdict.reason}"
        change = verdict.relative_change
        worse = change < 0 if self.metric.higher_is_better else change > 0
        found = "worse" if worse else "better"
        if not verdict.decided:
            raise BisectionRefused(
                f"the ends could not be told apart in {rounds.complete} rounds ({said}); "
                "raise --max-rounds (the rounds so far are kept) or lengthen the runs (with "
                "another --results directory)"
            )
        if verdict.within_noise:
            raise BisectionRefused(
                f"the ends do not differ beyond {self.threshold:.0%} ({said}): nothing to bisect"
            )
        if found != self.request.expect:
            raise BisectionRefused(
                f"the bad end is {found} than the good one, not {self.request.expect} "
                f"({said}); use --expect {found}"
            )
        self.say(f"ends: {said}")
        self._add_step(
            {
                "step": "ends", "index": None, "outcome": "confirmed", "detail": said,
                "figure": rounds.figure("good"), "bad_figure": rounds.figure("bad"),
                "relative_to_good": change,
            }
        )  # fmt: skip

    def _step(self, index: int) -> None:
        commit = self.commits[index]
        label = f"at-{commit.short}"
        labels = {"good": 0, "bad": len(self.commits) - 1, label: index}
        self.say(f"step {len(self.record.steps)}: {commit.short} {commit.subject[:60]}")
        try:
            rounds = self._measure(label, labels, lambda r: self._decided(r, label))
        except BuildError as exc:
            detail = str(exc).splitlines()[0].removesuffix("; its last lines:")
            self.say(f"  skipped: does not build ({detail})")
            self._add_step(
                self._found(label, index, CommitProbe(index, CommitOutcome.SKIPPED), None, detail)
            )
            return
        if rounds.failed(label):
            detail = f"does not run: {rounds.failed(label)}"
            self.say(f"  skipped: {detail}")
            self._add_step(
                self._found(label, index, CommitProbe(index, CommitOutcome.SKIPPED), None, detail)
            )
            return
        against_good, against_bad = (
            judge(rounds, "good", label, self),
            judge(rounds, "bad", label, self),
        )
        probe = replace(classify(against_good, against_bad), index=index)
        detail = f"against good {against_good.reason}; against bad {against_bad.reason}"
        if probe.outcome == CommitOutcome.UNDECIDED:  # its rounds are spent: measuring it again
            probe = CommitProbe(
                index, CommitOutcome.SKIPPED
            )  # would only repeat them, so it is skipped
            detail = f"undecided after {rounds.complete} rounds ({detail})"
        self.say(f"  {probe.outcome}: {detail}")
        found = self._found(label, index, probe, rounds.figure(label), detail)
        self._add_step({**found, "relative_to_good": against_good.relative_change})

    def _decided(self, rounds: Rounds, label: str) -> bool:
        if rounds.failed(label):
            return True
        probe = classify(judge(rounds, "good", label, self), judge(rounds, "bad", label, self))
        return probe.outcome != CommitOutcome.UNDECIDED

    def _answer(self, found: BisectionAnswer) -> dict[str, Any]:
        answer = self._answer_so_far(found)
        if found.first_bad is None:
            return answer
        parent, first = found.bracket.good, found.bracket.bad
        labels = {
            f"at-{self.commits[parent].short}": parent,
            f"at-{self.commits[first].short}": first,
        }
        names = list(labels)
        rounds = self._measure(
            "confirm", labels, lambda r: judge(r, names[0], names[1], self).decided
        )
        change = judge(rounds, names[0], names[1], self)
        answer["change"] = {
            "relative": change.relative_change, "low": change.ci_low, "high": change.ci_high,
            "verdict": str(change.verdict), "rounds": rounds.complete, "reason": change.reason,
        }  # fmt: skip
        return answer

    def _answer_so_far(self, found: BisectionAnswer | None = None) -> dict[str, Any]:
        found = found or BisectionAnswer(bracket(len(self.commits), self._probes()), ())
        first = found.first_bad
        return {
            "first_bad": None if first is None else {**asdict(self.commits[first]), "index": first},
            "bracket": [
                self.commits[found.bracket.good].hash,
                self.commits[found.bracket.bad].hash,
            ],
            "unsplit": [self.commits[i].hash for i in found.unsplit],
        }

    # -- measuring a step ---------------------------------------------------------------------

    def _measure(
        self,
        step: str,
        labels: dict[str, int],
        decided: Callable[[Rounds], bool],
    ) -> Rounds:
        """The step's rounds: those stored, then more until decided or max_rounds."""
        commits = {label: self.commits[i].hash for label, i in labels.items()}
        built = [self._build(label, commit) for label, commit in commits.items()]
        step_plan = self.plan.step_plan(step, commits, self.request.max_rounds)
        stored = stored_rounds(self.database, step_plan.name, self.metric)
        if not self._enough(stored, decided):
            self._continue_stored(step_plan)
            self._run_until(
                step_plan, built, lambda new: self._enough(stored.plus(new, self.metric), decided)
            )
            stored = stored_rounds(self.database, step_plan.name, self.metric)
        return stored

    def _continue_stored(self, step_plan: Plan) -> None:
        """A step stored with another --max-rounds goes on with this one, its rounds kept; one
        stored from another plan is refused with what bisect accepts (it has no --fresh)."""
        with Store(self.database) as store:
            stored = store.find_campaign(step_plan.name)
            if stored is None or stored.plan_digest == step_plan.digest:
                return
            old_files = stored.files
            if old_files == step_plan.files and same_but_rounds(
                stored.plan_text, step_plan.stored_text
            ):
                store.replace_plan(stored.id, step_plan.stored_text, step_plan.digest)
                return
            changed = plan_difference(
                stored.plan_text, step_plan.stored_text, old_files, step_plan.files
            )
        raise CampaignStopped(
            f'bisection step "{step_plan.name}" in this results database was measured with '
            f"another plan ({changed}); a bisection continues only with the plan it started "
            "with: put it back, or bisect into another --results directory"
        )

    def _enough(self, rounds: Rounds, decided: Callable[[Rounds], bool]) -> bool:
        """A step ends once decided after its first rounds, or when a commit fails to run."""
        return (rounds.complete >= self.request.min_rounds and decided(rounds)) or bool(
            rounds.failed_any()
        )

    def _run_until(
        self, step_plan: Plan, built: list[Installation], enough: Callable[[list[RunResult]], bool]
    ) -> None:
        """The step's campaign, its runs in order until enough says so or the budget is spent
        (BudgetSpent; a resumed step continues where it stopped)."""
        results = self.request.results.resolve()
        if run_campaign(
            step_plan, built, results, self.reporter, self.equip, self._budget_spent, enough
        ):
            raise BudgetSpent(step_plan.name)

    def _build(self, label: str, commit: str) -> Installation:
        return build_at(self.build, self.plan.recipe(label, commit), self.say)

    # -- the record ---------------------------------------------------------------------------

    def _probes(self) -> list[CommitProbe]:
        return [
            CommitProbe(int(s["index"]), CommitOutcome(s["outcome"]), s.get("position"))
            for s in self.record.steps
            if s.get("index") is not None and s.get("step") != "confirm"
        ]

    def _found(
        self, label: str, index: int, probe: CommitProbe, figure: float | None, detail: str
    ) -> dict[str, Any]:
        return {
            "step": label, "index": index, "commit": self.commits[index].hash,
            "outcome": str(probe.outcome), "position": probe.position, "figure": figure,
            "detail": detail,
        }  # fmt: skip

    def _add_step(self, step: dict[str, Any]) -> None:
        self._save("running", None, (*self.record.steps, step))

    def _save(
        self,
        status: str,
        answer: dict[str, Any] | None,
        steps: tuple[Mapping[str, Any], ...] | None = None,
    ) -> BisectionRecord:
        spent = float(self.record.request.get("spent_s", 0.0)) + time.monotonic() - self.started
        self.started = time.monotonic()
        request = {**self.record.request, "spent_s": round(spent, 1)}
        self.record = replace(
            self.record, request=request, steps=self.record.steps if steps is None else steps,
            status=status, answer=answer, updated_at=time.time(),
        )  # fmt: skip
        with Store(self.database) as store:
            store.save_bisection(self.record)
        return self.record

    def _open_record(self) -> BisectionRecord:
        with Store(self.database) as store:
            found = store.bisection(self.plan.name)
        identity = self.request.identity()
        if found is not None:
            asked = {k: found.request.get(k) for k in identity}
            if asked == identity:
                return found
            if found.status != REFUSED:  # a refused one has no step to keep: it starts over
                raise CampaignStopped(
                    f'bisection "{self.plan.name}" in this results database asked {asked}; '
                    "rename the campaign or use another --results directory"
                )
        commits = tuple(
            {"hash": c.hash, "subject": c.subject, "author_date": c.author_date}
            for c in self.commits
        )
        now = time.time()
        return BisectionRecord(
            self.plan.name,
            {**identity, "plan": str(self.request.plan)},
            commits,
            (),
            "running",
            None,
            now,
            now,
        )

    def _budget_spent(self) -> bool:
        budget = self.request.budget_s
        spent = float(self.record.request.get("spent_s", 0.0)) + time.monotonic() - self.started
        return budget is not None and spent >= budget
