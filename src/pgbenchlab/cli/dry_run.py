"""`run --dry-run`: the expanded matrix, its order and estimated time, as a table with a column
for every axis the plan varies, or (--json) as JSON; then the checks made before a campaign
starts, each with its outcome (refused, exit 2, when one found a problem)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pgbenchlab import jsontext, plan
from pgbenchlab.campaign import preflight
from pgbenchlab.campaign.preflight import CheckOutcome, Status
from pgbenchlab.cli.common import EXIT_OK, print_table
from pgbenchlab.cli.progress import print_plan_warnings
from pgbenchlab.durations import duration_text
from pgbenchlab.plan import RunSpec
from pgbenchlab.redaction import redact_setting

Column = Callable[[RunSpec], str]


def columns(the_plan: plan.Plan) -> dict[str, Column]:
    """Every column a run may need, the ones always shown first."""

    def of_servers(field: str) -> Column:
        def value(spec: RunSpec) -> str:
            found = [getattr(the_plan.server(n), field) for n in the_plan.members(spec.server)]
            return ",".join(str(v) for v in found if v) or "-"

        return value

    return {
        "#": lambda s: str(s.sequence + 1),
        "server": lambda s: s.server,
        "settings": lambda s: (
            ",".join(
                [f"{k}={redact_setting(k, v)}" for k, v in s.server_settings]
                + [f"{k}={v}" for k, v in s.sysctl]
            )
            or "-"
        ),
        "scale": lambda s: str(s.scale),
        "workload": lambda s: s.workload.name,
        "clients": lambda s: str(s.clients),
        "threads": lambda s: str(s.options.threads),
        "protocol": lambda s: s.options.protocol,
        "duration": lambda s: (
            f"{s.options.duration_s}s" if s.options.duration_s else f"-t {s.options.transactions}"
        ),
        "warmup": lambda s: f"{s.options.warmup_s}s",
        "rate": lambda s: f"{s.options.rate:g}" if s.options.rate else "-",
        "repeat": lambda s: str(s.repeat),
        # shown when some run differs from the rest (or from the default)
        "connection": lambda s: s.options.connection,
        "connect": lambda s: "-C" if s.options.connect else "-",
        "latency_limit": lambda s: (
            f"{s.options.latency_limit_ms:g}ms" if s.options.latency_limit_ms else "-"
        ),
        "max_tries": lambda s: str(s.options.max_tries),
        "profile": lambda s: s.options.profile,
        "vacuum": lambda s: s.options.vacuum,
        "reinit": lambda s: s.options.reinit,
        "checkpoint": lambda s: "on" if s.options.checkpoint else "off",
        "latency_log": lambda s: s.options.latency_log,
        "host": of_servers("host"),
        "cpus": of_servers("cpus"),
    }


ALWAYS = 12  # the first columns above
DEFAULTS = {
    "connection": "socket",
    "connect": "-",
    "latency_limit": "-",
    "max_tries": str(plan.DEFAULT_MAX_TRIES),
    "profile": "off",
    "vacuum": "pgbench",
    "reinit": "never",
    "checkpoint": "on",
    "latency_log": "auto",
    "host": "-",
    "cpus": "-",
}


def show(
    the_plan: plan.Plan, checked: list[CheckOutcome], prospect: str, *, json: bool, quiet: bool
) -> int:
    """The dry run's output: the plan's warnings (unless quiet), its matrix, what it would do
    with the results (`resume.prospect`) and the checks' outcomes; only the checks when one
    found a problem, then refused as `run` is."""
    passed = not any(o.status == Status.FAILED for o in checked)
    if not quiet and passed:
        print_plan_warnings(the_plan, sys.stderr)
    if json:
        print_json_of(the_plan, checked, prospect, with_runs=passed)
    else:
        if passed:
            print_table_of(the_plan)
            print(f"\nthe run {prospect}\n")
        print_checks(checked)
    preflight.refuse(checked)
    return EXIT_OK


def show_checks(checked: list[CheckOutcome], *, json: bool) -> int:
    """`run --check`'s output: every check's outcome (refused, exit 2, when one found a
    problem)."""
    if json:
        print(jsontext.dumps({"checks": [o.as_dict() for o in checked]}, indent=2))
    else:
        print_checks(checked)
    preflight.refuse(checked)
    return EXIT_OK


def print_checks(checked: list[CheckOutcome]) -> None:
    """Each check, in order, with its outcome, its problems and what it leaves for the
    campaign to check."""
    print("checks before the campaign starts:")
    width = max(len(o.check.name) for o in checked)
    for outcome in checked:
        print(f"  {outcome.check.name:<{width}}  {outcome.text}")
        for problem in outcome.problems:
            print(f"  {'':<{width}}  - {problem}")
        for item in outcome.later:
            print(f"  {'':<{width}}  · {item}")


def print_table_of(the_plan: plan.Plan) -> None:
    """The runs, one a line: the usual columns and each other axis whose value is not the
    same default for every run (so that no two cells read alike)."""
    found = columns(the_plan)
    names = list(found)[:ALWAYS] + [
        name
        for name in list(found)[ALWAYS:]
        if {found[name](s) for s in the_plan.specs} - {DEFAULTS[name]}
    ]
    print_table([names, *([found[n](s) for n in names] for s in the_plan.specs)])
    if the_plan.counts_generator_cpus:
        print(
            '\nthreads = "auto" counts this machine\'s CPUs here; the campaign counts those of '
            f"each load generator host ({', '.join(the_plan.pgbench_hosts)})"
        )
    auto = the_plan.auto
    if auto is not None:
        print(
            f"\nrepeats auto: {auto.min_repeats} rounds first, then more (up to "
            f"{auto.max_repeats}) only for cells whose answer is open (precision ±"
            f"{auto.precision:.0%}); the estimate is for the first rounds"
        )
    print(
        f"\n{len(the_plan.specs)} runs, order {the_plan.order}, "
        f"estimated {duration_text(the_plan.estimated_seconds())} (runs, warmups and ~1.5 s "
        "per run around them; plus initialising datasets)"
    )


def print_json_of(
    the_plan: plan.Plan, checked: list[CheckOutcome], prospect: str, *, with_runs: bool
) -> None:
    """The expanded matrix as one JSON object: the campaign, what the run would do with it,
    its estimate, every run (unless a check found a problem) and the checks' outcomes."""
    auto = the_plan.auto
    found: dict[str, Any] = {"campaign": the_plan.name, "the_run": prospect}
    if with_runs:
        found |= {
            "order": the_plan.order,
            "repeats": "auto" if auto else the_plan.repeats,
            "estimated_seconds": round(the_plan.estimated_seconds(), 1),
            "warnings": list(the_plan.warnings),
            "runs": [run_json(the_plan, spec) for spec in the_plan.specs],
        }
    found["checks"] = [o.as_dict() for o in checked]
    print(jsontext.dumps(found, indent=2))


def run_json(the_plan: plan.Plan, spec: RunSpec) -> dict[str, Any]:
    o = spec.options
    servers = [the_plan.server(n) for n in the_plan.members(spec.server)]
    return {
        "sequence": spec.sequence + 1,
        "repeat": spec.repeat,
        "server": spec.server,
        "host": ",".join(s.host for s in servers if s.host) or None,
        "cpus": ",".join(s.cpus for s in servers if s.cpus) or None,
        "settings": {k: redact_setting(k, v) for k, v in spec.server_settings},
        "sysctl": dict(spec.sysctl),
        "scale": spec.scale,
        "workload": spec.workload.name,
        "clients": spec.clients,
        "threads": o.threads,
        "protocol": o.protocol,
        "connection": o.connection,
        "connect": o.connect,
        "duration_s": o.duration_s,
        "transactions": o.transactions,
        "warmup_s": o.warmup_s,
        "rate": o.rate,
        "latency_limit_ms": o.latency_limit_ms,
        "max_tries": o.max_tries,
        "vacuum": o.vacuum,
        "checkpoint": o.checkpoint,
        "reinit": o.reinit,
        "latency_log": o.latency_log,
        "profile": o.profile,
        "cell_id": spec.cell_id,
    }
