"""Bisection wall time: a performance bisection over 32 commits of a PostgreSQL history on this
machine, and the share of it spent building.

    .venv/bin/python bench/bisection.py [--commits 32] [--slow-at 21] [--duration 2]

The history is made as the suite's real bisection makes it (tests/bisect_repo.py): Debian's
postgresql-13 source committed as the first commit, then --commits small commits, each adding
a comment to one of five backend C files (every build after the first recompiles a few files
and relinks the server), except the --slow-at-th, which slows every message a backend reads by
a busy loop (TPS falls far beyond any noise). The search runs from main~N (good) to main (bad)
in this process as `pgbenchlab bisect` runs it (`bisect.Bisection`, without the HTML page),
with a build cache and a results directory of its own, both new: a cold start, the first
build a full one into a new persistent tree. Both are deleted afterwards, with the clusters.
The Debian tarball is fetched once beside bench/build.py's and the repository is made before
the clock starts (neither is timed).

Timed: the whole search; each build of a commit through the bisection's build seam (the first,
full build; an incremental one in the persistent tree; or a cache hit) and each step's campaign
through its equipment seam (servers, datasets, runs). Built unoptimised: the suite's fast
configure options and "CFLAGS=-O0", about half the build time of -O2 (what the suite's real
bisection uses); this figure measures a bisection of -O0 builds. The cell: select-only, scale
1, 2 clients, 2 s runs after 1 s of warmup, at least 3 rounds a step.

Decided before the run:
- Estimator: the slowest incremental build of the search, as measured (every one of them must
  take seconds); the whole search's wall time and its building share, as measured.
- Design: one search from a cold cache, as a user's first bisection.
- Rounds: 1 search (about 6 incremental builds).
- Bar: every incremental build ≤ 60 s; the search names the slowing commit.

The figure of record is the command without options: 8 to 11 minutes expected on 2 cores
alone (5 commits measured; a smoke run of 4 commits under a load average of 5 to 8 took 6 min
48 s, 243 s of it the first, full build, 14 s each incremental one), plus about a minute
to make the repository. Smoke test:
--commits 4 --slow-at 3 --duration 1 --warmup 0 --min-rounds 2 --output /tmp/bisection.md.
Writes bench/bisection.md (--output elsewhere). (Not named bisect.py: in bench/, which is the
first entry of sys.path when a script here runs, that name would hide the standard library's
bisect from every import of it.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from figure import Bar, verdict_line, write_figure
from harness import HERE, Provenance, duration_text

sys.path.insert(0, str(HERE.parent / "tests"))

from bisect_repo import make_history
from pgbenchlab import builds
from pgbenchlab.analysis.bisection import steps_needed
from pgbenchlab.bisect import Bisection, BisectRequest
from pgbenchlab.bisect.search import Kit
from pgbenchlab.builds import Progress, sources
from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.campaign.clean import remove_clusters
from pgbenchlab.campaign.equipment import equipped
from pgbenchlab.cli.run import reporter_for
from pgbenchlab.installs import Installation
from pgbenchlab.plan import Plan
from pgbenchlab.store import BisectionRecord, Store

PACKAGE = "postgresql-13"
FETCH_ROOT = Path(tempfile.gettempdir()) / "pgbenchlab-bench-build-sources"  # bench/build.py's
CONFIGURE = ["--without-readline", "--without-icu", "--without-zlib", "CFLAGS=-O0"]
NAME = "bench-bisect"
PLAN = """
[campaign]
name = "{name}"
[build.pg]
configure = {configure}
[[server]]
name = "pg"
install = {{ build = "pg" }}
settings = {{ shared_buffers = "32MB", max_connections = "20" }}
[defaults]
duration = "{duration}s"
warmup = "{warmup}s"
[matrix]
scale = 1
workload = "select-only"
clients = 2
"""
CHANGED = re.compile(r"persistent tree \S+: (\d+) file\(s\) changed")


@dataclass(frozen=True)
class Build:
    commit: str
    seconds: float
    kind: str  # first (full), incremental, cache hit
    changed: int | None  # source files the persistent tree took from the commit


@dataclass(frozen=True)
class Campaign:
    name: str
    seconds: float
    builds: tuple[Build, ...]  # made for it, before its runs


@dataclass
class Clock:
    """What the bisection's seams saw, in order: builds, then the campaign they were for."""

    root: Path  # the private build cache
    pending: list[Build] = field(default_factory=list)
    campaigns: list[Campaign] = field(default_factory=list)

    def build(self, recipe: BuildRecipe, progress: Progress) -> Installation:
        started, wall = time.monotonic(), time.time()
        made = builds.ensure(recipe, progress, root=self.root, incremental=True)
        seconds = time.monotonic() - started
        facts = builds.read_provenance(made.bin_dir.parent) or {}
        kind = "cache hit"
        if float(facts.get("built_at", 0)) >= wall:
            kind = "incremental" if self.built_before() else "first"
        self.pending.append(Build(str(recipe.ref), seconds, kind, files_changed(made)))
        return made

    def built_before(self) -> bool:
        made = [*self.pending, *(b for c in self.campaigns for b in c.builds)]
        return any(b.kind != "cache hit" for b in made)

    @contextmanager
    def equip(self, plan: Plan, results: Path, built: list[Installation]) -> Iterator[Kit]:
        started = time.monotonic()
        try:
            with equipped(plan, results, built) as kit:
                yield kit
        finally:
            seconds = time.monotonic() - started
            self.campaigns.append(Campaign(plan.name, seconds, tuple(self.pending)))
            self.pending.clear()

    def all_builds(self) -> list[Build]:
        return [b for c in self.campaigns for b in c.builds] + self.pending


