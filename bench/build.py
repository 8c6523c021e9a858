"""Build time: pgbenchlab's build of a PostgreSQL source against the same build by hand.

    .venv/bin/python bench/build.py [--rounds 6] [--package postgresql-13]

The figure of record is the command without options (about 18 minutes on 2 cores). Debian's
source tarball of the package is fetched once into a cache beside the system's temporary files
(not timed). Then, round by round in a rotating order, each into a fresh directory:
  lab   `builds.builder.ensure` of a `tar:` recipe with an empty cache: unpack, configure,
        make, install, provenance, rename into the cache (the whole of `pgbenchlab build`
        after the source is fetched);
  hand  the same tarball: `tar xf`, `./configure` with the same options and flags, `make -jN`
        (N = the CPUs, as the lab uses), `make -C contrib/pg_stat_statements`, both installs.
The ratio lab ÷ hand is taken per round (the host drifts); its geometric mean has a t
interval over the rounds. Then the cache hit: `ensure` of the same recipe again (median of 5),
and the installed size. Writes bench/build.md from that one run. Each round's directories are
deleted before the next starts (a round needs about 1 GiB free); a failing step stops the run
with its last lines; a run stopped early (a failure, Ctrl-C) writes the rounds it finished to
bench/build.incomplete.md, leaving the figure of record alone.

Decided before the run:
- Estimator: lab ÷ hand per round, their geometric mean with a t interval over the rounds
  (`harness.paired_ratio`); the cache hit's slowest of 5, judged as measured.
- Design: the two builds of a round in rotating order, each in a fresh directory.
- Rounds: 6.
- Bar: lab ÷ hand ≤ 1.10 on the interval's upper end; a cache hit ≤ 2 s (the slowest).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from figure import Bar, verdict_line, write_figure
from harness import HERE, Provenance, duration_text, paired_ratio, rotated
from pgbenchlab.builds import builder, cache, sources
from pgbenchlab.builds.compile import STATEMENTS_DIR
from pgbenchlab.builds.recipe import BuildRecipe, version_flags
from pgbenchlab.errors import BuildError

OPTIONS = ("--without-readline", "--without-icu", "--without-zlib")
RATIO = Bar("lab ÷ hand ≤ 1.10", 1.10, at_most=True)
HIT = Bar("cache hit ≤ 2 s", 2.0, at_most=True)
MODES = ("lab", "hand")
CACHE_HITS = 5
JOBS = os.cpu_count() or 2  # what the lab's build uses (host.cpu_count())
ROUND_SPACE = 1 << 30  # bytes a round's tree, objects and installation need, with margin
TAIL = 15
FETCH_ROOT = Path(tempfile.gettempdir()) / "pgbenchlab-bench-build-sources"


def by_hand(tarball: Path, work: Path) -> tuple[float, str]:
    """Seconds for the build a person would type, with the options and flags the lab uses, and
    the version the tree states."""
    started = time.monotonic()
    subprocess.run(["tar", "xf", str(tarball), "-C", str(work)], check=True)
    tree = next(p for p in work.iterdir() if p.is_dir())
    version = sources.tree_version(tree)
    options, _ = version_flags(version, OPTIONS)
    prefix, dest = work / "prefix", f"DESTDIR={work / 'dest'}"
    steps = [
        ["./configure", f"--prefix={prefix}", "CC=gcc", *options],
        ["make", f"-j{JOBS}"],
        ["make", f"-j{JOBS}", "-C", STATEMENTS_DIR],
        ["make", "install", dest],
        ["make", "-C", STATEMENTS_DIR, "install", dest],
    ]
    with (work / "hand.log").open("w") as log:
        for argv in steps:
            done = subprocess.run(argv, cwd=tree, stdout=log, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                log.flush()
                tail = (work / "hand.log").read_text(errors="replace").splitlines()[-TAIL:]
                raise StepFailed(" ".join(argv), tail)
    return time.monotonic() - started, version


class StepFailed(Exception):
    """A step of the build by hand failed; its last lines are kept."""

    def __init__(self, step: str, tail: list[str]) -> None:
        super().__init__(f"{step} failed; its last lines:\n" + "\n".join(tail))


def check_space(scratch: Path) -> None:
    free = shutil.disk_usage(scratch).free
    if free < ROUND_SPACE:
        raise StepFailed("the next round", [f"only {free / 2**20:.0f} MiB free in {scratch}"])


def by_lab(recipe: BuildRecipe, root: Path) -> float:
    started = time.monotonic()
    builder.ensure(recipe, root=root)
    return time.monotonic() - started


def cache_hits(recipe: BuildRecipe, root: Path) -> list[float]:
    return [by_lab(recipe, root) for _ in range(CACHE_HITS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--package", default="postgresql-13")
    parser.add_argument("--output", type=Path, default=HERE / "build.md")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    provenance = Provenance.start()
    result = Result(seconds={mode: [] for mode in MODES})
    try:
        tarball = sources.debian_tarball(args.package, FETCH_ROOT)
        recipe = BuildRecipe(name="bench", source=f"tar:{tarball}", configure=OPTIONS)
        with tempfile.TemporaryDirectory(prefix="pgbenchlab-bench-build-") as scratch:
            measure(recipe, tarball, args.rounds, Path(scratch), result)
    except (StepFailed, BuildError, KeyboardInterrupt) as stopped:
        result.stopped = str(stopped) or type(stopped).__name__
        print(f"stopped: {result.stopped}", flush=True)
    text = markdown(provenance, args, result)
    # An incomplete run never replaces the figure of record.
    output = args.output.with_suffix(".incomplete.md") if result.stopped else args.output
    if result.stopped:
        output.write_text(text)
    else:
        write_figure(output, text)
    print(text)
    if result.stopped:
        raise SystemExit(f"incomplete: written to {output}")


@dataclass
class Result:
    """What a run measured so far: build seconds per mode, round by round (whole rounds
    only), the cache hits, the installed size, and why it stopped early if it did."""

    seconds: dict[str, list[float]]
    version: str = ""
    hits: list[float] = field(default_factory=list)
    size: int = 0
    stopped: str = ""


def measure(recipe: BuildRecipe, tarball: Path, rounds: int, scratch: Path, result: Result) -> None:
    for round_no in range(rounds):
        check_space(scratch)
        took: dict[str, float] = {}
        for mode in rotated(MODES, round_no):
            work = scratch / f"{mode}-{round_no}"
            work.mkdir()
            if mode == "lab":
                took[mode] = by_lab(recipe, work)
            else:
                took[mode], result.version = by_hand(tarball, work)
            print(f"round {round_no + 1} {mode}: {took[mode]:.1f} s", flush=True)
            if mode == "hand" or round_no < rounds - 1:
                shutil.rmtree(work)
        for mode in MODES:  # a round counts once both of its builds are done
            result.seconds[mode].append(took[mode])
    last = scratch / f"lab-{rounds - 1}"
    result.hits = cache_hits(recipe, last)
    result.size = sum(cache.tree_size(p) for p in (last / "builds").iterdir())


def markdown(provenance: Provenance, args: argparse.Namespace, result: Result) -> str:
    seconds = result.seconds
    done = len(seconds["lab"])
    ratio = paired_ratio(seconds["hand"], seconds["lab"]) if done else None
    judged = [
        (RATIO, RATIO.verdict(ratio.low, ratio.high) if ratio else "not shown"),
        (HIT, HIT.verdict(max(result.hits), max(result.hits)) if result.hits else "not shown"),
    ]
    lines = [
        "# Build time: pgbenchlab's build against the same build by hand",
        "",
        *provenance.header(),
        verdict_line(judged),
        "",
        f"Ran: Debian's `{args.package}` source tarball (PostgreSQL "
        f"{result.version or 'unknown'}), configure "
        f"`{' '.join(OPTIONS)}`, gcc, `make -j{JOBS}`; {done} of {args.rounds} rounds, the "
        "order rotating. All figures are from this run of `bench/build.py` (its docstring "
        "describes both builds).",
        "Requirement: lab ÷ hand ≤ 1.10 on its interval's upper end; a cache hit ≤ 2 s.",
        "",
    ]
    if result.stopped:
        lines += [f"**Incomplete: the run stopped early** ({result.stopped.splitlines()[0]}).", ""]
    lines += ["| round | lab (s) | hand (s) | lab ÷ hand |", "|---|---|---|---|"]
    for i, (lab, hand) in enumerate(zip(seconds["lab"], seconds["hand"], strict=True), 1):
        lines.append(f"| {i} | {lab:.1f} | {hand:.1f} | {lab / hand:.3f} |")
    lines.append("")
    if ratio:
        lines.append(f"lab ÷ hand, geometric mean (95 % interval): {ratio.text()}")
    if result.hits:
        lines += [
            f"Cache hit (the same recipe again), median of {len(result.hits)}: "
            f"{statistics.median(result.hits):.3f} s (max {max(result.hits):.3f} s)",
            f"Installed size of the build: {result.size / 2**20:.0f} MiB",
        ]
    lines += [f"Total run time: {duration_text(provenance.elapsed_s())}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
