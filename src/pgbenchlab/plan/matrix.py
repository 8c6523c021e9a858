"""The matrix: its axes expanded into cells, and the cells into an ordered list of runs.

Expansion is deterministic: the same plan (and seed) gives the same order.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pgbenchlab.plan.hosts import auto_threads
from pgbenchlab.plan.records import RunOptions, RunSpec, ServerPlan, Workload
from pgbenchlab.plan.schema import (
    AXIS_KEYS,
    CONNECTIONS,
    COUNT_MODES,
    DEFAULT_MAX_TRIES,
    MAX_RUNS,
    PROFILE_MODES,
    PROFILED_EXTRA,
    PROTOCOLS,
    REINIT_MODES,
    RESERVED_SETTINGS,
    RUN_LENGTH,
    SYSCTL_NAME,
    SYSFS_NAME,
    VACUUM_MODES,
)
from pgbenchlab.plan.servers import external_connection
from pgbenchlab.plan.values import (
    Context,
    as_list,
    choice,
    non_negative_int,
    parse_bool,
    parse_latency_log,
    parse_ms,
    parse_rate,
    parse_seconds,
    positive_int,
    setting_text,
)
from pgbenchlab.plan.workloads import parse_workload


@dataclass(frozen=True)
class _Cell:
    server: str
    settings: tuple[tuple[str, str], ...]
    scale: int
    workload: Workload
    clients: int
    options: RunOptions
    sysctl: tuple[tuple[str, str], ...] = ()


def expand_cells(
    ctx: Context,
    base: Path,
    defaults: dict[str, Any],
    matrix: dict[str, Any],
    units: dict[str, list[ServerPlan]],
    server_axes: dict[str, dict[str, Any]],
    cpus: tuple[int, ...],
) -> list[_Cell]:
    """The cells of each unit: a server alone, or a group (`plan.groups`) with its members."""
    if "workload" not in matrix and not any("workload" in a for a in server_axes.values()):
        matrix = {**matrix, "workload": ["select-only"]}
    cells: list[_Cell] = []
    tunables = tunable_variants(matrix, ctx)
    for name, members in units.items():
        axes = {**matrix, **server_axes[name]}
        workloads = [
            parse_workload(w, ctx, f"matrix.workload[{i}]", base)
            for i, w in enumerate(as_list(axes.get("workload", [])))
        ]
        for scale, (workload, wl_options) in itertools.product(
            axis_values(axes, "scale", [10], ctx, positive_int), workloads
        ):
            # Precedence: the workload's own options, then the server's, then the matrix, then
            # [defaults].
            layer = {**without_run_length(defaults, wl_options), **axes, **wl_options}
            for server in members:
                if not server.managed:
                    layer = external_connection(server, layer, ctx)
            for clients in axis_values(layer, "clients", [1], ctx, positive_int):
                for options in expand_options(ctx, layer, clients, cpus):
                    for settings, sysctl in itertools.product(
                        setting_variants(axes.get("setting", {}), ctx), tunables
                    ):
                        cells.append(
                            _Cell(name, settings, scale, workload, clients, options, sysctl)
                        )
    return cells


def without_run_length(defaults: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """[defaults] without its run length when a workload gives its own (duration or
    transactions): the workload's choice wins, as its other options do."""
    if not any(k in own for k in RUN_LENGTH):
        return defaults
    return {k: v for k, v in defaults.items() if k not in RUN_LENGTH}


def count_cells(
    defaults: dict[str, Any],
    matrix: dict[str, Any],
    units: list[str],
    server_axes: dict[str, dict[str, Any]],
) -> int:
    """How many cells `expand_cells` will make, from the lengths of the axes alone."""
    if "workload" not in matrix and not any("workload" in a for a in server_axes.values()):
        matrix = {**matrix, "workload": ["select-only"]}
    total = 0
    for name in units:
        axes = {**matrix, **server_axes[name]}
        variants = (
            _combinations(axes.get("setting", {}))
            * _combinations(matrix.get("sysctl", {}))
            * _combinations(matrix.get("sysfs", {}))
        )
        for workload in as_list(axes.get("workload", [])):
            own = workload if isinstance(workload, dict) else {}
            layer = {**defaults, **axes, **own}
            lengths = (len(as_list(layer.get(k, 1))) for k in AXIS_KEYS if k != "workload")
            total += math.prod(lengths) * variants
    return total


