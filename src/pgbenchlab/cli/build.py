"""`pgbenchlab build PLAN`: build (or find in the cache) every PostgreSQL the plan needs,
with a progress line per phase, and download its prebuilt binaries (so a campaign can then run
offline); `run` does the same before a campaign starts."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pgbenchlab import builds, plan
from pgbenchlab.builds import prebuilt
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    path_argument,
)
from pgbenchlab.durations import duration_text
from pgbenchlab.installs import Installation


@dataclass(frozen=True)
class BuildOptions:
    plan: Path
    quiet: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BuildOptions:
        return cls(plan=args.plan, quiet=args.quiet)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "build",
        "build the PostgreSQL versions, commits and patches a plan's [build.NAME] tables name "
        "(cached: a build already made takes no time)",
        BuildOptions.from_args,
        run,
    )
    parser.add_argument("plan", type=path_argument, help="the plan file (TOML)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the result")


def run(options: BuildOptions) -> int:
    the_plan = plan.load(options.plan)
    if not (the_plan.needed_builds or the_plan.needed_binaries):
        print(f"{options.plan}: no server uses a [build.NAME]; nothing to build", file=sys.stderr)
        return EXIT_OK
    made = build_plan(the_plan, None if options.quiet else sys.stderr)
    say = None if options.quiet else functools.partial(print, file=sys.stderr, flush=True)
    made += [prebuilt.ensure(spec, say=say) for spec in the_plan.needed_binaries]
    for install in made:
        facts = builds.provenance_of(install) or {}
        print(
            f"{install.build or 'binaries ' + install.binaries}: PostgreSQL "
            f"{install.version.text} · {facts.get('key', '-')} · {install.bin_dir}"
        )
    return EXIT_OK


def build_plan(the_plan: plan.Plan, stream: TextIO | None) -> list[Installation]:
    """The plan's builds, each made unless cached, with progress lines on stream."""
    if not the_plan.needed_builds:
        return []
    started = time.monotonic()

    def progress(name: str, phase: str, elapsed: float) -> None:
        if stream is not None:
            print(f"build {name}: {phase} ({duration_text(elapsed)})", file=stream, flush=True)

    made = builds.ensure_all(the_plan.needed_builds, progress)
    if stream is not None:
        took = duration_text(time.monotonic() - started)
        print(f"builds ready: {', '.join(i.build for i in made)} ({took})", file=stream)
    return made
