"""`pgbenchlab profile RUN_ID`: a profiled run's top functions, self and total, by backend
type; `--diff RUN_A RUN_B`: what changed, in CPU time per committed transaction. Either of the
server's processes (the default) or, with `--process pgbench`, of the run's pgbench."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import jsontext
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    fmt,
    open_store,
    print_table,
)
from pgbenchlab.profiles import PROCESSES, SERVER
from pgbenchlab.report.views.profile import (
    ProfileComparison,
    RunProfile,
    compare_profiles,
    comparison_json,
    profile_json,
    run_profile,
)


@dataclass(frozen=True)
class ProfileOptions:
    results: Path
    run_ids: tuple[int, ...]
    diff: bool
    limit: int
    json: bool
    process: str = SERVER

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProfileOptions:
        if args.diff is not None:
            if args.run_id is not None:
                raise argparse.ArgumentTypeError("give RUN_ID or --diff RUN_A RUN_B, not both")
            ids = tuple(args.diff)
        elif args.run_id is None:
            raise argparse.ArgumentTypeError("give RUN_ID or --diff RUN_A RUN_B")
        else:
            ids = (args.run_id,)
        return cls(args.results, ids, args.diff is not None, args.limit, args.json, args.process)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "profile",
        "a profiled run's top functions, self and total, by backend type (--diff A B: what "
        "changed in CPU time per committed transaction)",
        _options,
        run,
    )
    add_results_option(parser)
    parser.add_argument("run_id", type=int, nargs="?", help="a profiled run's id")
    parser.add_argument("--diff", type=int, nargs=2, metavar=("RUN_A", "RUN_B"))
    parser.add_argument("--limit", type=int, default=15, help="functions per table (15)")
    parser.add_argument(
        "--process",
        choices=PROCESSES,
        default=SERVER,
        help="whose profile: the server's processes (default) or the run's pgbench",
    )
    add_json_option(parser)


def _options(args: argparse.Namespace) -> ProfileOptions:
    try:
        return ProfileOptions.from_args(args)
    except argparse.ArgumentTypeError as exc:
        from pgbenchlab.errors import UserError

        raise UserError(f"profile: {exc}") from None


def run(options: ProfileOptions) -> int:
    with open_store(options.results) as store:
        found = [run_profile(store, i, options.limit, options.process) for i in options.run_ids]
    if options.diff:
        comparison = compare_profiles(found[0], found[1], options.limit)
        if options.json:
            print(jsontext.dumps(comparison_json(comparison), indent=2))
        else:
            print_comparison(comparison)
    elif options.json:
        print(jsontext.dumps(profile_json(found[0]), indent=2))
    else:
        print_profile(found[0])
    return EXIT_OK


def print_header(found: RunProfile) -> None:
    p = found.profile
    print(found.label)
    lost = f", {p.lost:,} lost" if p.lost else ", none lost"
    if p.counted:
        print(f"  {p.extent} over {fmt(p.transactions, ',')} transactions (setup excluded)")
        print(f"  counted: {p.target}")
        per_tx = fmt(found.instructions_per_tx, ",.0f")
        print(f"  {p.unit} per committed transaction: {per_tx} (the run's)")
    else:
        print(f"  {p.extent} over {fmt(p.seconds, '.1f')} s{lost}")
        print(f"  profiled: {p.target}")
        print(f"  CPU per committed transaction: {fmt(found.cpu_ms_per_tx, '.3f')} ms")
    if p.complete_share is not None:
        print(f"  stacks reaching main(): {p.complete_share:.0%}")
    if p.symbols:
        print(f"  limits: {p.symbols}")
    for other in found.also:
        print(f"  also profiled: {other} (`pgbenchlab profile {found.run_id} --process {other}`)")


def print_profile(found: RunProfile) -> None:
    print_header(found)
    kinds = ", ".join(f"{k} {n / found.profile.samples:.0%}" for k, n in found.backends.items())
    print(f"  backend types: {kinds}")
    current = None
    rows: list[list[str]] = []
    for t in found.top:
        if t.backend_type != current:
            current = t.backend_type
            rows.append([f"[{current}]", "self", "total", ""])
        rows.append(
            [
                f"  {t.function}",
                f"{t.self_share:6.1%}",
                f"{t.total_share:6.1%}",
                f"{t.self_samples}",
            ]
        )
    print()
    print_table(rows)


def print_comparison(found: ProfileComparison) -> None:
    print_header(found.a)
    print_header(found.b)
    print()
    unit = found.a.profile.unit
    print(f"{unit} per committed transaction (A → B), largest change in self time first:")
    rows = [["function", "self A", "self B", "change", "total A", "total B"]]
    for r in found.rows:
        rows.append(
            [
                r.function,
                f"{r.self_a_us:.2f}",
                f"{r.self_b_us:.2f}",
                f"{r.self_change_us:+.2f}",
                f"{r.total_a_us:.2f}",
                f"{r.total_b_us:.2f}",
            ]
        )
    print_table(rows)
