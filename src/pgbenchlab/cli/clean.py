"""`pgbenchlab clean`: stop and delete the PostgreSQL clusters campaigns created."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import jsontext
from pgbenchlab.campaign import remove_clusters
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
)


@dataclass(frozen=True)
class CleanOptions:
    results: Path
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CleanOptions:
        return cls(results=args.results, json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "clean",
        "stop and delete the PostgreSQL clusters campaigns created",
        CleanOptions.from_args,
        run,
    )
    add_results_option(parser)
    add_json_option(parser)


def run(options: CleanOptions) -> int:
    removed = remove_clusters(options.results)
    if options.json:
        print(jsontext.dumps({"removed": [str(d) for d in removed]}, indent=2))
        return EXIT_OK
    for data_dir in removed:
        print(f"removed cluster {data_dir}")
    print(f"{len(removed)} clusters removed; the results database and raw outputs are kept")
    return EXIT_OK
