"""Follow overhead: wall time per followed commit ÷ (its incremental build + the suite's
configured run time).

    .venv/bin/python bench/follow.py [--commits 4] [--duration 20] [--warmup 5] [--repeats 3]

The history is made as the suite's real follow test makes it (tests/bisect_repo.py): Debian's
postgresql-13 source committed as the first commit, then --commits small commits, each adding
a comment to one of five backend C files (every build after the first recompiles a few files
and relinks the server). The first commit is built into a new build cache and persistent tree
before the clock starts (a full build is not what a nightly follow makes); then one call of
`follow --every 1 --order oldest` over the commits after it runs in this process as
`pgbenchlab follow` runs it (`follow.Follow`), with a results directory of its own. Both are
deleted afterwards, with the clusters.

Timed: the whole call (its git listing, every commit's incremental build, campaign — server,
dataset, runs — and record, then the change points over the history and the bisections it
starts: none here, no commit changes performance); each build through the follow's build seam.
Configured run time: per commit, repeats × cells × (duration + warmup). The suite: select-only
and tpcb-like at scale 10, 2 clients, built unoptimised (the suite's fast configure options and
"CFLAGS=-O0", as the follow and bisect tests build).

Decided before the run:
- Estimator: the whole call's wall time ÷ (the sum of its incremental builds + the configured
  run time of the commits it measured), as measured; per commit beside it.
- Design: one call from a warm persistent tree, every commit after the first measured, oldest
  first (a backfill), no change to find.
- Rounds: 1 call (--commits commits).
- Bar: wall ÷ (incremental builds + configured run time) ≤ 1.10.

The figure of record is the command without options: about 12 minutes on 2 cores alone (4
commits of 2 cells × 3 repeats × 25 s, plus their builds), plus the first build (about 2 min)
and making the repository. Smoke test: --commits 2 --duration 1 --warmup 0 --repeats 2
--output /tmp/follow.md. Writes bench/follow.md (--output elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from figure import Bar, verdict_line, write_figure
from harness import HERE, Provenance, duration_text

sys.path.insert(0, str(HERE.parent / "tests"))

from bisect_repo import make_history
from pgbenchlab import builds
from pgbenchlab.builds import Progress, sources
from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.campaign.clean import remove_clusters
from pgbenchlab.cli.run import reporter_for
from pgbenchlab.follow import Follow, FollowOutcome, FollowRequest
from pgbenchlab.follow.selection import Selection
from pgbenchlab.installs import Installation

PACKAGE = "postgresql-13"
FETCH_ROOT = Path(tempfile.gettempdir()) / "pgbenchlab-bench-build-sources"  # bench/build.py's
CONFIGURE = ["--without-readline", "--without-icu", "--without-zlib", "CFLAGS=-O0"]
PLAN = """
[campaign]
name = "bench-follow"
repeats = {repeats}
[build.pg]
configure = {configure}
[[server]]
name = "pg"
install = {{ build = "pg" }}
settings = {{ shared_buffers = "128MB", max_connections = "20" }}
[defaults]
duration = "{duration}s"
warmup = "{warmup}s"
[matrix]
scale = 10
workload = ["select-only", "tpcb-like"]
clients = 2
"""
CELLS = 2
OVERHEAD = Bar("wall ÷ (incremental builds + configured run time) ≤ 1.10", 1.10, at_most=True)


@dataclass
class Builds:
    """The follow's build seam, timed."""

    root: Path
    seconds: dict[str, float] = field(default_factory=dict)  # commit → its build

    def build(self, recipe: BuildRecipe, progress: Progress) -> Installation:
        started = time.monotonic()
        made = builds.ensure(recipe, progress, root=self.root, incremental=True)
        self.seconds[str(recipe.ref)] = time.monotonic() - started
        return made


@dataclass(frozen=True)
class Outcome:
    found: FollowOutcome
    wall_s: float
    first_build_s: float
    configured_s: float  # per commit
    load: tuple[float, float]