def _combinations(axis: Any) -> int:
    return math.prod(len(as_list(v)) for v in axis.values()) if isinstance(axis, dict) else 1


def check_size(ctx: Context, cells: int, repeats: int) -> None:
    """Refuse a plan too large to run before expanding it: memory would run out first."""
    runs = cells * repeats
    if runs > MAX_RUNS:
        raise ctx.fail(
            "campaign.repeats" if repeats > 1 else "matrix",
            f"the plan expands to {runs:,} runs ({cells:,} cells × {repeats:,} repeats), more "
            f"than the {MAX_RUNS:,} a campaign may hold: lower repeats or the axes' values",
        )


def axis_values(
    axes: Mapping[str, Any],
    key: str,
    default: list[Any],
    ctx: Context,
    convert: Callable[[Any, Context, str], Any],
) -> list[Any]:
    values = as_list(axes.get(key, default))
    if not values:
        raise ctx.fail(f"matrix.{key}", "must not be an empty list")
    return [convert(v, ctx, f"matrix.{key}") for v in values]


def expand_options(
    ctx: Context, layer: dict[str, Any], clients: int, cpus: tuple[int, ...]
) -> list[RunOptions]:
    base = run_options(ctx, layer, clients, cpus)
    rates = axis_values(layer, "rate", [None], ctx, parse_rate)
    limits = axis_values(
        layer,
        "latency_limit",
        [None],
        ctx,
        lambda v, c, k: None if v in (None, "none") else parse_ms(v, c, k),
    )
    connects = axis_values(layer, "connect", [False], ctx, parse_bool)
    protocols = axis_values(
        layer,
        "protocol",
        ["prepared"],
        ctx,
        lambda v, c, k: choice(v, PROTOCOLS, c, k),
    )
    kinds = axis_values(
        layer, "connection", ["socket"], ctx, lambda v, c, k: choice(v, CONNECTIONS, c, k)
    )
    found = [
        replace(base, rate=r, latency_limit_ms=lim, connect=c, protocol=p, connection=kind)
        for r, lim, c, p, kind in itertools.product(rates, limits, connects, protocols, kinds)
    ]
    if any(o.max_tries == 0 and o.duration_s is None and o.latency_limit_ms is None for o in found):
        raise ctx.fail(
            "max_tries",
            "0 (retry without limit) needs a duration or a latency_limit, or a run may never end",
        )
    return found


def run_options(
    ctx: Context, opts: dict[str, Any], clients: int, cpus: tuple[int, ...]
) -> RunOptions:
    """The run's options; cpus: the CPUs pgbench may use on each load generator, for
    threads = "auto". More threads than clients are pgbench's to lower (it runs one thread
    per client at most and says so): the run keeps what it used (`threads_reduced`)."""
    transactions = None
    duration: int | None = None
    if "transactions" in opts:
        transactions = positive_int(opts["transactions"], ctx, "transactions")
    else:
        duration = parse_seconds(opts.get("duration", "60s"), ctx, "duration")
    threads_value = opts.get("threads", "auto")
    if threads_value == "auto":
        threads = auto_threads(clients, cpus)
    else:
        threads = positive_int(threads_value, ctx, "threads")
    return RunOptions(
        duration_s=duration,
        transactions=transactions,
        warmup_s=parse_seconds(opts.get("warmup", "10s"), ctx, "warmup", allow_zero=True),
        protocol="prepared",
        threads=threads,
        threads_auto=threads_value == "auto",
        rate=None,
        latency_limit_ms=None,
        connect=False,
        vacuum=choice(opts.get("vacuum", "pgbench"), VACUUM_MODES, ctx, "vacuum"),
        checkpoint=parse_bool(opts.get("checkpoint", True), ctx, "checkpoint"),
        reinit=choice(opts.get("reinit", "never"), REINIT_MODES, ctx, "reinit"),
        latency_log=parse_latency_log(opts.get("latency_log", "auto"), ctx, "latency_log"),
        max_tries=non_negative_int(opts.get("max_tries", DEFAULT_MAX_TRIES), ctx, "max_tries"),
        profile=choice(opts.get("profile", "off"), PROFILE_MODES, ctx, "profile"),
        count=choice(opts.get("count", "off"), COUNT_MODES, ctx, "count"),
    )