def files_changed(made: Installation) -> int | None:
    log = made.bin_dir.parent / "build.log"
    found = CHANGED.search(log.read_text(errors="replace")) if log.is_file() else None
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Outcome:
    record: BisectionRecord
    wall_s: float
    history_s: float
    runs: dict[str, int]  # campaign → runs stored
    load: tuple[float, float]  # 1-minute load average before and after


def run_bisection(
    args: argparse.Namespace, scratch: Path, clock: Clock, provenance: Provenance
) -> Outcome:
    tarball = sources.debian_tarball(PACKAGE, FETCH_ROOT)
    started = time.monotonic()
    series = ["slow" if n == args.slow_at else "code" for n in range(1, args.commits + 1)]
    repo = make_history(tarball, scratch / "history", series)
    history_s = time.monotonic() - started
    plan = scratch / "bisect.toml"
    configure = json.dumps(CONFIGURE)  # a TOML array as well
    plan.write_text(
        PLAN.format(name=NAME, configure=configure, duration=args.duration, warmup=args.warmup)
    )
    results = scratch / "results"
    request = BisectRequest(
        plan, f"git:{repo}", f"main~{args.commits}", "main", results,
        min_rounds=args.min_rounds, max_rounds=args.max_rounds,
    )  # fmt: skip

    def tell(line: str) -> None:
        print(f"[{duration_text(provenance.elapsed_s())}] {line}", flush=True)

    load = os.getloadavg()[0]
    started = time.monotonic()
    with reporter_for(json=False, quiet=True) as reporter:
        record = Bisection(request, reporter, tell, build=clock.build, equip=clock.equip).run()
    wall_s = time.monotonic() - started
    with Store(results / RESULTS_DB) as store:
        runs = {s.campaign.name: s.runs for s in store.campaign_summaries()}
    return Outcome(record, wall_s, history_s, runs, (load, os.getloadavg()[0]))


