"""`pgbenchlab show RUN`: one run on one screen for a person; everything stored with --json."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import jsontext
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    open_store,
)
from pgbenchlab.report.render import run_text as runtext
from pgbenchlab.report.views import run as runview


@dataclass(frozen=True)
class ShowOptions:
    results: Path
    run_id: int
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ShowOptions:
        return cls(results=args.results, run_id=args.run_id, json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "show",
        "one run: its cell, pgbench's report, latency, what limited it, waits and server "
        "events (--json: everything stored about it)",
        ShowOptions.from_args,
        run,
    )
    add_results_option(parser)
    parser.add_argument("run_id", type=int, help="the run's id (see `pgbenchlab runs`)")
    add_json_option(parser, "everything stored about the run, as JSON (with per-second series)")


def run(options: ShowOptions) -> int:
    with open_store(options.results) as store:
        if options.json:
            print(jsontext.dumps(runview.run_detail(store, options.run_id), indent=2))
        else:
            print(runtext.as_text(runview.load(store, options.run_id)), end="")
    return EXIT_OK
