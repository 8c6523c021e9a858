"""Workloads: pgbench builtins and script files (read at plan time), with their weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgbenchlab import files
from pgbenchlab.plan.records import Script, Workload
from pgbenchlab.plan.schema import BUILTINS, OPTION_KEYS, WORKLOAD_KEYS
from pgbenchlab.plan.values import Context, check_run_length, choice, plan_path


def parse_workload(
    value: Any, ctx: Context, key: str, base: Path
) -> tuple[Workload, dict[str, Any]]:
    """A workload and its own option overrides."""
    if isinstance(value, str):
        return Workload(value, (builtin_script(value, 1, ctx, key),)), {}
    if not isinstance(value, dict):
        raise ctx.fail(
            key, f'must be a builtin name such as "select-only" or a table; got {value!r}'
        )
    ctx.check_keys(value, WORKLOAD_KEYS, key)
    parts = [k for k in ("builtin", "script", "scripts") if k in value]
    if len(parts) != 1:
        raise ctx.fail(key, 'give exactly one of "builtin", "script" or "scripts"')
    if "scripts" in value:
        if not isinstance(value["scripts"], list) or not value["scripts"]:
            raise ctx.fail(f"{key}.scripts", "must be a non-empty list of script tables")
        scripts = tuple(
            one_script(item, ctx, f"{key}.scripts[{i}]", base)
            for i, item in enumerate(value["scripts"])
        )
    else:
        scripts = (one_script(value, ctx, key, base),)
    if sum(s.weight for s in scripts) == 0:
        raise ctx.fail(key, "the total weight of the scripts must not be zero")
    name = value.get("name") or default_workload_name(scripts)
    if not isinstance(name, str) or not name:
        raise ctx.fail(f"{key}.name", "must be a non-empty string")
    defines = value.get("define", {})
    if not isinstance(defines, dict):
        raise ctx.fail(f"{key}.define", "must be a table of variable = value")
    overrides = {k: v for k, v in value.items() if k in OPTION_KEYS or k == "clients"}
    check_run_length(overrides, ctx, key)
    pairs = tuple(sorted((str(k), str(v)) for k, v in defines.items()))
    return Workload(name, scripts, pairs), overrides


def one_script(item: Any, ctx: Context, key: str, base: Path) -> Script:
    if not isinstance(item, dict):
        raise ctx.fail(key, "must be a table with builtin or script, and an optional weight")
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
        raise ctx.fail(f"{key}.weight", f"must be a whole number ≥ 0; got {weight!r}")
    if "builtin" in item:
        return builtin_script(item["builtin"], weight, ctx, f"{key}.builtin")
    if "script" not in item:
        raise ctx.fail(key, 'needs "builtin" or "script"')
    path = Path(plan_path(str(item["script"]), base))
    try:
        text = files.read_text(path)
    except files.Unreadable as exc:
        raise ctx.fail(f"{key}.script", f"cannot read script file {path}: {exc}") from None
    if not text.strip():
        raise ctx.fail(f"{key}.script", f"script file {path} is empty")
    return Script("file", str(path), weight, text)


def builtin_script(name: Any, weight: int, ctx: Context, key: str) -> Script:
    if name not in BUILTINS:
        choice(name, tuple(BUILTINS), ctx, key)
    return Script("builtin", BUILTINS[str(name)], weight)


def default_workload_name(scripts: tuple[Script, ...]) -> str:
    names = [s.name if s.kind == "builtin" else Path(s.name).stem for s in scripts]
    if len(scripts) == 1:
        return names[0]
    return "+".join(f"{n}@{s.weight}" for n, s in zip(names, scripts, strict=True))
