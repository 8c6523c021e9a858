"""Build time: pgbenchlab's build of a PostgreSQL source against the same build by hand.

    .venv/bin/python bench/build.py [--rounds 2] [--package postgresql-13]

The figure of record is the command without options (about 6 minutes on 2 cores). Debian's
source tarball of the package is fetched once into a cache beside the system's temporary files
(not timed). Then, round by round in a rotating order, each into a fresh directory:
  lab   `builds.builder.ensure` of a `tar:` recipe with an empty cache: unpack, configure,
        make, install, provenance, rename into the cache (the whole of `pgbenchlab build`
        after the source is fetched);
  hand  the same tarball: `tar xf`, `./configure` with the same options and flags, `make -j2`,
        `make -C contrib/pg_stat_statements`, and both installs.
The ratio lab ÷ hand is taken per round (the host drifts); its geometric mean has a t
interval over the rounds. Then the cache hit: `ensure` of the same recipe again (median of 5),
and the installed size. Writes bench/build.md from that one run.
Requirement (issue 14): lab ÷ hand ≤ 1.10; cache hit ≤ 2 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import HERE, Provenance, duration_text, paired_ratio, rotated
from pgbenchlab.builds import builder, cache, sources
from pgbenchlab.builds.compile import STATEMENTS_DIR
from pgbenchlab.builds.recipe import BuildRecipe, version_flags

OPTIONS = ("--without-readline", "--without-icu", "--without-zlib")
MODES = ("lab", "hand")
CACHE_HITS = 5
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
        ["make", "-j2"],
        ["make", "-j2", "-C", STATEMENTS_DIR],
        ["make", "install", dest],
        ["make", "-C", STATEMENTS_DIR, "install", dest],
    ]
    for argv in steps:
        subprocess.run(argv, cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started, version


def by_lab(recipe: BuildRecipe, root: Path) -> float:
    started = time.monotonic()
    builder.ensure(recipe, root=root)
    return time.monotonic() - started


def cache_hits(recipe: BuildRecipe, root: Path) -> list[float]:
    return [by_lab(recipe, root) for _ in range(CACHE_HITS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--package", default="postgresql-13")
    parser.add_argument("--output", type=Path, default=HERE / "build.md")
    args = parser.parse_args()
    provenance = Provenance.start()
    tarball = sources.debian_tarball(args.package, FETCH_ROOT)
    recipe = BuildRecipe(name="bench", source=f"tar:{tarball}", configure=OPTIONS)
    version = ""
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="pgbenchlab-bench-build-") as scratch:
        for round_no in range(args.rounds):
            for mode in rotated(MODES, round_no):
                work = Path(scratch) / f"{mode}-{round_no}"
                work.mkdir()
                if mode == "lab":
                    took = by_lab(recipe, work)
                else:
                    took, version = by_hand(tarball, work)
                seconds[mode].append(took)
                print(f"round {round_no + 1} {mode}: {took:.1f} s", flush=True)
                if mode == "hand" or round_no < args.rounds - 1:
                    shutil.rmtree(work)
        last = Path(scratch) / f"lab-{args.rounds - 1}"
        hits = cache_hits(recipe, last)
        size = sum(cache.tree_size(p) for p in (last / "builds").iterdir())
    text = markdown(provenance, args, version, seconds, hits, size)
    args.output.write_text(text)
    print(text)


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    version: str,
    seconds: dict[str, list[float]],
    hits: list[float],
    size: int,
) -> str:
    ratio = paired_ratio(seconds["hand"], seconds["lab"])
    lines = [
        "# Build time: pgbenchlab's build against the same build by hand",
        "",
        *provenance.header(),
        "",
        f"Ran: Debian's `{args.package}` source tarball (PostgreSQL {version}), configure "
        f"`{' '.join(OPTIONS)}`, gcc, `make -j2`; {args.rounds} rounds, the order rotating. "
        "All figures are from this run of `bench/build.py` (its docstring describes both "
        "builds).",
        "Requirement: lab ÷ hand ≤ 1.10; a cache hit ≤ 2 s.",
        "",
        "| round | lab (s) | hand (s) | lab ÷ hand |",
        "|---|---|---|---|",
    ]
    for i, (lab, hand) in enumerate(zip(seconds["lab"], seconds["hand"], strict=True), 1):
        lines.append(f"| {i} | {lab:.1f} | {hand:.1f} | {lab / hand:.3f} |")
    lines += [
        "",
        f"lab ÷ hand, geometric mean (95 % interval): {ratio.text()}",
        f"Cache hit (the same recipe again), median of {len(hits)}: "
        f"{statistics.median(hits):.3f} s (max {max(hits):.3f} s)",
        f"Installed size of the build: {size / 2**20:.0f} MiB",
        f"Total run time: {duration_text(provenance.elapsed_s())}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
