"""`pgbenchlab merge --results OUT IN...`: the results of machines that each ran a shard of a
plan (`run --shard K/N`), joined into a new results directory."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path

from pgbenchlab import jsontext
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.campaign.fleet import merge_results
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    path_argument,
)
from pgbenchlab.results import missing_shards_text


@dataclass(frozen=True)
class MergeOptions:
    results: Path
    inputs: tuple[Path, ...]
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MergeOptions:
        return cls(results=args.results, inputs=tuple(args.inputs), json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "merge",
        "join results directories (the shards of a plan run on several machines) into a new one",
        MergeOptions.from_args,
        run,
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        type=path_argument,
        metavar="IN",
        help="results directories (or their results.db)",
    )
    add_results_option(parser)
    add_json_option(parser)


def run(options: MergeOptions) -> int:
    merged = merge_results(options.results, options.inputs)
    database = options.results / RESULTS_DB
    if options.json:
        print(jsontext.dumps({"results": str(database), "campaigns": [asdict(m) for m in merged]}))
        return EXIT_OK
    for campaign in merged:
        line = f'campaign "{campaign.name}": {campaign.runs} run(s) from {campaign.inputs} input(s)'
        if campaign.missing:
            line += f"; incomplete: {missing_shards_text(campaign.missing)}"
        print(line)
    print(f"results: {database}")
    return EXIT_OK
