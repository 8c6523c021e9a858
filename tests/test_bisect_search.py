"""The search's loop with stand-in builds and runs: --budget binds inside a step (the step's
runs stop once it is spent, and the record says the search stopped on budget, in which step,
after how many rounds, and what range is left); a commit still undecided when its rounds are
spent is skipped, not measured again and again.

Builds and runs are stand-ins: the bisection's build and equipment seams, with recorded pgbench
output replayed (every commit measures the same) and servers that start nothing
(tests/replay.py); the git history and the results database are real. The real bisection,
with real builds and servers, is test_bisect_real.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab import report
from pgbenchlab.bisect import Bisection, BisectRequest
from pgbenchlab.bisect.search import Equip, Kit
from pgbenchlab.builds import Progress
from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli.bisect import answer_text
from pgbenchlab.errors import UserError
from pgbenchlab.installs import Installation
from pgbenchlab.plan import Plan
from pgbenchlab.store import Store
from replay import Replay, ReplayExecutor, StandInServers, client, golden_log, recorded
from support import QuietReporter

COMMITS = 9  # good, seven between, bad
MIN_ROUNDS = 5  # a step takes at least 2 × 5 runs (ends) or 3 × 5 (a commit) without a budget
RUN_S = 0.4  # each replayed run's wall time
BUDGET_S = 1.0  # spent within the first few runs of a step: far fewer than it would take
PLAN = """
[campaign]
name = "budgeted"
[build.pg]
configure = ["--without-icu"]
[[server]]
name = "pg"
install = { build = "pg" }
[defaults]
duration = "2s"
warmup = "0s"
threads = 1
[matrix]
scale = 8
workload = "tpcb-like"
clients = 1
"""


def git(repo: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
        "PATH": "/usr/bin:/bin", "HOME": str(repo),
    }  # fmt: skip
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True)


@pytest.fixture
def request_for(tmp_path: Path) -> BisectRequest:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for number in range(COMMITS):
        (repo / "README").write_text(f"note {number}\n")
        git(repo, "add", "README")
        git(repo, "commit", "-q", "-m", f"change {number}")
    plan = tmp_path / "bisect.toml"
    plan.write_text(PLAN)
    return BisectRequest(
        plan, f"git:{repo}", f"main~{COMMITS - 1}", "main", tmp_path / "results",
        budget_s=BUDGET_S, min_rounds=MIN_ROUNDS,
    )  # fmt: skip


def stand_in_build(recipe: BuildRecipe, progress: Progress) -> Installation:
    version = client("16").version
    return Installation("build", Path("/nonexistent/bin"), version, True, True, recipe.name)


def replayed(run_s: float) -> Equip:
    """Each step's campaign with recorded runs, each lasting run_s."""

    @contextmanager
    def equip(plan: Plan, results: Path, built: list[Installation]) -> Iterator[Kit]:
        ok = Replay(recorded("16", "tpcb-progress"), tuple(golden_log("16", "tpcb")))
        yield client("16"), StandInServers(plan), ReplayExecutor([ok] * 100, run_s=run_s)

    return equip


def bisection(request: BisectRequest, run_s: float = RUN_S) -> Bisection:
    return Bisection(
        request, QuietReporter(), lambda line: None, build=stand_in_build, equip=replayed(run_s)
    )


def past_the_ends(request: BisectRequest) -> None:
    """The request's bisection stored as one whose ends are confirmed."""
    first = bisection(replace(request, budget_s=None))
    ends = {"step": "ends", "index": None, "outcome": "confirmed", "detail": "stored"}
    with Store(request.results / RESULTS_DB) as store:
        store.save_bisection(replace(first.record, steps=(ends,)))


def runs_of(results: Path, campaign: str) -> int:
    with Store(results / RESULTS_DB) as store:
        found = store.find_campaign(campaign)
        assert found is not None
        return len(store.run_records(found.id))


