"""The bisections a followed branch starts, with stand-in builds and runs: the ends of a
change take their first rounds from the runs `follow` measured (same cell, same build) rather
than running them again, and a bisection `bisect` refuses is stored with its reason, shown, and
not tried again unless `--retry-bisections` asks.

Builds and runs are stand-ins through the follow's build and equipment seams: each commit's
build is a directory with its provenance (the cache key a campaign's servers record), and
pgbench's recorded output is replayed with its TPS scaled per commit (the commits from SLOW on
at half speed), so the git history, the campaigns, the change points, the bisection and the
results database are real. The real follow, with real builds and servers, is
test_bisect_real.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from bisect_repo import git
from pgbenchlab import report
from pgbenchlab.bisect.running import Equip, Kit
from pgbenchlab.builds import Progress, provenance_of
from pgbenchlab.builds.cache import PROVENANCE
from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli.follow import as_json, change_views
from pgbenchlab.errors import UserError
from pgbenchlab.follow import Follow, FollowOutcome, FollowRequest
from pgbenchlab.follow.selection import Selection
from pgbenchlab.installs import Installation
from pgbenchlab.invocation.command import Call, Completed
from pgbenchlab.plan import Plan
from pgbenchlab.server import Endpoint, ServerFacts
from pgbenchlab.store import Store
from replay import (
    Replay,
    ReplayExecutor,
    StandInServer,
    StandInServers,
    client,
    golden_log,
    recorded,
)
from support import QuietReporter
from test_bisect_search import PLAN

COMMITS = 9  # follow --every 4 measures 0, 4 and 8
SLOW = 2  # the first slow commit: the change lies between 0 and 4, bisected over 1 to 3
SUITE = PLAN.replace('name = "budgeted"', 'name = "nightly"\nrepeats = 4')  # fixed repeats


@pytest.fixture
def history(tmp_path: Path) -> list[str]:
    """A branch of COMMITS commits, oldest first."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for number in range(COMMITS):
        (repo / "README").write_text(f"note {number}\n")
        git(repo, "add", "README")
        git(repo, "commit", "-q", "-m", f"change {number}")
    return git(repo, "log", "--reverse", "--format=%H").split()


class StandInBuilds:
    """Each commit's build as a directory keyed like the cache (by commit; by_name: by the
    recipe's name too, so a bisection's builds are not the follow's), with the builds made."""

    def __init__(self, root: Path, *, by_name: bool = False) -> None:
        self.root, self.by_name = root, by_name
        self.made: list[str] = []

    def __call__(self, recipe: BuildRecipe, progress: Progress) -> Installation:
        self.made.append(recipe.name)
        key = f"{recipe.name}-{recipe.ref}" if self.by_name else f"pg-{recipe.ref}"
        prefix = self.root / key
        (prefix / "bin").mkdir(parents=True, exist_ok=True)
        (prefix / PROVENANCE).write_text(json.dumps({"key": key, "commit": recipe.ref}))
        version = client("16").version
        return Installation("build", prefix / "bin", version, True, True, recipe.name)


class BuiltStandIn(StandInServer):
    """A stand-in server that records its build's provenance, as a managed server does."""

    def __init__(self, name: str, install: Installation, port: int) -> None:
        super().__init__(name)
        self.install = install
        self.endpoint = Endpoint("/nonexistent/socket", port, "bench", "bench")

    def facts(self) -> ServerFacts:
        return replace(super().facts(), build=provenance_of(self.install))


class ScaledExecutor(ReplayExecutor):
    """The recorded run, its TPS scaled by the speed of the commit the call's port serves."""

    def __init__(self, speeds: dict[int, float]) -> None:
        ok = Replay(recorded("16", "tpcb-progress"), tuple(golden_log("16", "tpcb")))
        super().__init__([ok] * 200)
        self.speeds = speeds

    def pgbench(self, call: Call) -> Completed:
        done = super().pgbench(call)
        speed = self.speeds[int(call.env["PGPORT"])]
        tps = re.sub(r"tps = ([\d.]+)", lambda m: f"tps = {float(m[1]) * speed:.6f}", done.stdout)
        return replace(done, stdout=tps)


def world(slow: set[str], bisections_alike: bool = False) -> Equip:
    """Commits in `slow` at half speed, except in a bisection's steps when bisections_alike."""

    @contextmanager
    def equip(plan: Plan, results: Path, built: list[Installation]) -> Iterator[Kit]:
        servers = StandInServers(plan)
        speeds = {}
        for port, (name, install) in enumerate(zip(servers.servers, built, strict=True), 6000):
            servers.servers[name] = BuiltStandIn(name, install, port)
            commit = json.loads((install.bin_dir.parent / PROVENANCE).read_text())["commit"]
            alike = bisections_alike and ".bisect-" in plan.name
            speeds[port] = 0.5 if commit in slow and not alike else 1.0
        yield client("16"), servers, ScaledExecutor(speeds)

    return equip


