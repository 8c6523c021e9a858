"""`pgbenchlab run PLAN` and `pgbenchlab quickstart`: run a campaign (or show its matrix with
`--dry-run`), then print its summary and write its report."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pgbenchlab import plan, report
from pgbenchlab.campaign import RESULTS_DB, Reporter, equipment, preflight, run_campaign
from pgbenchlab.campaign.events import Reporters
from pgbenchlab.campaign.hosts import load_plan
from pgbenchlab.campaign.resume import prospect
from pgbenchlab.cli import dry_run
from pgbenchlab.cli.build import build_plan
from pgbenchlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNS_FAILED,
    Subparsers,
    add_command,
    add_results_option,
    path_argument,
)
from pgbenchlab.cli.listener import Address, parse_address, serving
from pgbenchlab.cli.progress import JsonReporter, TerminalReporter, interactive
from pgbenchlab.errors import CampaignStopped, UserError
from pgbenchlab.plan import Shard
from pgbenchlab.store import Store


@dataclass(frozen=True)
class RunCommandOptions:
    plan: Path
    results: Path
    dry_run: bool
    fresh: bool
    quiet: bool
    json: bool
    check: bool = False
    budget_s: float | None = None
    shard: Shard | None = None
    metrics: Address | None = None  # --metrics: where the live metrics are served

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunCommandOptions:
        if getattr(args, "check", False) and args.dry_run:
            raise UserError("--check and --dry-run: give one (--check verifies more, runs nothing)")
        return cls(
            plan=args.plan if "plan" in args else quickstart_plan_path(),
            results=args.results,
            dry_run=args.dry_run,
            fresh=args.fresh,
            quiet=args.quiet,
            json=args.json,
            check=getattr(args, "check", False),
            budget_s=parse_budget(args.budget) if args.budget else None,
            shard=plan.parse_shard(args.shard) if args.shard is not None else None,
            metrics=parse_address(args.metrics) if args.metrics is not None else None,
        )


def parse_budget(text: str) -> float:
    """ "2h", "90min", "45m", "600s" or seconds: the time a campaign may take."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(h|min|m|s)?\s*", text)
    if not found or float(found[1]) <= 0:
        raise UserError(f"--budget {text!r}: give a duration such as 2h, 90min or 600s")
    return float(found[1]) * {"h": 3600, "min": 60, "m": 60, "s": 1, None: 1}[found[2]]


def quickstart_plan_path() -> Path:
    return Path(str(resources.files("pgbenchlab") / "plans" / "quickstart.toml"))


def add_arguments(subparsers: Subparsers) -> None:
    for name, help_text in (
        ("run", "run every cell of a plan file and store the results"),
        ("quickstart", "a small campaign on the embedded PostgreSQL, in minutes"),
    ):
        parser = add_command(subparsers, name, help_text, RunCommandOptions.from_args, run)
        if name == "run":
            parser.add_argument("plan", type=path_argument, help="the plan file (TOML)")
            parser.add_argument(
                "--check",
                action="store_true",
                help="verify everything the plan needs without running it: hosts reached, "
                "installations and binaries resolved (binaries fetched), cached builds' "
                "settings judged by their postgres, scripts parsed by pgbench and run once on a "
                "throwaway scale-1 dataset; every problem listed at once (exit 2), nothing built "
                "and no campaign server started",
            )
        add_results_option(parser)
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="check the plan as run does before anything starts, then show the expanded "
            "matrix (--json: as JSON), its order and estimated time; run nothing",
        )
        parser.add_argument(
            "--fresh",
            action="store_true",
            help="start the campaign anew instead of continuing it (keeps old results)",
        )
        parser.add_argument(
            "--budget",
            metavar="TIME",
            help='repeats = "auto": add rounds only while they fit in TIME (2h, 90min, 600s)',
        )
        parser.add_argument(
            "--shard",
            metavar="K/N",
            help="run only part K of N of the matrix, for N machines (each point of the matrix "
            "whole: its servers, settings and repeats); `pgbenchlab merge` joins their results",
        )
        add_metrics_option(parser)
        parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
        parser.add_argument("--json", action="store_true", help="JSON lines of events on stdout")


