"""`pgbenchlab capacity PLAN --slo "p99 <= 10ms, late <= 1%"`: the highest arrival rate each
server × cell sustains under the SLO, with its bracket and the probes behind it."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import jsontext
from pgbenchlab.analysis.capacity import SearchSettings
from pgbenchlab.analysis.slo import Slo, parse_slo
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.campaign.capacity import (
    DEFAULT_TRIAL_S,
    CapacityOptions,
    search_capacity,
)
from pgbenchlab.campaign.hosts import load_plan
from pgbenchlab.campaign.preflight import check_before_start
from pgbenchlab.cli.build import build_plan
from pgbenchlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNS_FAILED,
    Subparsers,
    add_command,
    add_results_option,
    path_argument,
    print_table,
)
from pgbenchlab.cli.listener import Address, parse_address, serving
from pgbenchlab.cli.run import add_metrics_option, reporter_for
from pgbenchlab.errors import UserError
from pgbenchlab.plan.values import Context, parse_seconds
from pgbenchlab.report.views.capacity import CapacityView, capacity_views
from pgbenchlab.report.views.capacity_tables import probes_table
from pgbenchlab.store import Store


@dataclass(frozen=True)
class Options:
    plan: Path
    slo: Slo
    trial_s: int
    tolerance: float
    results: Path
    fresh: bool
    quiet: bool
    json: bool
    metrics: Address | None = None  # --metrics: where the live metrics are served

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        trial = parse_seconds(args.trial, Context("capacity"), "--trial")
        tolerance = parse_tolerance(args.tolerance)
        return cls(
            args.plan,
            parse_slo(args.slo),
            trial,
            tolerance,
            args.results,
            args.fresh,
            args.quiet,
            args.json,
            parse_address(args.metrics) if args.metrics is not None else None,
        )


def parse_tolerance(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0.005 <= value <= 0.5:
        raise UserError(f"--tolerance {text!r}: give a share from 0.5% to 50%, such as 5%")
    return value


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "capacity",
        "find the highest arrival rate each server × cell sustains under an SLO",
        Options.from_args,
        run,
    )
    parser.add_argument(
        "plan", type=path_argument, help="the plan file (TOML), without a rate axis"
    )
    parser.add_argument(
        "--slo",
        required=True,
        help='upper bounds, e.g. "p99 <= 10ms, late <= 1%%, skipped <= 0.1%%" (metrics: p50 '
        "p90 p95 p99 p99.9 mean in whole us, ms or s; late, skipped with their %% sign); "
        "a skipped transaction counts as over every latency bound",
    )
    parser.add_argument(
        "--trial",
        default=f"{DEFAULT_TRIAL_S}s",
        help="length of the short trials (confirmations run the plan's duration); "
        "default %(default)s",
    )
    parser.add_argument(
        "--tolerance",
        default="5%",
        help="bisect until lowest fail ÷ highest pass ≤ 1 + this; default %(default)s",
    )
    add_results_option(parser)
    parser.add_argument(
        "--fresh", action="store_true", help="start the search anew (keeps old results)"
    )
    add_metrics_option(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the answers")
    parser.add_argument("--json", action="store_true", help="the answers as JSON on stdout")


def run(options: Options) -> int:
    the_plan = load_plan(options.plan)
    search = CapacityOptions(
        options.slo, SearchSettings(tolerance=options.tolerance), options.trial_s
    )
    check_before_start(the_plan, options.slo)  # every problem, before anything is built
    quiet = options.quiet or options.json
    with serving(options.metrics, None if quiet else sys.stderr) as metrics:
        built = build_plan(the_plan, None if quiet else sys.stderr)
        with reporter_for(False, quiet, metrics) as reporter:
            found = search_capacity(
                the_plan, search, options.results, reporter, fresh=options.fresh, built=built
            )
    database = found.outcome.results_dir / RESULTS_DB
    with Store(database) as store:
        views = capacity_views(store, found.outcome.campaign_id)
    if options.json:
        print(jsontext.dumps([v.as_dict() for v in views], indent=2))
    else:
        print_answers(views)
        print(f"results: {database} (campaign {found.campaign})", file=sys.stderr)
    if found.outcome.interrupted:
        print("pgbenchlab: interrupted; run the same command again to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    unanswered = any(v.answer is None or v.answer.rate is None for v in views)
    return EXIT_RUNS_FAILED if unanswered or found.outcome.failed else EXIT_OK


def print_answers(views: list[CapacityView]) -> None:
    for view in views:
        table = probes_table(view)
        print(f"{table.title} under {view.slo.text}")
        print_table([list(table.header), *(list(r) for r in table.rows)])
        print()
