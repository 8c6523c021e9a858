"""`pgbenchlab export`: a campaign's runs as CSV, JSON or Parquet; a followed branch's
history as CSV (`--format history`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import exporting
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_results_option,
    open_store,
    path_argument,
)


@dataclass(frozen=True)
class ExportOptions:
    results: Path
    campaign: str | None
    format: str
    output: Path | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExportOptions:
        return cls(
            results=args.results, campaign=args.campaign, format=args.format, output=args.output
        )


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "export",
        "export a campaign's runs as CSV, JSON or Parquet, or a followed branch's history "
        "(--format history: commit, time, cell, metric, value)",
        ExportOptions.from_args,
        run,
    )
    add_results_option(parser)
    parser.add_argument(
        "--campaign",
        help="campaign name (default: the latest); with --format history, the followed suite's",
    )
    parser.add_argument("--format", choices=exporting.FORMATS, default="csv")
    parser.add_argument(
        "-o", "--output", type=path_argument, help="output file (default: standard output)"
    )


def run(options: ExportOptions) -> int:
    with open_store(options.results) as store:
        if options.format == "history":
            rows = exporting.history_rows(store, options.campaign)
        else:
            rows = exporting.run_rows(store, store.campaign_id(options.campaign))
    exporting.write(rows, options.format, options.output)
    return EXIT_OK