def test_the_budget_stops_the_ends_step_between_its_runs(request_for: BisectRequest) -> None:
    record = bisection(request_for).run()
    assert record.status == "budget spent"
    answer = record.answer
    assert answer is not None and answer["first_bad"] is None
    stopped = answer["stopped"]
    assert stopped["reason"] == "budget" and stopped["step"] == "ends"
    assert stopped["inside"] == COMMITS - 2
    assert answer["bracket"] == [record.commits[0]["hash"], record.commits[-1]["hash"]]
    ran = runs_of(request_for.results, "budgeted.ends")
    assert ran < MIN_ROUNDS  # under half the step's runs
    assert stopped["rounds"] == ran // 2
    assert "budget" in answer_text(record) and "ends" in answer_text(record)


def test_a_commit_step_stopped_on_budget_leaves_the_range_to_search(
    request_for: BisectRequest,
) -> None:
    past_the_ends(request_for)
    record = bisection(request_for).run()
    assert record.status == "budget spent"
    assert record.answer is not None
    stopped = record.answer["stopped"]
    middle = record.commits[(COMMITS - 1) // 2]["hash"]
    assert stopped["step"] == f"at-{middle[:10]}"
    assert stopped["inside"] == COMMITS - 2
    assert runs_of(request_for.results, f"budgeted.at-{middle[:10]}") < MIN_ROUNDS
    assert [s["step"] for s in record.steps] == ["ends"]  # the unfinished step is not a probe
    assert f"{COMMITS - 2} commit(s)" in answer_text(record)
    results = request_for.results
    page = report.write_bisection(results / RESULTS_DB, "budgeted", results / "bisect.html")
    assert f"budget is spent during step at-{middle[:10]}" in page.read_text()


def test_a_commit_still_undecided_when_its_rounds_are_spent_is_skipped(
    request_for: BisectRequest,
) -> None:
    request = replace(request_for, good="main~3", budget_s=None, min_rounds=2, max_rounds=2)
    past_the_ends(request)
    record = bisection(request, run_s=0.0).run()  # every commit measures as both ends do
    assert record.status == "answered"
    tested = [s for s in record.steps if s["step"].startswith("at-")]
    assert [s["outcome"] for s in tested] == ["skipped", "skipped"]
    assert all(s["detail"].startswith("undecided after 2 rounds") for s in tested)
    assert record.answer is not None
    assert record.answer["unsplit"] == [c["hash"] for c in record.commits[1:]]


def test_undecided_ends_continue_with_the_max_rounds_the_advice_names(
    request_for: BisectRequest,
) -> None:
    """The ends undecided in their rounds: the advice names what bisect accepts, and a second
    run with a higher --max-rounds continues the stored rounds instead of refusing them; a
    changed plan is refused with advice bisect accepts too (it has no --fresh)."""
    request = replace(request_for, budget_s=None, min_rounds=2, max_rounds=2)
    with pytest.raises(UserError) as first:
        bisection(request, run_s=0.0).run()  # both ends measure alike: never told apart
    assert str(first.value).startswith("the ends could not be told apart in 2 rounds")
    assert "raise --max-rounds (the rounds so far are kept)" in str(first.value)
    assert runs_of(request.results, "budgeted.ends") == 4
    with Store(request.results / RESULTS_DB) as store:  # stored, as a followed change's is
        refused = store.bisection("budgeted")
    assert refused is not None and refused.status == "refused"
    assert refused.answer == {"refused": str(first.value)}
    page = report.write_bisection(
        request.results / RESULTS_DB, "budgeted", request.results / "b.html"
    )
    assert "<strong>Refused</strong>: the ends could not be told apart" in page.read_text()
    request.plan.write_text(PLAN.replace('duration = "2s"', 'duration = "3s"'))
    with pytest.raises(UserError) as changed:
        bisection(replace(request, max_rounds=3), run_s=0.0).run()
    message = str(changed.value)
    assert "--fresh" not in message and "another --results directory" in message, message
    assert 'duration = "3s"' in message and runs_of(request.results, "budgeted.ends") == 4
    request.plan.write_text(PLAN)
    with pytest.raises(UserError) as again:  # decided now: alike within the threshold
        bisection(replace(request, max_rounds=3), run_s=0.0).run()
    assert "after 3 round(s)" in str(again.value), again.value
    assert runs_of(request.results, "budgeted.ends") == 6, "two more runs, not six anew"
