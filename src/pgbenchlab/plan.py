"""The plan file: parse, validate and expand a campaign into an ordered list of run specs.

Validation happens before anything starts. Every mistake raises `PlanError` naming the file, the
key and what to do. Expansion is deterministic: the same plan (and seed) gives the same order.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import os
import random
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo

from pgbenchlab import files
from pgbenchlab.errors import PlanError
from pgbenchlab.redaction import redact_plan_text, redact_setting

BUILTINS = {
    "tpcb-like": "tpcb-like",
    "read-write": "tpcb-like",
    "simple-update": "simple-update",
    "select-only": "select-only",
    "read-only": "select-only",
}
UPDATING_BUILTINS = frozenset({"tpcb-like", "simple-update"})
ORDERS = ("interleaved", "sequential", "random")
PROTOCOLS = ("simple", "extended", "prepared")
VACUUM_MODES = ("pgbench", "all", "none")
REINIT_MODES = ("never", "per-scale", "per-run")
LATENCY_LOG_MODES = ("auto", "full", "off")
RESERVED_SETTINGS = frozenset(
    {"port", "listen_addresses", "unix_socket_directories", "unix_socket_permissions"}
)

TOP_KEYS = ("campaign", "defaults", "pgbench", "server", "matrix")
CAMPAIGN_KEYS = ("name", "repeats", "order", "seed", "description")
OPTION_KEYS = (
    "duration",
    "transactions",
    "warmup",
    "protocol",
    "threads",
    "vacuum",
    "checkpoint",
    "reinit",
    "latency_log",
    "rate",
    "latency_limit",
    "connect",
    "max_tries",
)
MAX_RUNS = 1_000_000  # runs in one campaign; far beyond any real one (1 s runs: 11 days)
AXIS_KEYS = ("scale", "workload", "clients", "rate", "latency_limit", "connect", "protocol")
SERVER_KEYS = ("name", "install", "dsn", "settings", "data_dir", "init", *AXIS_KEYS, "setting")
WORKLOAD_KEYS = (
    "name",
    "builtin",
    "script",
    "scripts",
    "weight",
    "define",
    *OPTION_KEYS,
    "clients",
)
PGBENCH_KEYS = ("install",)
MATRIX_KEYS = (*AXIS_KEYS, "setting")


@dataclass(frozen=True)
class Script:
    """One script of a workload: a pgbench builtin or a file, with its weight."""

    kind: str  # builtin | file
    name: str  # builtin name, or absolute path of the file
    weight: int = 1
    text: str = ""  # a file's content, read at plan time (recorded with the results)


@dataclass(frozen=True)
class Workload:
    name: str
    scripts: tuple[Script, ...]
    defines: tuple[tuple[str, str], ...] = ()

    @property
    def updates(self) -> bool:
        """Whether the workload writes to pgbench's tables (branch contention matters)."""
        for script in self.scripts:
            if script.kind == "builtin" and script.name in UPDATING_BUILTINS:
                return True
            if script.kind == "file" and re.search(
                r"\b(update|insert|delete)\b", script.text, re.I
            ):
                return True
        return False


@dataclass(frozen=True)
class ServerPlan:
    name: str
    install: str | None = None  # managed: an installation spec
    dsn: str | None = field(default=None, repr=False)  # external: a libpq connection string
    settings: tuple[tuple[str, str], ...] = ()
    data_dir: str | None = None
    init: bool = False  # external only: may pgbenchlab run pgbench -i there?

    @property
    def managed(self) -> bool:
        return self.dsn is None


@dataclass(frozen=True)
class RunOptions:
    """How one run is executed; every field is part of the cell's identity."""

    duration_s: int | None
    transactions: int | None
    warmup_s: int
    protocol: str
    threads: int
    rate: float | None
    latency_limit_ms: float | None
    connect: bool
    vacuum: str
    checkpoint: bool
    reinit: str
    latency_log: str  # auto | full | off | a sampling rate such as "0.1"
    max_tries: int  # pgbench --max-tries (15+): 1 = no retry, 0 = unlimited


DEFAULT_MAX_TRIES = 1  # pgbench's own default: failed transactions are not retried


