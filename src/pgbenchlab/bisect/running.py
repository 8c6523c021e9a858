"""What a bisection's step and a followed commit share: a commit's build through the given
builder, and a campaign's runs not yet stored, run in order until the caller has enough or its
budget is spent."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from pgbenchlab.builds.compile import Progress
from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.campaign import Reporter
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.campaign.executor import Executor
from pgbenchlab.campaign.servers import ServerPool
from pgbenchlab.campaign.session import Outcome as CampaignOutcome
from pgbenchlab.campaign.session import Session, drive
from pgbenchlab.durations import duration_text
from pgbenchlab.installs import Installation
from pgbenchlab.plan import Plan
from pgbenchlab.results import RunResult

Say = Callable[[str], None]
Build = Callable[[BuildRecipe, Progress], Installation]
Kit = tuple[PgbenchClient, ServerPool, Executor]
Equip = Callable[[Plan, Path, list[Installation]], AbstractContextManager[Kit]]


def build_at(build: Build, recipe: BuildRecipe, say: Say) -> Installation:
    """The recipe's installation, its build's phases said as they pass."""

    def progress(phase: str, elapsed: float) -> None:
        say(f"  build {str(recipe.ref)[:10]}: {phase} ({duration_text(elapsed)})")

    return build(recipe, progress)


def never(results: list[RunResult]) -> bool:
    return False


def run_campaign(
    campaign_plan: Plan,
    built: list[Installation],
    results_dir: Path,
    reporter: Reporter,
    equip: Equip,
    spent: Callable[[], bool],
    enough: Callable[[list[RunResult]], bool] = never,
) -> bool:
    """The campaign's runs not yet stored, in order, until `enough` says so of this call's
    results; True when the budget was spent first (the runs finished are stored, and a later
    call resumes the campaign). An interrupted campaign raises KeyboardInterrupt."""
    out_of_budget = False

    def body(campaign: Session, outcome: CampaignOutcome, done: set[str]) -> None:
        nonlocal out_of_budget
        todo = [s for s in campaign_plan.specs if s.run_key not in done]
        reporter.campaign_started(campaign_plan, todo, len(done))
        for index, spec in enumerate(todo, start=1):
            if spent():
                out_of_budget = True
                return
            campaign.run_stored(spec, index, len(todo), outcome)
            if enough(outcome.results):
                return

    with equip(campaign_plan, results_dir, built) as (pgbench, servers, executor):
        outcome = drive(campaign_plan, results_dir, reporter, pgbench, servers, executor, body)
    if outcome.interrupted:
        raise KeyboardInterrupt
    return out_of_budget
