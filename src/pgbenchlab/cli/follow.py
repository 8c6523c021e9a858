"""`pgbenchlab follow SUITE --source git:PATH --branch B`: a branch's commits measured, changes
found and bisected; run again (from cron, a systemd timer) to measure what is new."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli.bisect import add_search_options, budget_seconds, percentage, say_unless
from pgbenchlab.cli.common import (
    EXIT_OK,
    EXIT_RUNS_FAILED,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    path_argument,
)
from pgbenchlab.cli.run import reporter_for
from pgbenchlab.errors import UserError
from pgbenchlab.follow import Follow, FollowOutcome, FollowRequest
from pgbenchlab.follow.history import FOLLOWED, Change
from pgbenchlab.follow.selection import ORDERS, Selection, parse_since
from pgbenchlab.report.views.follow import FollowChangeView, follow_view
from pgbenchlab.store import Store


@dataclass(frozen=True)
class FollowOptions:
    request: FollowRequest
    fail_on_change: bool
    json: bool
    quiet: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FollowOptions:
        refs = None
        if args.range is not None:
            first, dots, last = args.range.partition("..")
            if not dots or not first or not last:
                raise UserError(f'--range must be A..B, two refs; got "{args.range}"')
            refs = (first, last)
        selection = Selection(
            every=args.every,
            daily=args.daily,
            since=None if args.since is None else parse_since(args.since),
            order=args.order,
        )
        if refs is not None and selection.since is not None:
            raise UserError("give --since or --range, not both")
        request = FollowRequest(
            plan=args.plan,
            source=args.source,
            branch=args.branch,
            results=args.results,
            selection=selection,
            range=refs,
            budget_s=budget_seconds(args),
            threshold=percentage(args.threshold),
            bisect=not args.no_bisect,
            retry_bisections=args.retry_bisections,
            max_rounds=args.max_rounds,
            metrics=tuple(m.strip() for m in args.metric.split(",") if m.strip()),
        )
        return cls(request, args.fail_on_change, args.json, args.quiet)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "follow",
        "measure the commits of a branch with a suite (each built incrementally, once), find "
        "the changes along them and bisect each to its commit",
        FollowOptions.from_args,
        run,
    )
    parser.add_argument(
        "plan", type=path_argument, help="the suite: one [build.NAME], one server, its cells"
    )
    add_search_options(
        parser,
        threshold="2%",
        budget='stop after this long, such as "8h" (the next call goes on)',
        rounds="rounds a bisection step may take",
    )
    parser.add_argument("--branch", required=True, help="the branch whose first-parent line")
    parser.add_argument("--every", type=int, help="every N-th commit (counted from the root)")
    parser.add_argument("--daily", action="store_true", help="the last commit of each day")
    parser.add_argument("--since", help="commits authored on or after this date (2026-01-01)")
    parser.add_argument("--range", help="the commits from A to B on the branch, both included")
    parser.add_argument("--order", choices=ORDERS, default="newest", help="which come first")
    parser.add_argument(
        "--metric",
        default=",".join(FOLLOWED),
        help=f"the metrics whose changes are bisected and gate: any stored metric (`compare "
        f"--metric` lists them), kept with the follow (default {','.join(FOLLOWED)}, always kept)",
    )
    parser.add_argument("--no-bisect", action="store_true", help="find changes, bisect none")
    parser.add_argument(
        "--retry-bisections",
        action="store_true",
        help="try again the bisections refused before (their rounds are kept)",
    )
    parser.add_argument(
        "--fail-on-change",
        action="store_true",
        help="exit 1 when a regression has an end among the commits this call measured",
    )
    add_results_option(parser)
    add_json_option(parser, "what this call measured and the changes, as JSON on stdout")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")


def run(options: FollowOptions) -> int:
    say = say_unless(options.quiet)
    with reporter_for(json=False, quiet=True) as reporter:
        outcome = Follow(options.request, reporter, say).run()
    views = change_views(options.request, outcome)
    if options.json:
        print(json.dumps(as_json(outcome, views), indent=2, sort_keys=True))
    else:
        print(summary_text(outcome, views))
    bad = outcome.new_bad_changes()
    return EXIT_RUNS_FAILED if options.fail_on_change and bad else EXIT_OK


def change_views(request: FollowRequest, outcome: FollowOutcome) -> dict[str, FollowChangeView]:
    """Each change as the site shows it (its culprit, its bisection), by the change's key."""
    if outcome.history is None or not outcome.history.changes:
        return {}
    with Store(request.results.resolve() / RESULTS_DB) as store:
        view = follow_view(store, outcome.history.follow)
    return {c.key: c for c in view.changes}


def change_json(change: Change, views: dict[str, FollowChangeView]) -> dict[str, Any]:
    found = change.found
    view = views.get(change.key)
    bisection = view.bisection if view else None
    return {
        "culprit": view.culprit if view else None,
        "bisection": None if bisection is None else {
            "name": bisection.name, "status": bisection.status, "refused": bisection.refused,
        },
        "cell": change.series.cell, "metric": change.series.metric,
        "before": change.before.commit_hash, "after": change.after.commit_hash,
        "untested": change.untested, "relative": found.relative_step,
        "low": found.ci_low, "high": found.ci_high, "verdict": str(found.verdict),
    }  # fmt: skip


def as_json(outcome: FollowOutcome, views: dict[str, FollowChangeView]) -> dict[str, Any]:
    return {
        "measured": [c.commit_hash for c in outcome.measured],
        "skipped": {c.commit_hash: f"{c.status}: {c.detail}" for c in outcome.skipped},
        "budget_spent": outcome.budget_spent,
        "changes": [change_json(c, views) for c in outcome.changes],
        "new_regressions": [change_json(c, views) for c in outcome.new_bad_changes()],
        "bisections": outcome.bisected,
    }


def summary_text(outcome: FollowOutcome, views: dict[str, FollowChangeView]) -> str:
    lines = [
        f"measured {len(outcome.measured)} commit(s), skipped {len(outcome.skipped)}"
        + (" (budget spent)" if outcome.budget_spent else "")
    ]
    for change in outcome.changes:
        found = change.found
        culprit = views[change.key].culprit if change.key in views else None
        lines.append(
            f"  {found.verdict}: {change.series.cell} {change.series.metric} "
            f"{found.relative_step:+.1%} [{found.ci_low:+.1%} … {found.ci_high:+.1%}] between "
            f"{change.before.short} and {change.after.short}"
            + (f"; culprit {culprit[:10]}" if culprit else "")
        )
    for name, status in outcome.bisected.items():
        lines.append(f"  bisection {name}: {status}")
    return "\n".join(lines)
