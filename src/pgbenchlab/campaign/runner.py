"""Execute a campaign: its runs not yet complete, through one session (`session`), each
result stored as soon as it finishes; with repeats = "auto", rounds follow while answers are
open, within a budget."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

from pgbenchlab import installs
from pgbenchlab.campaign import rounds
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.campaign.equipment import prepared
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import Executor
from pgbenchlab.campaign.floors import record_floors
from pgbenchlab.campaign.servers import ServerPool
from pgbenchlab.campaign.session import Outcome, Session, drive
from pgbenchlab.plan import AutoRepeats, Plan
from pgbenchlab.store.metrics import metrics
from pgbenchlab.tunables import KernelTunables


def run_campaign(
    plan: Plan,
    results_dir: Path,
    reporter: Reporter,
    *,
    fresh: bool = False,
    built: list[installs.Installation] | None = None,
    budget_s: float | None = None,
) -> Outcome:
    """Run the plan's campaign (checked before anything starts). The plan's builds are made
    first unless the caller made them (built)."""
    results_dir = results_dir.resolve()
    with prepared(plan, results_dir, built, reporter) as (pgbench, servers, executor, tunables):
        return conduct(
            plan, results_dir, reporter, pgbench, servers, executor, fresh=fresh,
            budget_s=budget_s, tunables=tunables,
        )  # fmt: skip


def conduct(
    plan: Plan,
    results_dir: Path,
    reporter: Reporter,
    pgbench: PgbenchClient,
    servers: ServerPool,
    executor: Executor,
    *,
    fresh: bool = False,
    budget_s: float | None = None,
    tunables: KernelTunables | None = None,
) -> Outcome:
    """Run the runs of the plan not yet complete in results_dir, with these servers, this
    pgbench and this executor; every server is stopped and released, and the kernel tunables
    put back, at the end. With repeats = "auto", rounds follow while answers are open, within
    ``budget_s`` seconds."""
    started = time.monotonic()

    def run_todo(session: Session, outcome: Outcome, done: set[str]) -> None:
        todo = [s for s in plan.specs if s.run_key not in done]
        reporter.campaign_started(plan, todo, len(done))
        session.run(todo, outcome)
        if plan.auto is not None:
            add_rounds(session, plan.auto, outcome, rounds.Budget(started, budget_s))
        record_floors(session.store, session.campaign_id, plan)

    return drive(
        plan, results_dir, reporter, pgbench, servers, executor, run_todo, fresh=fresh,
        tunables=tunables,
    )  # fmt: skip


def add_rounds(
    session: Session, auto: AutoRepeats, outcome: Outcome, budget: rounds.Budget
) -> None:
    """Rounds beyond the minimum for the cells whose answer is open, until every answer is
    decided, the maximum is reached or the next round would overrun the budget."""
    store, campaign_id = session.store, session.campaign_id
    first = [s for s in session.plan.specs if s.repeat == 1]
    asked = rounds.questions(first, session.plan.server_names)
    why = f"max_repeats ({auto.max_repeats}) reached"
    decide = metrics(auto.decide)
    auto = replace(auto, decide=tuple(m.name for m in decide))  # "p99_ms" is "p99"
    for round_ in range(auto.min_repeats + 1, auto.max_repeats + 1):
        values = store.run_values(campaign_id, decide)
        known = rounds.by_metric(values, auto.decide)
        cells = rounds.open_cells(rounds.answer_all(q, known, auto, round_) for q in asked)
        if not cells:
            why = "every answer decided"
            break
        done = store.done_run_keys(campaign_id)
        todo = [s for s in rounds.round_specs(first, round_, cells) if s.run_key not in done]
        per_run = rounds.seconds_per_run(values)
        if not budget.affords(len(todo), per_run):
            why = f"the budget allows no round of {len(todo)} run(s) more"
            break
        if todo:
            session.reporter.note(f"round {round_}: {len(todo)} run(s) for the open answers")
        session.run(todo, outcome)
    known = rounds.by_metric(store.run_values(campaign_id, decide), auto.decide)
    final = [rounds.answer_all(q, known, auto, math.inf) for q in asked]
    if all(a.decided for a in final):
        why = "every answer decided"
    outcome.answers = rounds.summary(final, why)
    for line in outcome.answers:
        session.reporter.note(line)
