"""What the command modules share: exit codes, the common options, opening the results and
plain-text tables."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.stopsignals import restore_interrupt as restore_interrupt  # for main
from pgbenchlab.store import Store

DEFAULT_RESULTS = Path("pgbenchlab-results")
EXIT_OK, EXIT_RUNS_FAILED, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130

Subparsers = Any  # argparse's _SubParsersAction, private in typeshed


def add_command(
    subparsers: Subparsers,
    name: str,
    help_text: str,
    options_from: Callable[[argparse.Namespace], Any],
    run: Callable[[Any], int],
) -> argparse.ArgumentParser:
    """A subcommand whose parsed arguments become `options_from(args)`, handed to `run`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.set_defaults(options_from=options_from, run=run)
    return parser


def path_argument(text: str) -> Path:
    """A path option's value: refused when empty, as Path("") is the working directory (an
    empty --site would write there)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path: give a file or directory name")
    return Path(text)


def add_results_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results",
        type=path_argument,
        default=DEFAULT_RESULTS,
        metavar="DIR",
        help="results directory (database, raw outputs); default %(default)s",
    )


def add_json_option(
    parser: argparse.ArgumentParser, help_text: str = "machine-readable output"
) -> None:
    parser.add_argument("--json", action="store_true", help=help_text)


def open_store(results: Path) -> Store:
    return Store.existing(results / RESULTS_DB)


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[list[str]], stream: TextIO | None = None) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(),
            file=stream or sys.stdout,
        )
