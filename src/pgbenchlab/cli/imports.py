"""`pgbenchlab import outputs DIR`: results made elsewhere become a campaign (see `importing`).

Prints the campaign stored, its runs, and every file that gave nothing with the reason; the
same directory imported again with the same pattern is a no-op that says which campaign holds
it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import files
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_results_option,
    path_argument,
    print_table,
)
from pgbenchlab.errors import UserError
from pgbenchlab.importing import AxisMap, ImportOutcome, import_outputs, import_pgbench_tools

MAP_HELP = (
    "a regular expression searched in each output's path under DIR; its named groups give the "
    "axes the report does not print (server, rate, connection, connect) or check those it does "
    "(clients, threads, scale, duration, transactions, protocol, workload, latency_limit); "
    "repeat is matched and left (repeats are numbered in path order); any other name becomes a "
    "setting of the server's variant; "
    "e.g. 'c(?P<clients>\\d+)-s(?P<scale>\\d+)'"
)


@dataclass(frozen=True)
class ImportOutputsOptions:
    results: Path
    directory: Path
    axis_map: AxisMap
    name: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ImportOutputsOptions:
        directory: Path = args.directory
        name = args.name or files.file_name(directory.resolve().name)
        if not files.is_plain_name(name):
            raise UserError(f"--name {name!r}: use letters, digits, '.', '_' and '-'")
        return cls(args.results, directory, AxisMap.parse(args.map), name)


@dataclass(frozen=True)
class ImportToolsOptions:
    results: Path
    conninfo: str
    duration_s: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ImportToolsOptions:
        if args.duration < 1:
            raise UserError("--duration: give the run time of pgbench-tools' tests in seconds")
        return cls(args.results, args.conninfo, args.duration)


def add_arguments(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "import",
        help="import results made elsewhere as a campaign (pgbench outputs and -l logs)",
        description="import results made elsewhere as a campaign",
    )
    kinds = parser.add_subparsers(required=True, metavar="KIND")
    outputs = add_command(
        kinds,
        "outputs",
        "a directory tree of pgbench outputs (9.6 to 18) and their -l logs, as shell loops "
        "leave them",
        ImportOutputsOptions.from_args,
        run_outputs,
    )
    outputs.add_argument("directory", type=path_argument, metavar="DIR")
    outputs.add_argument("--map", metavar="REGEX", help=MAP_HELP)
    outputs.add_argument(
        "--name", metavar="CAMPAIGN", help="the campaign's name (default: DIR's name)"
    )
    add_results_option(outputs)
    tools = add_command(
        kinds,
        "pgbench-tools",
        "pgbench-tools' results database: each test set a campaign, each test a run",
        ImportToolsOptions.from_args,
        run_pgbench_tools,
    )
    tools.add_argument(
        "conninfo", metavar="CONNINFO", help='its connection string ("host=h dbname=results")'
    )
    tools.add_argument(
        "--duration",
        type=int,
        required=True,
        metavar="SECONDS",
        help="the run time of its tests (its config's RUNTIME: pgbench-tools does not store it)",
    )
    add_results_option(tools)


def run_outputs(options: ImportOutputsOptions) -> int:
    outcome = import_outputs(options.results, options.directory, options.axis_map, options.name)
    if outcome.already is not None:
        print(
            f"{options.directory}: already imported as campaign {outcome.already!r} (the same "
            "files and pattern): nothing done"
        )
        return EXIT_OK
    print_outcome(outcome)
    return EXIT_OK


def run_pgbench_tools(options: ImportToolsOptions) -> int:
    for outcome in import_pgbench_tools(options.results, options.conninfo, options.duration_s):
        if outcome.already is not None:
            print(f"test set already imported as campaign {outcome.already!r}: nothing done")
        else:
            print_outcome(outcome)
    return EXIT_OK


def print_outcome(outcome: ImportOutcome) -> None:
    campaign = outcome.campaign
    runs = campaign.runs
    with_log = sum(r.latency is not None for r in runs)
    print(
        f"campaign {campaign.name!r} (id {outcome.campaign_id}, imported): {len(runs)} run(s) "
        f"from {campaign.source}, {with_log} with percentiles from their -l log, "
        f"{len(campaign.files)} file(s) recorded with their SHA-256"
    )
    if outcome.unread:
        print(f"{len(outcome.unread)} file(s) not read:")
        print_table([["  file", "why"], *([f"  {f.path}", f.note] for f in outcome.unread)])
