"""`pgbenchlab builds`: the build cache (key, source, commit, patches, options, size, age);
`--prune` deletes the builds no campaign of the results database refers to, except those a
running command (run, bisect, capacity, build) is using."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import builds, jsontext
from pgbenchlab.builds import CachedBuild
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    open_store,
    print_table,
)
from pgbenchlab.durations import duration_text


@dataclass(frozen=True)
class BuildsOptions:
    json: bool
    prune: bool
    results: Path

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BuildsOptions:
        return cls(json=args.json, prune=args.prune, results=args.results)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "builds",
        "list the PostgreSQL builds in the build cache (--prune: delete those no campaign in "
        "the results database used)",
        BuildsOptions.from_args,
        run,
    )
    add_json_option(parser)
    add_results_option(parser)
    parser.add_argument(
        "--prune",
        action="store_true",
        help="delete every cached build that no campaign in --results DIR refers to",
    )


def run(options: BuildsOptions) -> int:
    root = builds.cache_root()
    if options.prune:
        with open_store(options.results) as store:
            keep = store.build_keys()
        pruned = builds.prune(root, keep)
        freed = sum(b.size for b in pruned.removed)
        trees, trees_in_use = builds.prune_trees(root)
        in_use = [b.key for b in pruned.in_use] + [f"tree {key}" for key in trees_in_use]
        print(
            f"pruned {len(pruned.removed)} build(s), {freed / 1e6:.0f} MB; kept "
            f"{len(keep)} that campaigns ran; incremental build trees: {trees / 1e6:.0f} MB"
            + (f"; left in use by a running command: {', '.join(in_use)}" if in_use else ""),
            file=sys.stderr,
        )
        return EXIT_OK
    found = builds.cached_builds(root)
    if options.json:
        print(jsontext.dumps([as_dict(b) for b in found], indent=2))
        return EXIT_OK
    if not found:
        print(f"no builds in {root}", file=sys.stderr)
        return EXIT_OK
    table = [["key", "version", "source", "commit/digest", "patches", "options", "size", "age"]]
    now = time.time()
    for build in found:
        p = build.provenance
        source = p.get("source", {})
        table.append(
            [
                build.key,
                str(p.get("version", "-")),
                f"{source.get('kind')}:{source.get('location')}",
                str(source.get("identity", "-"))[:12],
                ", ".join(x["name"] for x in p.get("patches", [])) or "-",
                " ".join(p.get("configure", [])) or "-",
                f"{build.size / 1e6:.0f} MB",
                duration_text(now - build.modified),
            ]
        )
    print_table(table)
    print(f"\ncache: {root}", file=sys.stderr)
    return EXIT_OK


def as_dict(build: CachedBuild) -> dict[str, object]:
    return {"key": build.key, "path": str(build.path), **build.provenance}
