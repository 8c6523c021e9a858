"""`pgbenchlab new STUDY`: a complete, commented plan for this machine, on standard output."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import studies
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_results_option,
    path_argument,
)


@dataclass(frozen=True)
class NewOptions:
    study: str
    results: Path
    study_options: studies.StudyOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> NewOptions:
        return cls(
            study=args.study,
            results=args.results,
            study_options=studies.StudyOptions(
                quick=args.quick,
                source=args.source,
                base=args.base,
                patches=tuple(args.patch or ()),
                series=tuple(args.series or ()),
                prefixes=args.prefixes,
                data_dirs=tuple(args.data_dir or ()),
                majors=tuple(m.strip() for m in (args.majors or "").split(",") if m.strip()),
            ),
        )


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "new",
        f"write a study's plan for this machine to standard output: {', '.join(studies.STUDIES)}",
        NewOptions.from_args,
        run,
    )
    parser.add_argument("study", metavar="STUDY", help=", ".join(studies.STUDIES))
    parser.add_argument(
        "--quick", action="store_true", help="a variant that runs in minutes (tiny, short runs)"
    )
    add_results_option(parser)
    parser.add_argument("--source", help="patch: the PostgreSQL checkout, git:/path")
    parser.add_argument("--base", metavar="REF", help="patch: the commit the patches apply to")
    parser.add_argument(
        "--patch",
        type=path_argument,
        action="append",
        metavar="FILE",
        help="patch: a patch (repeatable)",
    )
    parser.add_argument(
        "--series",
        type=path_argument,
        action="append",
        metavar="PATH",
        help="patch: a series as posted, applied in order as one build: an mbox, or a "
        "directory of v3-0001-… files (repeatable)",
    )
    parser.add_argument(
        "--prefixes",
        action="store_true",
        help="patch: each prefix of each series a build too (NAME-p1, NAME-p2 …)",
    )
    parser.add_argument(
        "--majors",
        metavar="LIST",
        help="archaeology: the majors to compare, e.g. 9.6,10,11,12,13,14,15,16,17,18 (each "
        "installed, built from the build cache, or else prebuilt binaries)",
    )
    parser.add_argument(
        "--data-dir",
        type=path_argument,
        action="append",
        metavar="DIR",
        help="platform, tuning: a data directory on the storage to test (repeatable)",
    )


def run(options: NewOptions) -> int:
    facts = studies.gather(options.study_options.data_dirs or (options.results,))
    print(studies.render(options.study, facts, options.study_options), end="")
    return EXIT_OK
