"""One value of a plan: checked and converted, or a `PlanError` naming the file and the key."""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgbenchlab import cpusets, files
from pgbenchlab.cpusets import NUMA_POLICIES, NumaPolicy
from pgbenchlab.errors import PlanError
from pgbenchlab.plan.schema import LATENCY_LOG_MODES, RUN_LENGTH


class Context:
    """Where in the plan a value comes from, to say it in errors."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, message: str) -> PlanError:
        return PlanError(message, where=f"{self.path}: {key}")

    def check_keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], key: str) -> None:
        for name in table:
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                hint = (
                    f'; did you mean "{close[0]}"?' if close else f"; allowed: {', '.join(allowed)}"
                )
                where = f"{key}.{name}" if key else name
                raise self.fail(where, f"unknown key{hint}")


def cpu_list(value: Any, ctx: Context, key: str) -> str:
    """A CPU list ("0-7", "0,2,4-6") in the kernel's canonical form."""
    if not isinstance(value, str):
        raise ctx.fail(key, f'must be a CPU list such as "0-7" or "0,2,4-6"; got {value!r}')
    try:
        return cpusets.text(cpusets.parse(value))
    except cpusets.BadCpuList as exc:
        raise ctx.fail(key, str(exc)) from None


def numa_policy(value: Any, ctx: Context, key: str) -> NumaPolicy:
    """numa = { cpunodebind = "0", membind = "0" } (or interleave, preferred), or "interleave"
    for interleave = "all": numactl's placement, each a node list ("all" for interleave)."""
    if value == "interleave":
        return NumaPolicy(interleave="all")
    if not isinstance(value, dict) or not value:
        raise ctx.fail(
            key, 'must be "interleave" or a table such as { cpunodebind = "0", membind = "0" }'
        )
    nodes = {}
    for name, listed in value.items():
        if name not in NUMA_POLICIES:
            raise ctx.fail(f"{key}.{name}", f"is not one of {', '.join(NUMA_POLICIES)}")
        if name == "interleave" and listed == "all":
            nodes[name] = "all"
            continue
        nodes[name] = cpu_list(listed, ctx, f"{key}.{name}")  # node lists are written alike
    memory = [n for n in ("membind", "interleave", "preferred") if n in nodes]
    if len(memory) > 1:
        raise ctx.fail(key, f"gives {' and '.join(memory)}: a memory policy is one of them")
    return NumaPolicy(**nodes)


_DURATION = re.compile(r"^\s*(\d+)\s*(s|sec|m|min|h)?\s*$")
_MS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$")


def parse_seconds(value: Any, ctx: Context, key: str, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool):
        raise ctx.fail(key, f'must be a duration such as "60s" or "5min"; got {value!r}')
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        factor = {"h": 3600, "m": 60, "min": 60}.get(m.group(2) or "s", 1)
        seconds = int(m.group(1)) * factor
    else:
        raise ctx.fail(
            key, f'must be a whole number of seconds such as "60s" or "5min"; got {value!r}'
        )
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ctx.fail(key, f"must be {'≥ 0' if allow_zero else '> 0'} seconds; got {value!r}")
    return seconds


def parse_ms(value: Any, ctx: Context, key: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ms = float(value)
    elif isinstance(value, str) and (m := _MS.match(value)):
        ms = float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
    else:
        raise ctx.fail(key, f'must be a latency such as "100ms" or a number of ms; got {value!r}')
    if ms <= 0:
        raise ctx.fail(key, f"must be > 0 ms; got {value!r}")
    if round(ms * 1000, 6) != round(ms * 1000):  # -L truncates to µs: 0.0001 would be no limit
        raise ctx.fail(key, f"must be a whole number of microseconds (pgbench's -L); got {value!r}")
    return ms


def check_finite(value: Any, ctx: Context, key: str) -> None:
    """TOML reads nan and inf as numbers; no number in a plan may be either."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ctx.fail(key, f"must be a finite number; got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, ctx, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_finite(v, ctx, f"{key}[{i}]")


def check_name(value: Any, ctx: Context, key: str) -> str:
    """A name that becomes a directory name (`files.PLAIN_NAME`)."""
    if not isinstance(value, str) or not files.is_plain_name(value):
        raise ctx.fail(
            key,
            f"must start with a letter or digit, then letters, digits, '.', '_' or '-'; "
            f"got {value!r}",
        )
    return value


def positive_int(value: Any, ctx: Context, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ctx.fail(key, f"must be a positive whole number; got {value!r}")
    return value


def non_negative_int(value: Any, ctx: Context, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ctx.fail(key, f"must be a whole number ≥ 0; got {value!r}")
    return value


def choice(value: Any, options: tuple[str, ...], ctx: Context, key: str) -> str:
    if value not in options:
        close = difflib.get_close_matches(str(value), options, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        raise ctx.fail(key, f"must be one of {', '.join(options)}; got {value!r}{hint}")
    return str(value)


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def parse_rate(value: Any, ctx: Context, key: str) -> float | None:
    if value in (None, 0, "none", False):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ctx.fail(key, f"must be a positive number of transactions per second; got {value!r}")
    return float(value)


def parse_bool(value: Any, ctx: Context, key: str) -> bool:
    if not isinstance(value, bool):
        raise ctx.fail(key, f"must be true or false; got {value!r}")
    return value


def parse_latency_log(value: Any, ctx: Context, key: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 0 < value <= 1:
            raise ctx.fail(key, f"a sampling rate must be in (0, 1]; got {value!r}")
        return repr(float(value))
    return choice(value, LATENCY_LOG_MODES, ctx, key)


def planned_axis_orders(text: str) -> dict[str, list[str]]:
    """Server names ("server": the servers', then the groups') and the values of each
    server-setting and kernel-tunable axis in the order the plan lists them, which its run order
    cannot tell (random order, a resumed campaign). An unreadable plan (a stored one of an
    older format) gives nothing."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    servers = [s for s in document.get("server", []) if isinstance(s, dict)]
    groups = [g for g in document.get("server_group", []) if isinstance(g, dict)]
    orders = {"server": [str(s.get("name")) for s in servers + groups]}  # groups after
    for layer in (document.get("matrix", {}), *servers):
        for kind, prefix in (("setting", ""), ("sysctl", ""), ("sysfs", "/sys/")):
            axes = layer.get(kind, {}) if isinstance(layer, dict) else {}
            named = axes.items() if isinstance(axes, dict) else ()
            _add_orders(orders, {f"{prefix}{name}": listed for name, listed in named})
    return orders


def _add_orders(orders: dict[str, list[str]], axes: Any) -> None:
    """Each axis's values after those already found, once each, as the plan lists them."""
    for name, listed in axes.items() if isinstance(axes, dict) else ():
        found = orders.setdefault(str(name), [])
        for value in listed if isinstance(listed, list) else [listed]:
            if setting_text(value) not in found:
                found.append(setting_text(value))


def setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def plan_path(value: str, base: Path) -> str:
    """A file or directory of this machine as the plan names it, made absolute: a relative
    path is the plan file's directory's ("~" the home directory), wherever pgbenchlab runs."""
    return str((base / Path(value).expanduser()).resolve())


def check_run_length(value: Mapping[str, Any], ctx: Context, key: str) -> None:
    """A table (``key``: where the user wrote it) gives a duration or a number of
    transactions, not both."""
    if all(k in value for k in RUN_LENGTH):
        raise ctx.fail(f"{key}.transactions", 'give "duration" or "transactions", not both')


def table(data: Mapping[str, Any], key: str, ctx: Context) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ctx.fail(key, f"must be a table ([{key}])")
    return value
