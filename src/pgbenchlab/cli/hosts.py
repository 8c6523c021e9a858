"""`pgbenchlab hosts PLAN.toml`: each [[host]] of a plan reachable or not (why, and the fix),
what the plan runs there (its servers, managed or external, and pgbench) and what it is: OS,
CPUs, memory, PostgreSQL installations, clock offset to this machine."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import jsontext, plan
from pgbenchlab.campaign.hosts import HostSurvey, survey
from pgbenchlab.cli.common import EXIT_OK, Subparsers, add_command, add_json_option, print_table

EXIT_UNREACHABLE = 1


@dataclass(frozen=True)
class HostsOptions:
    plan: Path
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> HostsOptions:
        return cls(plan=Path(args.plan), json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "hosts",
        "check a plan's [[host]]s over SSH and tell what each is",
        HostsOptions.from_args,
        run,
    )
    parser.add_argument("plan", help="the plan file")
    add_json_option(parser)


def run(options: HostsOptions) -> int:
    surveys = survey(plan.load(options.plan))
    if options.json:
        print(jsontext.dumps([as_json(s) for s in surveys], indent=2))
    else:
        print_surveys(surveys)
    return EXIT_UNREACHABLE if any(s.problem for s in surveys) else EXIT_OK


def as_json(found: HostSurvey) -> dict[str, object]:
    return {
        "name": found.name,
        "ssh": found.ssh,
        "roles": list(found.roles),
        "reachable": found.reachable,
        "usable": found.problem is None,
        "problem": found.problem,
        "os": found.os,
        "kernel": found.kernel,
        "cpus": found.cpus,
        "memory_bytes": found.memory_bytes,
        "installs": [
            {"name": i.name, "version": i.version.text, "bin_dir": str(i.bin_dir)}
            for i in found.installs
        ],
        "clock_offset_s": found.clock_offset_s,
        "clock_uncertainty_s": found.clock_uncertainty_s,
    }


def print_surveys(surveys: list[HostSurvey]) -> None:
    table = [["host", "ssh", "runs", "os", "cpus", "memory", "postgresql", "clock offset"]]
    for found in surveys:
        if found.problem:
            continue
        memory = f"{found.memory_bytes / 2**30:.1f} GiB" if found.memory_bytes else "?"
        versions = ", ".join(i.version.text for i in found.installs if i.has_server) or "none"
        offset = (
            f"{found.clock_offset_s * 1e3:+.1f} ms ± {found.clock_uncertainty_s * 1e3:.1f}"
            if found.clock_offset_s is not None and found.clock_uncertainty_s is not None
            else "?"
        )
        runs = ", ".join(found.roles) or "nothing"
        row = [found.name, found.ssh, runs, found.os or "?", str(found.cpus or "?"), memory]
        table.append([*row, versions, offset])
    if len(table) > 1:
        print_table(table)
    for found in surveys:
        if found.problem:
            print(f"cannot use: {found.problem}")
