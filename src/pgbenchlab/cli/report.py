"""`pgbenchlab report`: a campaign's report as HTML, Markdown or chart images."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import report
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_results_option,
    path_argument,
)
from pgbenchlab.errors import UserError


@dataclass(frozen=True)
class ReportOptions:
    results: Path
    campaign: str | None
    output: Path | None
    format: str
    images: Path | None
    baseline: str | None
    site: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportOptions:
        options = cls(
            results=args.results,
            campaign=args.campaign,
            output=args.output,
            format=args.format,
            images=args.images,
            baseline=args.baseline,
            site=args.site,
        )
        options.check()
        return options

    def check(self) -> None:
        given = [self.campaign, self.output, self.images, self.baseline, self.format != "html"]
        if self.site is not None and any(given):
            raise UserError(
                "--site writes every campaign's report, as HTML: drop --campaign, -o, "
                "--format, --images and --baseline"
            )


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "report",
        "write a campaign's report: HTML, Markdown, chart images",
        ReportOptions.from_args,
        run,
    )
    add_results_option(parser)
    parser.add_argument("--campaign", help="campaign name (default: the latest)")
    parser.add_argument(
        "-o",
        "--output",
        type=path_argument,
        help="output file (HTML: default report.html beside the results database; "
        "Markdown and text: default standard output)",
    )
    parser.add_argument("--format", choices=report.FORMATS, default="html")
    parser.add_argument(
        "--images", type=path_argument, metavar="DIR", help="also write every chart as PNG and SVG"
    )
    parser.add_argument(
        "--baseline", metavar="SERVER", help="the server others are compared with (default: first)"
    )
    parser.add_argument(
        "--site",
        type=path_argument,
        metavar="DIR",
        help="write one static site for the whole results database: an index of campaigns, "
        "each campaign's report and the comparisons of campaigns sharing cells",
    )


def run(options: ReportOptions) -> int:
    if options.site is not None:
        print(report.write_site(options.results / RESULTS_DB, options.site))
        return EXIT_OK
    written = report.write_report(
        options.results / RESULTS_DB,
        campaign=options.campaign,
        output=options.output,
        fmt=options.format,
        images_dir=options.images,
        baseline=options.baseline,
    )
    print(written, end="" if isinstance(written, str) else "\n")
    return EXIT_OK