def _in_cell(option: str, value: Any) -> bool:
    """Options that tell cells apart; one left at pgbench's default keeps the cell ids of
    plans written before it existed."""
    return option != "reinit" and not (option == "max_tries" and value == DEFAULT_MAX_TRIES)


@dataclass(frozen=True)
class RunSpec:
    """One run of the campaign: a matrix cell and which repeat of it."""

    campaign: str
    server: str
    server_settings: tuple[tuple[str, str], ...]
    scale: int
    workload: Workload
    clients: int
    options: RunOptions
    repeat: int
    sequence: int

    @property
    def cell(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "server_settings": dict(self.server_settings),
            "scale": self.scale,
            "workload": self.workload.name,
            "clients": self.clients,
            **{k: v for k, v in asdict(self.options).items() if _in_cell(k, v)},
        }

    @property
    def cell_id(self) -> str:
        scripts = [(s.kind, s.name, s.weight, s.text) for s in self.workload.scripts]
        payload = json.dumps([self.cell, scripts, self.workload.defines], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def run_key(self) -> str:
        return f"{self.cell_id}-r{self.repeat}"

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={redact_setting(k, v)}" for k, v in self.server_settings)
        rate = f" R={self.options.rate:g}" if self.options.rate else ""
        conn = " -C" if self.options.connect else ""
        return (
            f"{self.server}{extra} s={self.scale} {self.workload.name} c={self.clients}"
            f" {self.options.protocol}{rate}{conn} #{self.repeat}"
        )


@dataclass(frozen=True)
class Plan:
    name: str
    path: str
    text: str
    repeats: int
    order: str
    seed: int
    servers: tuple[ServerPlan, ...]
    pgbench_install: str
    specs: tuple[RunSpec, ...]
    warnings: tuple[str, ...]
    description: str = ""  # what the campaign is for, shown atop its report

    @property
    def stored_text(self) -> str:
        """The plan's text as it may be stored or shown: no secret in it."""
        return redact_plan_text(self.text)

    @property
    def files(self) -> dict[str, str]:
        """Every file the plan refers to (custom scripts) and its content's digest: part of
        the plan's identity, so an edited script is a changed plan."""
        return {
            script.name: hashlib.sha256(script.text.encode()).hexdigest()[:16]
            for spec in self.specs
            for script in spec.workload.scripts
            if script.kind == "file"
        }

    @property
    def digest(self) -> str:
        """Identity of the plan: its stored text and its files' contents (never a secret)."""
        identity = json.dumps([self.stored_text, sorted(self.files.items())])
        return hashlib.sha256(identity.encode()).hexdigest()[:16]

    def server(self, name: str) -> ServerPlan:
        return next(s for s in self.servers if s.name == name)

    @property
    def axis_orders(self) -> dict[str, list[str]]:
        """The order of the plan's ordered axes (`planned_axis_orders`)."""
        return planned_axis_orders(self.text)

    def estimated_seconds(self, per_run_overhead: float = 1.5) -> float:
        total = 0.0
        for spec in self.specs:
            duration = spec.options.duration_s
            if duration is None:  # -t mode: unknown; count a nominal 10 s
                duration = 10
            total += duration + spec.options.warmup_s + per_run_overhead
        return total


# -- value parsing -------------------------------------------------------------------------------


class _Context:
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


_DURATION = re.compile(r"^\s*(\d+)\s*(s|sec|m|min|h)?\s*$")
_MS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$")


def parse_seconds(value: Any, ctx: _Context, key: str, *, allow_zero: bool = False) -> int:
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


def parse_ms(value: Any, ctx: _Context, key: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ms = float(value)
    elif isinstance(value, str) and (m := _MS.match(value)):
        ms = float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
    else:
        raise ctx.fail(key, f'must be a latency such as "100ms" or a number of ms; got {value!r}')
    if ms <= 0:
        raise ctx.fail(key, f"must be > 0 ms; got {value!r}")
    return ms


def check_finite(value: Any, ctx: _Context, key: str) -> None:
    """TOML reads nan and inf as numbers; no number in a plan may be either."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ctx.fail(key, f"must be a finite number; got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, ctx, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_finite(v, ctx, f"{key}[{i}]")


# Names become directory names (clusters, artifacts): a first letter or digit keeps ".", ".."
# and hidden names out, and the rest keeps them one path component.
_NAME = re.compile(r"\w[\w.-]*")


def check_name(value: Any, ctx: _Context, key: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ctx.fail(
            key,
            f"must start with a letter or digit, then letters, digits, '.', '_' or '-'; "
            f"got {value!r}",
        )
    return value


def positive_int(value: Any, ctx: _Context, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ctx.fail(key, f"must be a positive whole number; got {value!r}")
    return value


def non_negative_int(value: Any, ctx: _Context, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ctx.fail(key, f"must be a whole number ≥ 0; got {value!r}")
    return value


def choice(value: Any, options: tuple[str, ...], ctx: _Context, key: str) -> str:
    if value not in options:
        close = difflib.get_close_matches(str(value), options, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        raise ctx.fail(key, f"must be one of {', '.join(options)}; got {value!r}{hint}")
    return str(value)


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def parse_rate(value: Any, ctx: _Context, key: str) -> float | None:
    if value in (None, 0, "none", False):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ctx.fail(key, f"must be a positive number of transactions per second; got {value!r}")
    return float(value)


def parse_bool(value: Any, ctx: _Context, key: str) -> bool:
    if not isinstance(value, bool):
        raise ctx.fail(key, f"must be true or false; got {value!r}")
    return value


def parse_latency_log(value: Any, ctx: _Context, key: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 0 < value <= 1:
            raise ctx.fail(key, f"a sampling rate must be in (0, 1]; got {value!r}")
        return repr(float(value))
    return choice(value, LATENCY_LOG_MODES, ctx, key)


# -- workloads -----------------------------------------------------------------------------------


def parse_workload(
    value: Any, ctx: _Context, key: str, base: Path
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
    pairs = tuple(sorted((str(k), str(v)) for k, v in defines.items()))
    return Workload(name, scripts, pairs), overrides


def one_script(item: Any, ctx: _Context, key: str, base: Path) -> Script:
    if not isinstance(item, dict):
        raise ctx.fail(key, "must be a table with builtin or script, and an optional weight")
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
        raise ctx.fail(f"{key}.weight", f"must be a whole number ≥ 0; got {weight!r}")
    if "builtin" in item:
        return builtin_script(item["builtin"], weight, ctx, f"{key}.builtin")
    if "script" not in item:
        raise ctx.fail(key, 'needs "builtin" or "script"')
    path = (base / str(item["script"])).resolve()
    try:
        text = files.read_text(path)
    except files.Unreadable as exc:
        raise ctx.fail(f"{key}.script", f"cannot read script file {path}: {exc}") from None
    if not text.strip():
        raise ctx.fail(f"{key}.script", f"script file {path} is empty")
    return Script("file", str(path), weight, text)


def builtin_script(name: Any, weight: int, ctx: _Context, key: str) -> Script:
    if name not in BUILTINS:
        choice(name, tuple(BUILTINS), ctx, key)
    return Script("builtin", BUILTINS[str(name)], weight)


def default_workload_name(scripts: tuple[Script, ...]) -> str:
    names = [s.name if s.kind == "builtin" else Path(s.name).stem for s in scripts]
    if len(scripts) == 1:
        return names[0]
    return "+".join(f"{n}@{s.weight}" for n, s in zip(names, scripts, strict=True))


# -- the plan ------------------------------------------------------------------------------------


def load(path: str | Path, *, cpu_count: int | None = None) -> Plan:
    """Read, validate and expand a plan file."""
    file = Path(path)
    try:
        text = files.read_text(file)
    except files.Unreadable as exc:
        raise PlanError(f"cannot read the plan file: {exc}", where=str(file)) from None
    return parse(text, str(file), base=file.resolve().parent, cpu_count=cpu_count)


def parse(text: str, path: str, *, base: Path, cpu_count: int | None = None) -> Plan:
    ctx = _Context(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"not valid TOML: {exc}", where=path) from None
    check_finite(data, ctx, "")
    ctx.check_keys(data, TOP_KEYS, "")
    campaign = table(data, "campaign", ctx)
    ctx.check_keys(campaign, CAMPAIGN_KEYS, "campaign")
    name = check_name(campaign.get("name", Path(path).stem), ctx, "campaign.name")
    repeats = positive_int(campaign.get("repeats", 1), ctx, "campaign.repeats")
    order = choice(campaign.get("order", "interleaved"), ORDERS, ctx, "campaign.order")
    description = campaign.get("description", "")
    if not isinstance(description, str):
        raise ctx.fail("campaign.description", f"must be a string; got {description!r}")
    seed = campaign.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ctx.fail("campaign.seed", f"must be an integer; got {seed!r}")
    pgbench = table(data, "pgbench", ctx)
    ctx.check_keys(pgbench, PGBENCH_KEYS, "pgbench")
    pgbench_install = str(pgbench.get("install", "newest"))
    defaults = table(data, "defaults", ctx)
    ctx.check_keys(defaults, OPTION_KEYS, "defaults")
    matrix = table(data, "matrix", ctx)
    ctx.check_keys(matrix, MATRIX_KEYS, "matrix")
    servers, server_axes = parse_servers(data.get("server"), ctx, base)
    check_size(ctx, count_cells(defaults, matrix, servers, server_axes), repeats)
    cpus = cpu_count or os.cpu_count() or 1
    cells = expand_cells(ctx, base, defaults, matrix, servers, server_axes, cpus)
    specs = order_runs(cells, name, repeats, order, seed)
    warnings = plan_warnings(specs)
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
    )


def table(data: Mapping[str, Any], key: str, ctx: _Context) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ctx.fail(key, f"must be a table ([{key}])")
    return value


def parse_servers(
    value: Any, ctx: _Context, base: Path
) -> tuple[list[ServerPlan], dict[str, dict[str, Any]]]:
    if value is None:
        value = [{"name": "default", "install": "embedded"}]
    if not isinstance(value, list) or not value:
        raise ctx.fail("server", "must be one or more [[server]] tables")
    servers: list[ServerPlan] = []
    axes: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(value):
        key = f"server[{i}]"
        if not isinstance(item, dict):
            raise ctx.fail(key, "must be a table")
        ctx.check_keys(item, SERVER_KEYS, key)
        server = parse_server(item, ctx, key, base)
        if any(s.name == server.name for s in servers):
            raise ctx.fail(f"{key}.name", f'server name "{server.name}" is used twice')
        servers.append(server)
        axes[server.name] = {k: v for k, v in item.items() if k in (*AXIS_KEYS, "setting")}
        if axes[server.name].get("setting") and not server.managed:
            raise ctx.fail(f"{key}.setting", "setting axes need a managed server, not a dsn")
    return servers, axes


def parse_server(item: dict[str, Any], ctx: _Context, key: str, base: Path) -> ServerPlan:
    name = check_name(item.get("name"), ctx, f"{key}.name")
    if ("install" in item) == ("dsn" in item):
        if "dsn" in item:
            raise ctx.fail(key, 'give "install" (a managed server) or "dsn" (external), not both')
        item = {**item, "install": "embedded"}
    settings = item.get("settings", {})
    if not isinstance(settings, dict):
        raise ctx.fail(f"{key}.settings", "must be a table of setting = value")
    for setting in settings:
        if setting in RESERVED_SETTINGS:
            raise ctx.fail(f"{key}.settings.{setting}", "is managed by pgbenchlab; remove it")
    if "dsn" in item:
        check_dsn(item["dsn"], ctx, f"{key}.dsn")
        for field_name in ("settings", "data_dir"):
            if field_name in item:
                raise ctx.fail(f"{key}.{field_name}", "applies to managed servers only, not a dsn")
    init = item.get("init", False)
    if not isinstance(init, bool):
        raise ctx.fail(f"{key}.init", "must be true or false")
    data_dir = item.get("data_dir")
    if data_dir is not None:
        if not isinstance(data_dir, str) or not data_dir:
            raise ctx.fail(f"{key}.data_dir", "must be a directory path")
        data_dir = str((base / data_dir).resolve())
    return ServerPlan(
        name=name,
        install=str(item["install"]) if "install" in item else None,
        dsn=str(item["dsn"]) if "dsn" in item else None,
        settings=tuple(sorted((str(k), setting_text(v)) for k, v in settings.items())),
        data_dir=data_dir,
        init=init,
    )


def check_dsn(value: Any, ctx: _Context, key: str) -> None:
    """A libpq connection string that parses, with one port number (its own or PGPORT). Its
    text is never echoed: it may hold a password."""
    if not isinstance(value, str):
        raise ctx.fail(key, 'must be a connection string such as "host=db1 dbname=bench"')
    try:
        params = pg_conninfo.conninfo_to_dict(value)
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "cannot be parsed"
        reason = _hide_tokens(reason, words=not _has_password(value))
        raise ctx.fail(key, f"invalid connection string: {reason}") from None
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ctx.fail(key, f"port {port!r} is not a port number: give one number, 1 to 65535")


def _hide_tokens(text: str, *, words: bool) -> str:
    """libpq quotes the offending token, which may be part of a password: only single
    characters stay, and names (words) when the string holds no password."""
    keep = r"\w+|\W" if words else r"\W"
    return re.sub(r'"([^"]*)"', lambda m: m[0] if re.fullmatch(keep, m[1]) else '"…"', text)


def _has_password(dsn: str) -> bool:
    return "password" in dsn.lower() or re.search(r"://[^/@]*:[^/@]*@", dsn) is not None


def setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def planned_axis_orders(text: str) -> dict[str, list[str]]:
    """Server names ("server") and each server-setting axis's values in the order the plan
    lists them, which its run order cannot tell (random order, a resumed campaign). An
    unreadable plan (a stored one of an older format) gives nothing."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    servers = [s for s in document.get("server", []) if isinstance(s, dict)]
    orders = {"server": [str(s.get("name")) for s in servers]}
    for layer in (document.get("matrix", {}), *servers):
        axes = layer.get("setting", {}) if isinstance(layer, dict) else {}
        for name, listed in axes.items() if isinstance(axes, dict) else ():
            found = orders.setdefault(str(name), [])
            for value in listed if isinstance(listed, list) else [listed]:
                if setting_text(value) not in found:
                    found.append(setting_text(value))
    return orders


@dataclass(frozen=True)
class _Cell:
    server: str
    settings: tuple[tuple[str, str], ...]
    scale: int
    workload: Workload
    clients: int
    options: RunOptions


def expand_cells(
    ctx: _Context,
    base: Path,
    defaults: dict[str, Any],
    matrix: dict[str, Any],
    servers: list[ServerPlan],
    server_axes: dict[str, dict[str, Any]],
    cpus: int,
) -> list[_Cell]:
    if "workload" not in matrix and not any("workload" in a for a in server_axes.values()):
        matrix = {**matrix, "workload": ["select-only"]}
    cells: list[_Cell] = []
    for server in servers:
        axes = {**matrix, **server_axes[server.name]}
        workloads = [
            parse_workload(w, ctx, f"matrix.workload[{i}]", base)
            for i, w in enumerate(as_list(axes.get("workload", [])))
        ]
        for scale, (workload, wl_options) in itertools.product(
            axis_values(axes, "scale", [10], ctx, positive_int), workloads
        ):
            # Precedence: the workload's own options, then the server's, then the matrix, then
            # [defaults].
            layer = {**defaults, **axes, **wl_options}
            for clients in axis_values(layer, "clients", [1], ctx, positive_int):
                for options in expand_options(ctx, layer, clients, cpus):
                    for settings in setting_variants(axes.get("setting", {}), ctx):
                        cells.append(
                            _Cell(server.name, settings, scale, workload, clients, options)
                        )
    return cells


def count_cells(
    defaults: dict[str, Any],
    matrix: dict[str, Any],
    servers: list[ServerPlan],
    server_axes: dict[str, dict[str, Any]],
) -> int:
    """How many cells `expand_cells` will make, from the lengths of the axes alone."""
    if "workload" not in matrix and not any("workload" in a for a in server_axes.values()):
        matrix = {**matrix, "workload": ["select-only"]}
    total = 0
    for server in servers:
        axes = {**matrix, **server_axes[server.name]}
        setting = axes.get("setting", {})
        variants = (
            math.prod(len(as_list(v)) for v in setting.values()) if isinstance(setting, dict) else 1
        )
        for workload in as_list(axes.get("workload", [])):
            own = workload if isinstance(workload, dict) else {}
            layer = {**defaults, **axes, **own}
            lengths = (len(as_list(layer.get(k, 1))) for k in AXIS_KEYS if k != "workload")
            total += math.prod(lengths) * variants
    return total


def check_size(ctx: _Context, cells: int, repeats: int) -> None:
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
    ctx: _Context,
    convert: Callable[[Any, _Context, str], Any],
) -> list[Any]:
    values = as_list(axes.get(key, default))
    if not values:
        raise ctx.fail(f"matrix.{key}", "must not be an empty list")
    return [convert(v, ctx, f"matrix.{key}") for v in values]


def expand_options(
    ctx: _Context, layer: dict[str, Any], clients: int, cpus: int
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
    found = [
        replace(base, rate=r, latency_limit_ms=lim, connect=c, protocol=p)
        for r, lim, c, p in itertools.product(rates, limits, connects, protocols)
    ]
    if any(o.max_tries == 0 and o.duration_s is None and o.latency_limit_ms is None for o in found):
        raise ctx.fail(
            "max_tries",
            "0 (retry without limit) needs a duration or a latency_limit, or a run may never end",
        )
    return found


def run_options(ctx: _Context, opts: dict[str, Any], clients: int, cpus: int) -> RunOptions:
    if "duration" in opts and "transactions" in opts:
        raise ctx.fail("defaults.transactions", 'give "duration" or "transactions", not both')
    transactions = None
    duration: int | None = None
    if "transactions" in opts:
        transactions = positive_int(opts["transactions"], ctx, "transactions")
    else:
        duration = parse_seconds(opts.get("duration", "60s"), ctx, "duration")
    threads_value = opts.get("threads", "auto")
    if threads_value == "auto":
        threads = min(clients, cpus)
    else:
        threads = positive_int(threads_value, ctx, "threads")
        if threads > clients:
            raise ctx.fail(
                "threads", f"{threads} threads for {clients} clients: give at most one per client"
            )
    return RunOptions(
        duration_s=duration,
        transactions=transactions,
        warmup_s=parse_seconds(opts.get("warmup", "10s"), ctx, "warmup", allow_zero=True),
        protocol="prepared",
        threads=threads,
        rate=None,
        latency_limit_ms=None,
        connect=False,
        vacuum=choice(opts.get("vacuum", "pgbench"), VACUUM_MODES, ctx, "vacuum"),
        checkpoint=parse_bool(opts.get("checkpoint", True), ctx, "checkpoint"),
        reinit=choice(opts.get("reinit", "never"), REINIT_MODES, ctx, "reinit"),
        latency_log=parse_latency_log(opts.get("latency_log", "auto"), ctx, "latency_log"),
        max_tries=non_negative_int(opts.get("max_tries", DEFAULT_MAX_TRIES), ctx, "max_tries"),
    )


def setting_variants(value: Any, ctx: _Context) -> list[tuple[tuple[str, str], ...]]:
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


def order_runs(
    cells: list[_Cell], campaign: str, repeats: int, order: str, seed: int
) -> tuple[RunSpec, ...]:
    """Interleaved: every cell once per round. Random: rounds shuffled under the seed.
    Sequential: each cell's repeats back to back."""
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
    return tuple(
        RunSpec(campaign, c.server, c.settings, c.scale, c.workload, c.clients, c.options, r, i)
        for i, (c, r) in enumerate(pairs)
    )


def plan_warnings(specs: tuple[RunSpec, ...]) -> tuple[str, ...]:
    """What the plan check tells, one line per kind however large the matrix."""
    contended: dict[str, set[tuple[int, int]]] = {}
    for spec in specs:
        if spec.workload.updates and spec.scale < spec.clients:
            contended.setdefault(spec.workload.name, set()).add((spec.scale, spec.clients))
    warnings = [
        f"{workload}: scale < clients in {len(pairs)} combination(s) "
        f"({', '.join(f'scale {s} with {c} clients' for s, c in sorted(pairs)[:3])}"
        f"{', …' if len(pairs) > 3 else ''}): clients contend for the same branch rows; "
        "use scale ≥ clients"
        for workload, pairs in contended.items()
    ]
    durations = [s.options.duration_s for s in specs if s.options.duration_s is not None]
    if durations and min(durations) < 10:
        warnings.append(
            f"runs of {min(durations)} s are short: per-run noise is high; use ≥ 60 s to publish"
        )
    return tuple(warnings)
