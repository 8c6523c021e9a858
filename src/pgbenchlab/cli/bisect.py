"""`pgbenchlab bisect PLAN --good REF --bad REF`: the commit that changed performance."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pgbenchlab import report
from pgbenchlab.bisect import Bisection, BisectRequest
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    path_argument,
)
from pgbenchlab.cli.run import reporter_for
from pgbenchlab.errors import BisectionRefused, UserError
from pgbenchlab.plan.values import Context, parse_seconds
from pgbenchlab.report.views.bisection import stopped_text
from pgbenchlab.store import BisectionRecord
from pgbenchlab.store.metrics import METRICS


@dataclass(frozen=True)
class BisectOptions:
    request: BisectRequest
    json: bool
    quiet: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BisectOptions:
        request = BisectRequest(
            plan=args.plan,
            source=args.source,
            good=args.good,
            bad=args.bad,
            results=args.results,
            metric=args.metric,
            threshold=percentage(args.threshold),
            expect=args.expect,
            budget_s=budget_seconds(args),
            min_rounds=args.min_rounds,
            max_rounds=args.max_rounds,
        )
        return cls(request, args.json, args.quiet)


def budget_seconds(args: argparse.Namespace) -> float | None:
    if args.budget is None:
        return None
    return float(parse_seconds(args.budget, Context("--budget"), "budget"))


def add_search_options(
    parser: argparse.ArgumentParser, *, threshold: str, budget: str, rounds: str
) -> None:
    """The options bisect and follow share: the checkout, the smallest change, the budget and
    the rounds a bisection's step may take."""
    parser.add_argument("--source", help="the git checkout: git:PATH (else the build's source)")
    parser.add_argument("--threshold", default=threshold, help="the smallest change that counts")
    parser.add_argument("--budget", help=budget)
    parser.add_argument("--max-rounds", type=int, default=10, help=rounds)


def say_unless(quiet: bool) -> Callable[[str], None]:
    """Progress lines on stderr, none with --quiet."""

    def say(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    return say


def percentage(text: str) -> float:
    try:
        return float(text.strip().removesuffix("%")) / 100
    except ValueError:
        raise UserError(f'--threshold must be a percentage such as "3%"; got {text!r}') from None


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "bisect",
        "find the commit that changed performance between a good and a bad ref, building and "
        "measuring commits of the plan's one cell",
        BisectOptions.from_args,
        run,
    )
    parser.add_argument(
        "plan", type=path_argument, help="the plan: one [build.NAME], one server, one cell"
    )
    add_search_options(
        parser,
        threshold="3%",
        budget='stop after this long, such as "6h" (resumable)',
        rounds="rounds a step may take",
    )
    parser.add_argument("--good", required=True, help="a ref that performs as expected")
    parser.add_argument("--bad", required=True, help="a later ref that does not")
    parser.add_argument(
        "--metric",
        default="tps",
        metavar="NAME",
        help="the metric a step is judged on (default %(default)s): " + ", ".join(METRICS),
    )
    parser.add_argument(
        "--expect",
        default="worse",
        choices=("worse", "better"),
        help="the bad end is worse (a regression, the default) or better than the good one",
    )
    parser.add_argument("--min-rounds", type=int, default=3, help="rounds before a step decides")
    add_results_option(parser)
    add_json_option(parser, "the bisection's record as JSON on stdout")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the answer")


def run(options: BisectOptions) -> int:
    say = say_unless(options.quiet)
    with reporter_for(json=False, quiet=True) as reporter:
        bisection = Bisection(options.request, reporter, say)
        try:
            record = bisection.run()
        except BisectionRefused:  # stored as refused: its page says why before the one line
            write_page(options.request, bisection.record, say)
            raise
    write_page(options.request, record, say)
    if options.json:
        print(json.dumps(as_json(record), indent=2, sort_keys=True))
    else:
        print(answer_text(record))
    return EXIT_OK


def write_page(request: BisectRequest, record: BisectionRecord, say: Callable[[str], None]) -> None:
    results = request.results
    page = report.write_bisection(
        results / RESULTS_DB, record.name, results / f"bisect-{record.name}.html"
    )
    say(f"results: {results / RESULTS_DB}\nreport: {page}")


def as_json(record: BisectionRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "status": record.status,
        "request": dict(record.request),
        "commits": list(record.commits),
        "steps": list(record.steps),
        "answer": record.answer,
    }


def answer_text(record: BisectionRecord) -> str:
    answer = record.answer or {}
    lines = [f"bisection {record.name}: {record.status}"]
    first = answer.get("first_bad")
    if first:
        lines.append(
            f"first bad commit: {first['hash']} {first['subject']} ({first['author_date']})"
        )
        change = answer.get("change")
        if change:
            lines.append(f"its change against its parent: {change['reason']}")
    elif answer.get("unsplit"):
        lines.append(
            "the change lies in these commits, which could not be split (they do not build or "
            "run, or stayed undecided): " + ", ".join(h[:10] for h in answer["unsplit"])
        )
    else:
        bracket = answer.get("bracket", ["?", "?"])
        lines.append(f"the change lies after {bracket[0][:10]} and at or before {bracket[1][:10]}")
    if stopped := answer.get("stopped"):
        lines.append(stopped_text(stopped))
    for step in record.steps:
        commit = str(step.get("commit") or "")[:10] or "-"
        lines.append(f"  {step['step']:<16} {commit:<10} {step['outcome']:<10} {step['detail']}")
    return "\n".join(lines)
