"""A plan file read, validated and expanded: `load` and `parse`, and the plan check's warnings."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pgbenchlab import cpusets, files
from pgbenchlab.errors import PlanError
from pgbenchlab.findings import scale_below_clients
from pgbenchlab.installs import BINARIES_PREFIX
from pgbenchlab.plan.auto import parse_repeats, parse_verdicts
from pgbenchlab.plan.builds import install_spec, parse_builds
from pgbenchlab.plan.counting import check_counting
from pgbenchlab.plan.dataset import parse_dataset
from pgbenchlab.plan.groups import check_group_specs, parse_groups, units
from pgbenchlab.plan.hosts import (
    check_builds_here,
    check_generator_clients,
    check_host_names,
    parse_hosts,
)
from pgbenchlab.plan.matrix import check_size, count_cells, expand_cells, order_runs
from pgbenchlab.plan.pooler import check_pooled, parse_pooler
from pgbenchlab.plan.rebuilds import check_restarts, expand_rebuilds
from pgbenchlab.plan.records import Plan, RunSpec
from pgbenchlab.plan.reset import check_reset
from pgbenchlab.plan.schema import (
    CAMPAIGN_KEYS,
    MATRIX_KEYS,
    OPTION_KEYS,
    ORDERS,
    PGBENCH_KEYS,
    RESTART_MODES,
    TOP_KEYS,
)
from pgbenchlab.plan.servers import check_temp_axis, parse_servers, with_tablespaces
from pgbenchlab.plan.values import (
    Context,
    check_finite,
    check_name,
    check_run_length,
    choice,
    cpu_list,
    numa_policy,
    plan_path,
    table,
)


def load(
    path: str | Path,
    *,
    cpu_count: int | None = None,
    generator_cpus: tuple[int, ...] | None = None,
) -> Plan:
    """Read, validate and expand a plan file."""
    file = Path(path)
    try:
        text = files.read_text(file)
    except files.Unreadable as exc:
        raise PlanError(f"cannot read the plan file: {exc}", where=str(file)) from None
    return parse(
        text,
        str(file),
        base=file.resolve().parent,
        cpu_count=cpu_count,
        generator_cpus=generator_cpus,
    )


def parse(
    text: str,
    path: str,
    *,
    base: Path,
    cpu_count: int | None = None,
    generator_cpus: tuple[int, ...] | None = None,
) -> Plan:
    """The plan in text. threads = "auto" counts the CPUs pgbench may use: its pinned ones,
    else this machine's (cpu_count, default: os.cpu_count()), or with [pgbench] hosts each
    host's (generator_cpus, in their order; this machine's count stands in for each until the
    campaign tells them: `campaign.hosts.load_plan`)."""
    ctx = Context(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"not valid TOML: {exc}", where=path) from None
    check_finite(data, ctx, "")
    ctx.check_keys(data, TOP_KEYS, "")
    campaign = table(data, "campaign", ctx)
    ctx.check_keys(campaign, CAMPAIGN_KEYS, "campaign")
    name = check_name(campaign.get("name", Path(path).stem), ctx, "campaign.name")
    repeats, auto = parse_repeats(campaign, ctx)
    order = choice(campaign.get("order", "interleaved"), ORDERS, ctx, "campaign.order")
    description = campaign.get("description", "")
    if not isinstance(description, str):
        raise ctx.fail("campaign.description", f"must be a string; got {description!r}")
    quick = campaign.get("quick", False)
    if not isinstance(quick, bool):
        raise ctx.fail("campaign.quick", f"must be true or false; got {quick!r}")
    seed = campaign.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ctx.fail("campaign.seed", f"must be an integer; got {seed!r}")
    pgbench = table(data, "pgbench", ctx)
    ctx.check_keys(pgbench, PGBENCH_KEYS, "pgbench")
    builds = parse_builds(data.get("build"), ctx, base)
    pgbench_install = pgbench.get("install", "newest")
    if "hosts" not in pgbench and isinstance(pgbench_install, str) and "/" in pgbench_install:
        pgbench_install = plan_path(pgbench_install, base)  # a bin directory of this machine
    pgbench_install = install_spec(pgbench_install, builds, ctx, "pgbench.install")
    if pgbench_install.startswith(BINARIES_PREFIX):
        raise ctx.fail("pgbench.install", "prebuilt binaries have no pgbench; name another")
    pgbench_cpus = cpu_list(pgbench["cpus"], ctx, "pgbench.cpus") if "cpus" in pgbench else None
    pgbench_numa = numa_policy(pgbench["numa"], ctx, "pgbench.numa") if "numa" in pgbench else None
    pgbench_profile = pgbench.get("profile", True)  # profiled runs profile pgbench too
    if not isinstance(pgbench_profile, bool):
        raise ctx.fail("pgbench.profile", f"must be true or false; got {pgbench_profile!r}")
    keep_logs = pgbench.get("keep_logs", False)  # load generators' whole logs brought back
    if not isinstance(keep_logs, bool):
        raise ctx.fail("pgbench.keep_logs", f"must be true or false; got {keep_logs!r}")
    dataset = parse_dataset(data.get("dataset"), ctx, base)
    defaults = table(data, "defaults", ctx)
    ctx.check_keys(defaults, OPTION_KEYS, "defaults")
    check_run_length(defaults, ctx, "defaults")
    matrix = table(data, "matrix", ctx)
    ctx.check_keys(matrix, MATRIX_KEYS, "matrix")
    servers, server_axes = parse_servers(data.get("server"), ctx, base, builds)
    servers = with_tablespaces(dataset, servers, ctx)
    check_temp_axis(dataset, matrix, server_axes, ctx)
    builds, servers, server_axes = expand_rebuilds(builds, servers, server_axes, ctx)
    restart = choice(campaign.get("restart", "never"), RESTART_MODES, ctx, "campaign.restart")
    check_restarts(restart, servers, ctx)
    groups, group_axes = parse_groups(data.get("server_group"), ctx, servers, server_axes)
    hosts = parse_hosts(data.get("host"), ctx, base)
    pgbench_hosts = check_host_names(hosts, servers, pgbench, ctx)
    check_builds_here(pgbench_install, pgbench_hosts, ctx)
    most = auto.max_repeats if auto else repeats
    expanded, axes = units(servers, groups), server_axes | group_axes
    check_size(ctx, count_cells(defaults, matrix, list(expanded), axes), most)
    cpus = auto_cpus(pgbench_cpus, cpu_count, pgbench_hosts, generator_cpus)
    cells = expand_cells(ctx, base, defaults, matrix, expanded, axes, cpus)
    specs = order_runs(cells, name, repeats, order, seed)
    check_generator_clients(specs, len(pgbench_hosts), ctx)
    check_group_specs(specs, groups, ctx)
    check_counting(specs, servers, groups, ctx)
    check_reset(specs, servers, groups, dataset, ctx)
    pooler = check_pooled(*parse_pooler(data.get("pooler"), ctx, base), specs, ctx)
    warnings = plan_warnings(specs, quick=quick)
    return Plan(
        name,
        path,
        text,
        repeats,
        order,
        seed,
        tuple(servers),
        pgbench_install,
        specs,
        warnings,
        description=description,
        quick=quick,
        builds=tuple(builds.values()),
        auto=auto,
        pgbench_cpus=pgbench_cpus,
        pgbench_numa=pgbench_numa,
        pgbench_profile=pgbench_profile,
        hosts=hosts,
        pgbench_hosts=pgbench_hosts,
        groups=groups,
        pgbench_keep_logs=keep_logs,
        auto_cpus=cpus,
        dataset=dataset,
        verdicts=parse_verdicts(campaign, ctx),
        pooler=pooler,
        restart=restart,
    )


def auto_cpus(
    pinned: str | None,
    cpu_count: int | None,
    pgbench_hosts: tuple[str, ...],
    generator_cpus: tuple[int, ...] | None,
) -> tuple[int, ...]:
    """The CPUs pgbench may use on each load generator, for threads = "auto"."""
    generators = max(1, len(pgbench_hosts))
    if pinned:
        return (cpusets.count(pinned),) * generators
    if pgbench_hosts and generator_cpus is not None:
        assert len(generator_cpus) == generators, "one count per [pgbench] host"
        return generator_cpus
    return (cpu_count or os.cpu_count() or 1,) * generators


def plan_warnings(specs: tuple[RunSpec, ...], *, quick: bool = False) -> tuple[str, ...]:
    """What the plan check tells, one line per kind however large the matrix; a quick plan
    (`[campaign] quick = true`: a first look, short runs on purpose) is not told its runs are
    short."""
    contended: dict[str, set[tuple[int, int]]] = {}
    for spec in specs:
        if scale_below_clients(spec.workload.updates_branches, spec.scale, spec.clients):
            contended.setdefault(spec.workload.name, set()).add((spec.scale, spec.clients))
    warnings = [
        f"{workload}: scale < clients in {len(pairs)} combination(s) "
        f"({', '.join(f'scale {s} with {c} clients' for s, c in sorted(pairs)[:3])}"
        f"{', …' if len(pairs) > 3 else ''}): clients contend for the same branch rows; "
        "use scale ≥ clients"
        for workload, pairs in contended.items()
    ]
    durations = [s.options.duration_s for s in specs if s.options.duration_s is not None]
    if durations and min(durations) < 10 and not quick:
        warnings.append(
            f"runs of {min(durations)} s are short: per-run noise is high; use ≥ 60 s to publish"
        )
    return tuple(warnings)