def follow(
    tmp_path: Path,
    build: Callable[[BuildRecipe, Progress], Installation],
    equip: Equip,
    **asked: object,
) -> FollowOutcome:
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    request = FollowRequest(
        suite, f"git:{tmp_path / 'repo'}", "main", tmp_path / "results",
        selection=Selection(every=4), metrics=("tps",),
    )  # fmt: skip
    request = replace(request, **asked)  # type: ignore[arg-type]
    return Follow(request, QuietReporter(), lambda line: None, build=build, equip=equip).run()


def runs_of(results: Path, campaign: str) -> int:
    with Store(results / RESULTS_DB) as store:
        found = store.find_campaign(campaign)
        return 0 if found is None else len(store.run_records(found.id))


def test_the_ends_of_a_followed_change_are_measured_again_in_rounds_of_their_own(
    tmp_path: Path, history: list[str]
) -> None:
    """The follow measured its commits one at a time: its runs are not paired as rounds."""
    builds = StandInBuilds(tmp_path / "builds")
    outcome = follow(tmp_path, builds, world(set(history[SLOW:])))
    assert [c.position for c in outcome.measured] == [8, 4, 0]
    ((name, status),) = outcome.bisected.items()
    assert status == "answered"
    assert runs_of(tmp_path / "results", f"{name}.ends") >= 2 * 3  # both ends, min rounds
    with Store(tmp_path / "results" / RESULTS_DB) as store:
        record = store.bisection(name)
    assert record is not None and record.answer is not None
    assert record.answer["first_bad"]["hash"] == history[SLOW]
    ends = record.steps[0]
    assert ends["step"] == "ends" and "from the runs" not in ends["detail"]
    assert ends["relative_to_good"] == pytest.approx(-0.5, abs=1e-6)


def test_a_refused_bisection_is_stored_shown_and_not_tried_again_unless_asked(
    tmp_path: Path, history: list[str]
) -> None:
    """The follow's runs show the change, the bisection's own see none: `bisect` refuses the
    range."""
    builds = StandInBuilds(tmp_path / "builds", by_name=True)
    equip = world(set(history[SLOW:]), bisections_alike=True)
    first = follow(tmp_path, builds, equip)
    ((name, status),) = first.bisected.items()
    assert status.startswith("refused: the ends do not differ beyond 2%"), status
    assert "--retry-bisections" in status
    results = tmp_path / "results"
    ran = runs_of(results, f"{name}.ends")
    assert ran >= 6  # the ends measured by the bisection itself: 3 rounds at the least
    with Store(results / RESULTS_DB) as store:
        stored = store.bisection(name)
    assert stored is not None and stored.status == "refused"
    assert stored.answer is not None and "do not differ" in stored.answer["refused"]

    request = FollowRequest(tmp_path / "suite.toml", None, "main", results)
    (change,) = as_json(first, change_views(request, first))["changes"]
    assert change["bisection"]["status"] == "refused"
    assert change["bisection"]["refused"].startswith("the ends do not differ")
    site = report.write_site(results / RESULTS_DB, tmp_path / "site")
    (page,) = (site.parent / "follows").glob("nightly-*.html")
    assert "The bisection was refused" in page.read_text()

    builds.made.clear()
    again = follow(tmp_path, builds, equip)  # nothing new: no build, no run, no bisection
    assert again.measured == [] and again.bisected == first.bisected and builds.made == []
    with Store(results / RESULTS_DB) as store:
        assert store.bisection(name) == stored

    retried = follow(tmp_path, builds, equip, retry_bisections=True)
    assert sorted(builds.made) == ["bad", "good"]  # the bisection opened again
    assert retried.bisected[name].startswith("refused: the ends do not differ")
    assert runs_of(results, f"{name}.ends") == ran  # its stored rounds decide as before


def test_any_stored_metric_can_be_followed_and_is_kept_with_the_follow(
    tmp_path: Path, history: list[str]
) -> None:
    """`--metric p50` adds its series (change points, the site, the export) to the defaults,
    and later calls keep it; a name that is no stored metric is refused, listing them."""
    builds = StandInBuilds(tmp_path / "builds")
    first = follow(tmp_path, builds, world(set(history[SLOW:])), metrics=("tps", "p50"),
                   bisect=False)  # fmt: skip
    assert first.history is not None
    assert {s.metric for s in first.history.series} >= {"tps", "p99", "p50"}
    assert {c.series.metric for c in first.changes} <= {"tps", "p50"}
    again = follow(tmp_path, builds, world(set(history[SLOW:])), bisect=False)
    assert again.history is not None and "p50" in {s.metric for s in again.history.series}
    with Store(tmp_path / "results" / RESULTS_DB) as store:
        assert store.follow_metrics("nightly") == ("p50",)
    with pytest.raises(UserError, match=r"--metric names stored metrics \(tps, .*got \['nope'\]"):
        follow(tmp_path, builds, world(set()), metrics=("nope",))