def run_follow(args: argparse.Namespace, scratch: Path, timed: Builds) -> Outcome:
    tarball = sources.debian_tarball(PACKAGE, FETCH_ROOT)
    repo = make_history(tarball, scratch / "history", ["code"] * args.commits)
    suite = scratch / "suite.toml"
    suite.write_text(
        PLAN.format(
            repeats=args.repeats, configure=json.dumps(CONFIGURE), duration=args.duration,
            warmup=args.warmup,
        )
    )  # fmt: skip
    first = BuildRecipe("pg", f"git:{repo}", ref="main~" + str(args.commits),
                        configure=tuple(CONFIGURE))  # fmt: skip
    started = time.monotonic()
    builds.ensure(first, None, root=timed.root, incremental=True)  # the warm tree, not timed
    first_build_s = time.monotonic() - started
    request = FollowRequest(
        suite, f"git:{repo}", "main", scratch / "results",
        Selection(every=1, order="oldest"), range=(f"main~{args.commits - 1}", "main"),
    )  # fmt: skip

    def tell(line: str) -> None:
        print(f"[{duration_text(time.monotonic() - started)}] {line}", flush=True)

    load = os.getloadavg()[0]
    started = time.monotonic()
    with reporter_for(json=False, quiet=True) as reporter:
        found = Follow(request, reporter, tell, build=timed.build).run()
    wall_s = time.monotonic() - started
    configured = args.repeats * CELLS * (args.duration + args.warmup)
    return Outcome(found, wall_s, first_build_s, configured, (load, os.getloadavg()[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--commits", type=int, default=4, help="commits measured")
    parser.add_argument("--duration", type=int, default=20, help="seconds a run measures")
    parser.add_argument("--warmup", type=int, default=5, help="seconds of warmup before each")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each cell per commit")
    parser.add_argument("--output", type=Path, default=HERE / "follow.md")
    args = parser.parse_args()
    if args.commits < 1:
        parser.error("need --commits >= 1")
    provenance = Provenance.start()
    scratch = Path(tempfile.mkdtemp(prefix="pgbl-bench-follow-", dir="/var/tmp"))
    scratch.chmod(0o755)  # the server account runs the builds cached inside
    timed = Builds(scratch / "cache")
    try:
        outcome = run_follow(args, scratch, timed)
    finally:
        remove_clusters(scratch / "results")
        shutil.rmtree(scratch, ignore_errors=True)
    text = markdown(provenance, args, timed, outcome)
    write_figure(args.output, text)
    print(text)


def markdown(provenance: Provenance, args: argparse.Namespace, timed: Builds, out: Outcome) -> str:
    measured = out.found.measured
    building = sum(timed.seconds.values())
    expected = building + out.configured_s * len(measured)
    ratio = out.wall_s / expected if expected else float("nan")
    rows = [
        f"| {c.short} | {timed.seconds.get(c.commit_hash, 0.0):.1f} | {out.configured_s:.0f} "
        f"| {c.seconds or 0.0:.1f} | "
        f"{(c.seconds or 0.0) / (timed.seconds.get(c.commit_hash, 0.0) + out.configured_s):.3f} |"
        for c in measured
    ]
    return "\n".join(
        [
            "# Follow overhead: wall time per followed commit",
            "",
            *provenance.header(),
            verdict_line([(OVERHEAD, OVERHEAD.verdict(ratio, ratio))]),
            "",
            f"Ran: Debian's `{PACKAGE}` source as a git history of {args.commits} small code "
            f"commits after the first; builds with configure `{' '.join(CONFIGURE)}`; "
            f"select-only and tpcb-like, scale 10, 2 clients, {args.repeats} repeats of "
            f"{args.duration} s runs after {args.warmup} s of warmup per commit. All figures "
            "are from this run of `bench/follow.py` (its docstring says what is timed).",
            "",
            f"Load average (1 min): {out.load[0]:.2f} at the start, {out.load[1]:.2f} at the end.",
            "",
            f"Whole call: {out.wall_s:.1f} s for {len(measured)} commit(s); incremental builds "
            f"{building:.1f} s; configured run time {out.configured_s * len(measured):.0f} s; "
            f"wall ÷ (builds + configured) = {ratio:.3f}. The first, full build (not timed in "
            f"the call): {out.first_build_s:.1f} s. Changes found: "
            f"{len(out.found.history.changes) if out.found.history else 0}.",
            "",
            "| commit | build s | configured run s | build + campaign s (its record) | ratio |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"Total run time: {duration_text(provenance.elapsed_s())}",
            "",
        ]
    )


if __name__ == "__main__":
    main()
