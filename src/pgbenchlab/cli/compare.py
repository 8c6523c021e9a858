"""`pgbenchlab compare`: two servers of a campaign, two campaigns, or the steps along an axis.

The options say which of the three comparisons is asked for; a combination that makes none of
them is a user mistake, refused before the results are opened."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pgbenchlab import jsontext
from pgbenchlab.analysis.multiplicity import DEFAULT_CORRECTION, Correction
from pgbenchlab.cli.common import (
    EXIT_OK,
    EXIT_RUNS_FAILED,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    open_store,
    print_table,
)
from pgbenchlab.errors import UserError
from pgbenchlab.plan import stored_verdicts
from pgbenchlab.report.render.tables import connection_cost_tables
from pgbenchlab.report.views import compare
from pgbenchlab.report.views import compare_series as series
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.capacity import CapacityView, capacity_views, compare_capacities
from pgbenchlab.report.views.capacity_tables import comparison_dict, comparison_table
from pgbenchlab.report.views.connection_cost import CostGroup, cost_groups, cost_json
from pgbenchlab.report.views.model import ReportView, ScalabilityView
from pgbenchlab.report.views.text import plain_table
from pgbenchlab.store import Store
from pgbenchlab.store.metrics import DEFAULT_METRICS, METRICS, metrics

SERIES_HELP = (
    "find where TPS, p50 or p99 step along AXIS, in every cell of the other axes: "
    "server (servers in the order the plan lists them: list versions oldest first), a "
    "[matrix.setting] name (its values in plan order), scale, clients, rate, "
    "latency_limit or duration (numeric order); or `campaign` with the campaigns as "
    "arguments, in order (one per commit or nightly build)"
)


@dataclass(frozen=True)
class CompareOptions:
    results: Path
    campaigns: tuple[str, ...]
    campaign: str | None
    baseline: str | None
    candidate: str | None
    series: str | None
    threshold: float
    fail_on_regression: bool
    json: bool
    rules: compare.CompareRules = field(default_factory=compare.CompareRules)
    # --equivalence and --correction as given (None: the compared campaign's plan decides)
    asked: tuple[float | None, Correction | None] = (None, None)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CompareOptions:
        options = cls(
            results=args.results,
            campaigns=tuple(args.campaigns),
            campaign=args.campaign,
            baseline=args.baseline,
            candidate=args.candidate,
            series=args.series,
            threshold=parse_threshold(args.threshold),
            fail_on_regression=args.fail_on_regression,
            json=args.json,
            rules=compare.CompareRules(
                threshold=parse_threshold(args.threshold),
                metrics=tuple(m.name for m in metrics(args.metric or DEFAULT_METRICS)),
                equivalence=parse_margin(args.equivalence) if args.equivalence else None,
                correction=Correction(args.correction or DEFAULT_CORRECTION),
            ),
            asked=(
                parse_margin(args.equivalence) if args.equivalence else None,
                Correction(args.correction) if args.correction else None,
            ),
        )
        options.check()
        return options

    def check(self) -> None:
        if self.series:
            self.check_series()
        elif self.campaigns:
            if len(self.campaigns) != 2 or self.baseline or self.candidate:
                raise UserError("compare CAMPAIGN_A CAMPAIGN_B, or --baseline and --candidate")
        elif not (self.baseline and self.candidate):
            raise UserError("give --baseline SERVER and --candidate SERVER, or two campaigns")

    def check_series(self) -> None:
        if self.baseline or self.candidate:
            raise UserError("--series scans every value of an axis; drop --baseline/--candidate")
        if self.rules.equivalence is not None:
            raise UserError("--equivalence judges two selections; drop it with --series")
        if self.series == series.CAMPAIGN and self.campaign:
            raise UserError("--series campaign takes the campaigns as arguments, in order")
        if self.series != series.CAMPAIGN and self.campaigns:
            raise UserError(
                f"--series {self.series} scans one campaign (--campaign NAME); "
                "campaigns in order need --series campaign"
            )


def parse_threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise UserError(f"--threshold {text!r}: give a share such as 3% or 0.03")
    return value


def parse_margin(text: str) -> float:
    """--equivalence 1%: the margin of an equivalence, a share above 0."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 1:
        raise UserError(f"--equivalence {text!r}: give a margin such as 1% or 0.01")
    return value


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "compare",
        "compare two servers of a campaign (--baseline/--candidate) or two campaigns, "
        "cell by cell, with confidence intervals and verdicts; or find the steps along an "
        "ordered axis (--series)",
        CompareOptions.from_args,
        run,
    )
    add_results_option(parser)
    parser.add_argument(
        "campaigns",
        nargs="*",
        metavar="CAMPAIGN",
        help="two campaigns to compare, or with --series campaign three or more, in order",
    )
    parser.add_argument("--campaign", help="within this campaign (default: the latest)")
    parser.add_argument("--baseline", metavar="SERVER")
    parser.add_argument("--candidate", metavar="SERVER")
    parser.add_argument("--series", metavar="AXIS", help=SERIES_HELP)
    parser.add_argument(
        "--threshold",
        default="2%",
        help="smallest change that matters, e.g. 3%% (default %(default)s)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="compare on this metric (repeatable, or a comma list; default tps,p99,p50): "
        + ", ".join(METRICS),
    )
    parser.add_argument(
        "--equivalence",
        metavar="MARGIN",
        help="also say whether each change lies within ±MARGIN, e.g. 1%% (two one-sided tests; "
        "default: the campaign plan's [campaign] equivalence, if any)",
    )
    parser.add_argument(
        "--correction",
        choices=[c.value for c in Correction],
        help="how the verdicts of many cells are adjusted: holm (family-wise error rate, "
        "the default) or bh (Benjamini–Hochberg, false-discovery rate); default: as the "
        "campaign's plan says ([campaign] correction), else holm",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when any cell regressed (with --series: when any step is a regression)",
    )
    add_json_option(parser)