def setting_variants(value: Any, ctx: Context) -> list[tuple[tuple[str, str], ...]]:
    """Server-setting axes: {name = [v1, v2]} → one variant per combination."""
    if not isinstance(value, dict):
        raise ctx.fail("setting", "must be a table of setting = [values]")
    names = sorted(value)
    for name in names:
        if name in RESERVED_SETTINGS:
            raise ctx.fail(f"setting.{name}", "is managed by pgbenchlab; remove it")
        if not as_list(value[name]):
            raise ctx.fail(f"setting.{name}", "must not be an empty list")
    lists = [[setting_text(v) for v in as_list(value[n])] for n in names]
    return [tuple(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]


def tunable_variants(matrix: dict[str, Any], ctx: Context) -> list[tuple[tuple[str, str], ...]]:
    """Kernel-tunable axes, [matrix.sysctl] ({"vm.dirty_bytes" = [0, 67108864]}) and
    [matrix.sysfs] ({"block/vda/queue/read_ahead_kb" = [128, 4096]}, named by their path,
    "/sys/block/vda/queue/read_ahead_kb") → one variant per combination (whether they exist
    and may be set is checked before the campaign starts)."""
    axes = {**kernel_axes(matrix.get("sysctl", {}), "sysctl", ctx)}
    axes |= {f"/sys/{n}": v for n, v in kernel_axes(matrix.get("sysfs", {}), "sysfs", ctx).items()}
    names = sorted(axes)
    lists = [[str(v) for v in axes[n]] for n in names]
    return [tuple(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]


KERNEL_NAMES = {
    "sysctl": (SYSCTL_NAME, 'is not a sysctl name such as "vm.dirty_bytes"'),
    "sysfs": (SYSFS_NAME, 'is not a path under /sys such as "block/sda/queue/scheduler"'),
}


def kernel_axes(value: Any, kind: str, ctx: Context) -> dict[str, list[Any]]:
    """[matrix.KIND]'s tunables and their values, each name and value checked."""
    if not isinstance(value, dict):
        raise ctx.fail(f"matrix.{kind}", 'must be a table of "name" = [values]')
    pattern, wrong_name = KERNEL_NAMES[kind]
    for name in value:
        if not pattern.fullmatch(name) or ".." in name.split("/"):
            raise ctx.fail(f"matrix.{kind}.{name}", wrong_name)
        values = as_list(value[name])
        if not values:
            raise ctx.fail(f"matrix.{kind}.{name}", "must not be an empty list")
        if not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in values):
            raise ctx.fail(
                f"matrix.{kind}.{name}", f"values must be numbers or text; got {values!r}"
            )
    return {name: as_list(listed) for name, listed in value.items()}


def order_runs(
    cells: list[_Cell], campaign: str, repeats: int, order: str, seed: int
) -> tuple[RunSpec, ...]:
    """Interleaved: every cell once per round. Random: rounds shuffled under the seed.
    Sequential: each cell's repeats back to back. A cell profiled `auto` gets one more repeat,
    profiled, in a last round of its own (kept out of the statistics)."""
    rng = random.Random(seed)
    if order == "sequential":
        pairs = [(cell, r) for cell in cells for r in range(1, repeats + 1)]
    else:
        pairs = []
        for r in range(1, repeats + 1):
            round_cells = list(cells)
            if order == "random":
                rng.shuffle(round_cells)
            pairs.extend((cell, r) for cell in round_cells)
    pairs += [(cell, repeats + 1) for cell in cells if cell.options.profile == "auto"]
    return tuple(
        RunSpec(
            campaign,
            c.server,
            c.settings,
            c.scale,
            c.workload,
            c.clients,
            _profiled(c.options, extra=r > repeats),
            r,
            i,
            c.sysctl,
        )
        for i, (c, r) in enumerate(pairs)
    )


def _profiled(options: RunOptions, *, extra: bool) -> RunOptions:
    """`auto`: only the extra repeat is profiled."""
    if options.profile != "auto":
        return options
    return replace(options, profile=PROFILED_EXTRA if extra else "off")
