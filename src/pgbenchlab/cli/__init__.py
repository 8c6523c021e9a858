"""The command line: argument parsing, the progress displays and exit codes, over the library.

One module per command, each in the same shape: `add_arguments(subparsers)` declares it, a
frozen options dataclass is built from the parsed arguments (`Options.from_args`, which
refuses combinations that make no sense), and `run(options)` calls the library and returns
the exit code. `main` assembles them and is the only place user mistakes are caught.

Exit codes: 0 done, 1 some runs failed (the campaign finished) or the results could no longer
be written (the campaign stopped), 2 a user mistake or an environment fault the user can fix
(one line says what), 130 interrupted.

May import everything in pgbenchlab; nothing imports from here.
"""

from __future__ import annotations

import argparse
import os
import sys

from pgbenchlab import __version__
from pgbenchlab.builds import using as using_builds
from pgbenchlab.cli.commands import COMMANDS
from pgbenchlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, restore_interrupt
from pgbenchlab.cli.progress import run_seconds
from pgbenchlab.cli.run import quickstart_plan_path
from pgbenchlab.errors import UserError

__all__ = ["build_parser", "main", "quickstart_plan_path", "run_seconds"]


def main(argv: list[str] | None = None) -> int:
    restore_interrupt()  # started in the background: its children still stop when asked
    args = build_parser().parse_args(argv)
    try:
        with using_builds():  # the builds a command uses are never pruned while it runs
            return int(args.run(args.options_from(args)))
    except UserError as exc:  # exit 2 before anything started; 1 once a campaign ran
        print(f"pgbenchlab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # a Stopped one says what it stopped and cleaned up
        print(f"pgbenchlab: interrupted{f': {exc}' if str(exc) else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into head, say: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps Python's exit flush quiet
        return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgbenchlab", description="PostgreSQL OLTP performance laboratory"
    )
    parser.add_argument("--version", action="version", version=f"pgbenchlab {__version__}")
    subparsers = parser.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_arguments(subparsers)
    return parser