def add_metrics_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve the campaign's live metrics there while it runs (OpenMetrics over HTTP, "
        "for Prometheus to scrape): progress, ETA, the current run's cell, phase, TPS, latency "
        "and its servers' telemetry",
    )


def prospect_of(the_plan: plan.Plan, results: Path, *, fresh: bool) -> str:
    """What the run would do with the results directory (nothing there yet: a new campaign)."""
    if not (results / RESULTS_DB).is_file():
        return f'starts campaign "{the_plan.name}" (no results database there yet)'
    with Store(results / RESULTS_DB) as store:
        return prospect(store, the_plan, fresh=fresh)


def run(options: RunCommandOptions) -> int:
    # A dry run reaches no host: threads = "auto" shows this machine's CPUs there.
    the_plan = plan.load(options.plan) if options.dry_run else load_plan(options.plan)
    if options.shard is not None:
        the_plan = plan.sharded(the_plan, options.shard)
    if options.budget_s is not None and the_plan.auto is None:
        raise UserError('--budget needs a plan with repeats = "auto" (in [campaign])')
    if options.check:
        return dry_run.show_checks(equipment.checked(the_plan, options.results), json=options.json)
    checked = preflight.first_pass(the_plan)  # what the run refuses, the dry run refuses alike
    if options.dry_run:
        prospect = prospect_of(the_plan, options.results, fresh=options.fresh)
        return dry_run.show(the_plan, checked, prospect, json=options.json, quiet=options.quiet)
    preflight.refuse(checked)
    with serving(options.metrics, None if options.quiet else sys.stderr) as metrics:
        built = build_plan(the_plan, None if options.quiet or options.json else sys.stderr)
        with reporter_for(options.json, options.quiet, metrics) as reporter:
            outcome = run_campaign(
                the_plan,
                options.results,
                reporter,
                fresh=options.fresh,
                built=built,
                budget_s=options.budget_s,
            )
    if options.quiet and not options.json:
        print("\n".join(outcome.answers), file=sys.stderr)
    database = outcome.results_dir / RESULTS_DB
    try:
        summarise(options, database, outcome.campaign_id, the_plan.name)
    except UserError as exc:
        raise CampaignStopped(
            f"{exc}; every run is stored: `pgbenchlab report` writes the report once fixed"
        ) from None
    if outcome.interrupted:
        print("pgbenchlab: interrupted; run the same command again to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_RUNS_FAILED if outcome.failed else EXIT_OK


def summarise(options: RunCommandOptions, database: Path, campaign: int, name: str) -> None:
    """The summary table and the HTML report of a campaign that ran."""
    with Store(database) as store:
        summary = report.summary_text(store, campaign)
    print(summary, file=sys.stdout if not options.json else sys.stderr)
    html = report.write_report(database, campaign=name)
    print(f"results: {database}\nreport: {html}", file=sys.stderr)


@contextmanager
def reporter_for(json: bool, quiet: bool, metrics: Reporter | None = None) -> Iterator[Reporter]:
    """The display for a campaign, and its live metrics when served; a live display is taken
    down when the campaign ends."""
    with display(json, quiet) as shown:
        yield shown if metrics is None else Reporters(shown, metrics)


@contextmanager
def display(json: bool, quiet: bool) -> Iterator[Reporter]:
    if json:
        yield JsonReporter()
    elif quiet or not interactive(sys.stderr):
        yield TerminalReporter(sys.stderr, quiet)
    else:
        from pgbenchlab.cli.live import LiveReporter  # rich is loaded only for a live display

        with LiveReporter.on_stderr() as live:
            yield live
