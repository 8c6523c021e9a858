"""`pgbenchlab installs`: the PostgreSQL installations found here, and the prebuilt server
binaries in the build cache."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pgbenchlab import installs, jsontext
from pgbenchlab.builds import prebuilt
from pgbenchlab.cli.common import EXIT_OK, Subparsers, add_command, add_json_option, print_table


@dataclass(frozen=True)
class InstallsOptions:
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> InstallsOptions:
        return cls(json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "installs",
        "list the PostgreSQL installations found here",
        InstallsOptions.from_args,
        run,
    )
    add_json_option(parser)


def run(options: InstallsOptions) -> int:
    found = installs.discover() + prebuilt.cached()
    if options.json:
        rows = [
            {
                "name": i.name,
                "source": i.source,
                "version": i.version.text,
                "bin_dir": str(i.bin_dir),
                "server": i.has_server,
                "pgbench": i.has_pgbench,
                "plan": plan_value(i),
            }
            for i in found
        ]
        print(jsontext.dumps(rows, indent=2))
        return EXIT_OK
    table = [["name", "version", "server", "pgbench", "in a plan", "bin directory"]]
    for i in found:
        table.append(
            [
                i.name,
                i.version.text,
                yes(i.has_server),
                yes(i.has_pgbench),
                plan_value(i),
                str(i.bin_dir),
            ]
        )
    print_table(table)
    return EXIT_OK


def plan_value(install: installs.Installation) -> str:
    """How a plan's `install =` names it."""
    if install.binaries:
        return f'{{ binaries = "{install.binaries}" }}'
    return f'"{install.name}"'


def yes(flag: bool) -> str:
    return "yes" if flag else "-"