def planned(options: CompareOptions, store: Store) -> CompareOptions:
    """The options with the baseline campaign plan's equivalence and correction where the
    command line gives none."""
    margin, correction = options.asked
    first = options.campaigns[0] if options.campaigns else options.campaign
    found = store.find_campaign(first)
    verdicts = stored_verdicts(found.plan_text if found else "")
    rules = replace(
        options.rules,
        equivalence=margin if margin is not None else verdicts.equivalence,
        correction=correction or verdicts.correction,
    )
    return replace(options, rules=rules)


def run(options: CompareOptions) -> int:
    if options.series:
        return run_series(options, options.series)
    with open_store(options.results) as store:
        options = planned(options, store)
        compared = options.campaigns or (options.campaign,)
        notes = compare.floor_notes(store, [store.campaign_id(c) for c in compared], options.rules)
        if options.campaigns:
            baseline, candidate = options.campaigns
            changes = compare.across_campaigns(
                store, baseline, candidate, options.threshold, options.rules
            )
        else:
            baseline, candidate = str(options.baseline), str(options.candidate)
            searches = capacity_views(store, store.campaign_id(options.campaign))
            if searches:
                return print_capacities(options, searches, baseline, candidate)
            changes = compare.within_campaign(
                store, options.campaign, baseline, candidate, options.threshold, options.rules
            )
        sides = cost_sides(store, options)
    if options.json:
        costs = [d for side in sides for d in side.as_dicts()]
        print(compare.as_json(changes, costs, options.rules, notes))
    else:
        text = compare.as_text(changes, baseline, candidate, options.rules, notes)
        print(text + costs_text(sides))
    if options.fail_on_regression and compare.regressed(changes):
        return EXIT_RUNS_FAILED
    return EXIT_OK


def print_capacities(
    options: CompareOptions, searches: list[CapacityView], baseline: str, candidate: str
) -> int:
    """A capacity campaign: the two servers' capacities, their ratio and its bracket."""
    found = compare_capacities(searches, baseline, candidate)
    if options.json:
        print(jsontext.dumps([comparison_dict(c) for c in found], indent=2))
        return EXIT_OK
    table = comparison_table(found, baseline, candidate)
    print(table.title)
    print_table([list(table.header), *(list(r) for r in table.rows)])
    print(table.note)
    return EXIT_OK


@dataclass(frozen=True)
class CostSide:
    """One compared server's (or campaign's) connection costs."""

    name: str
    view: ReportView
    groups: list[CostGroup]

    def as_dicts(self) -> list[dict[str, Any]]:
        confidence = self.view.confidence
        return [
            {"side": self.name, **cost_json(g, c, confidence)} for g in self.groups for c in g.costs
        ]


def cost_sides(store: Store, options: CompareOptions) -> list[CostSide]:
    """The compared servers' (or campaigns') connection costs, where the campaigns measured
    any: -C against persistent connections, tls against tcp."""
    sides: list[tuple[str, ReportView, str | None]]
    if options.campaigns:
        sides = [(name, load_view(store, store.campaign_id(name), detail=False), None)
                 for name in options.campaigns]  # fmt: skip
    else:
        view = load_view(store, store.campaign_id(options.campaign), detail=False)
        sides = [(str(s), view, str(s)) for s in (options.baseline, options.candidate)]
    return [
        CostSide(name, seen, [g for g in cost_groups(seen) if server in (None, g.server)])
        for name, seen, server in sides
    ]


def costs_text(sides: list[CostSide]) -> str:
    tables = [
        replace(table, title=f"{table.title}: {side.name}")
        for side in sides
        for table in connection_cost_tables(side.view, side.groups)
    ]
    return "".join(f"\n\n{plain_table(t)}" for t in tables)


def run_series(options: CompareOptions, axis: str) -> int:
    wanted = options.rules.metrics
    with open_store(options.results) as store:
        fits: tuple[ScalabilityView, ...] = ()
        if axis == series.CAMPAIGN:
            found = series.across_campaigns(
                store, list(options.campaigns), options.threshold, wanted
            )
        elif axis == "clients":  # with the scalability model of every series
            found, fits = series.with_scalability(
                store, options.campaign, options.threshold, wanted
            )
        else:
            found = series.within_campaign(store, options.campaign, axis, options.threshold, wanted)
    print(series.as_json(found, fits) if options.json else series.as_text(found, fits))
    if options.fail_on_regression and series.regressed(found):
        return EXIT_RUNS_FAILED
    return EXIT_OK