INCREMENTAL = Bar("every incremental build ≤ 60 s", 60.0, at_most=True)
NAMED = Bar("the slowing commit named", 1.0, at_most=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--commits", type=int, default=32, help="commits after the good end")
    parser.add_argument("--slow-at", type=int, default=21, help="the slowing commit's number")
    parser.add_argument("--duration", type=int, default=2, help="seconds a run measures")
    parser.add_argument("--warmup", type=int, default=1, help="seconds of warmup before each")
    parser.add_argument("--min-rounds", type=int, default=3)
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--output", type=Path, default=HERE / "bisection.md")
    args = parser.parse_args()
    if not 1 <= args.slow_at <= args.commits:
        parser.error("need 1 <= --slow-at <= --commits")
    provenance = Provenance.start()
    scratch = Path(tempfile.mkdtemp(prefix="pgbl-bench-bisect-", dir="/var/tmp"))
    scratch.chmod(0o755)  # the server account runs the builds cached inside
    clock = Clock(scratch / "cache")
    try:
        outcome = run_bisection(args, scratch, clock, provenance)
    finally:
        remove_clusters(scratch / "results")
        shutil.rmtree(scratch, ignore_errors=True)
    text = markdown(provenance, args, clock, outcome)
    write_figure(args.output, text)
    print(text)
    first = (outcome.record.answer or {}).get("first_bad") or {}
    if first.get("subject") != expected_subject(args):
        raise SystemExit(f"the bisection did not name {expected_subject(args)!r}")


def expected_subject(args: argparse.Namespace) -> str:
    return f"slow change {args.slow_at}"


def markdown(provenance: Provenance, args: argparse.Namespace, clock: Clock, out: Outcome) -> str:
    answer = out.record.answer or {}
    first = answer.get("first_bad") or {}
    expected = expected_subject(args)
    steps = [s for s in out.record.steps if str(s.get("step", "")).startswith("at-")]
    found = first.get("subject") == expected
    verdict = "correct" if found else f"WRONG, expected {expected}"
    incremental = [b.seconds for b in clock.all_builds() if b.kind == "incremental"]
    slowest = max(incremental) if incremental else None
    judged = [
        (INCREMENTAL, "not shown" if slowest is None else INCREMENTAL.verdict(slowest, slowest)),
        (NAMED, "met" if found else "not met"),
    ]
    return "\n".join(
        [
            f"# Bisection wall time: {args.commits} commits, and the share spent building",
            "",
            *provenance.header(),
            verdict_line(judged),
            "",
            f"Ran: Debian's `{PACKAGE}` source as a git history with {args.commits} commits "
            f"after the good end, commit {args.slow_at} the slowing one; builds with configure "
            f"`{' '.join(CONFIGURE)}` (unoptimised: this figure measures a bisection of -O0 "
            "builds) and a new build cache (the first build a full one); select-only, scale 1, "
            f"2 clients, {args.duration} s runs after {args.warmup} s of warmup, "
            f"{args.min_rounds} to {args.max_rounds} rounds a step. All figures are from this "
            "run of `bench/bisection.py` (its docstring says what is timed).",
            "",
            f"Load average (1 min): {out.load[0]:.2f} at the start, {out.load[1]:.2f} at the end.",
            "",
            f"Answer: first bad commit `{str(first.get('hash', '-'))[:10]}` "
            f'"{first.get("subject", "none")}": {verdict}; status {out.record.status}; '
            f"{len(steps)} commits measured (a bisection of {args.commits + 1} positions needs "
            f"{steps_needed(args.commits + 1)}), {sum(out.runs.values())} runs in "
            f"{len(out.runs)} campaigns. Its change against its parent: "
            f"{(answer.get('change') or {}).get('reason', '-')}.",
            "",
            *parts_table(clock, out.wall_s),
            "",
            *campaigns_table(clock, out),
            "",
            f"Making the repository (not timed above): {out.history_s:.1f} s. "
            f"Total run time: {duration_text(provenance.elapsed_s())}",
            "",
        ]
    )


def parts_table(clock: Clock, wall: float) -> list[str]:
    """Where the search's wall time went."""
    made = clock.all_builds()
    seconds = {
        kind: [b.seconds for b in made if b.kind == kind]
        for kind in ("first", "incremental", "cache hit")
    }
    building = sum(b.seconds for b in made)
    measuring = sum(c.seconds for c in clock.campaigns)
    rows = [
        ("whole search", wall),
        ("building", building),
        ("· first build (full, new tree)", sum(seconds["first"])),
        (f"· incremental builds ({len(seconds['incremental'])})", sum(seconds["incremental"])),
        (f"· cache hits ({len(seconds['cache hit'])})", sum(seconds["cache hit"])),
        ("measuring (servers, datasets, runs)", measuring),
        ("the rest (git, plans, store)", wall - building - measuring),
    ]
    lines = ["| part | seconds | share of the search |", "|---|---|---|"]
    lines += [f"| {name} | {value:.1f} | {value / wall:.1%} |" for name, value in rows]
    if incremental := seconds["incremental"]:
        lines += [
            "",
            f"Incremental builds: median {statistics.median(incremental):.1f} s, max "
            f"{max(incremental):.1f} s; the first build {sum(seconds['first']):.1f} s.",
        ]
    return lines


def campaigns_table(clock: Clock, out: Outcome) -> list[str]:
    """Each step's campaign: its runs, its time, and the builds made for it."""
    subjects = {str(c["hash"]): str(c["subject"]) for c in out.record.commits}
    lines = [
        "| campaign | runs | measuring (s) | builds for it (commit: s, kind, files changed) |",
        "|---|---|---|---|",
    ]
    for campaign in clock.campaigns:
        listed = "; ".join(
            f"{subjects.get(b.commit, b.commit[:10])}: {b.seconds:.1f}, {b.kind}"
            + (f", {b.changed}" if b.kind != "cache hit" and b.changed is not None else "")
            for b in campaign.builds
        )
        runs = out.runs.get(campaign.name, 0)
        lines.append(f"| {campaign.name} | {runs} | {campaign.seconds:.1f} | {listed} |")
    return lines


if __name__ == "__main__":
    main()
