"""The plan's records: a campaign's servers, workloads and the ordered run specs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.cpusets import NumaPolicy
from pgbenchlab.findings import BRANCH_UPDATING_BUILTINS, updates_branch_rows
from pgbenchlab.installs import BINARIES_PREFIX, BUILD_PREFIX
from pgbenchlab.plan.auto import AutoRepeats, Verdicts
from pgbenchlab.plan.dataset import DatasetOptions, run_reset
from pgbenchlab.plan.schema import PROFILED_EXTRA
from pgbenchlab.plan.values import planned_axis_orders
from pgbenchlab.records.cell import RunCell
from pgbenchlab.redaction import redact_plan_text, redact_setting


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
    def updates_branches(self) -> bool:
        """Whether the workload updates pgbench_branches rows (branch contention matters)."""
        return any(
            script.name in BRANCH_UPDATING_BUILTINS
            if script.kind == "builtin"
            else updates_branch_rows(script.text)
            for script in self.scripts
        )


@dataclass(frozen=True)
class HostPlan:
    """A [[host]]: a machine reached over SSH (OpenSSH conventions; port, identity and
    known_hosts only when ~/.ssh/config does not say them)."""

    name: str
    ssh: str  # "user@address" or "address"
    port: int | None = None
    identity: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True)
class PreparePlan:
    """[[server]] prepare: pgbench's builtin workload for duration_s at clients, once after
    each start of the server, before its first run (a long read-only warmup)."""

    duration_s: int
    workload: str = "select-only"
    clients: int = 1


@dataclass(frozen=True)
class ServerPlan:
    name: str
    install: str | None = None  # managed: an installation spec
    dsn: str | None = field(default=None, repr=False)  # external: a libpq connection string
    settings: tuple[tuple[str, str], ...] = ()
    data_dir: str | None = None
    init: bool = False  # external only: may pgbenchlab run pgbench -i there?
    cpus: str | None = None  # managed only: the CPU list its processes are pinned to
    numa: NumaPolicy | None = None  # managed only: numactl's placement of its processes
    host: str | None = None  # the [[host]] it runs on; None: this machine
    description: str = ""  # what this server is (a tuning test set: what changed), reported
    prepare: PreparePlan | None = None  # the one-off preparation after each start
    copy_of: str = ""  # a copy of a rebuilt build (`rebuild = N`): the [[server]] it copies

    @property
    def managed(self) -> bool:
        return self.dsn is None


# PgBouncer's own defaults: a plan that says nothing measures the pooler as it ships.
DEFAULT_POOL_SIZE = 20
DEFAULT_MAX_CLIENT_CONN = 100


@dataclass(frozen=True)
class PoolerPlan:
    """[pooler]: the pool mode, the server connections per database and user (pool_size), the
    client connections it accepts, the CPU list it is pinned to and which PgBouncer runs (None:
    the one on PATH, else Debian's /usr/sbin/pgbouncer)."""

    pool_mode: str = "transaction"
    pool_size: int = DEFAULT_POOL_SIZE
    max_client_conn: int = DEFAULT_MAX_CLIENT_CONN
    cpus: str | None = None
    install: str | None = None


@dataclass(frozen=True)
class GroupPlan:
    """A [[server_group]]: servers a run drives together, each given the whole cell (its
    clients, threads and rate), stored as one run under the group's name."""

    name: str
    servers: tuple[str, ...]  # the plan's servers, in the group's order
    solo: bool = True  # the members also run their own cells alone


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
    connection: str = "socket"  # socket | tcp | tls | pgbouncer: how pgbench reaches the server
    profile: str = "off"  # off | on | auto (plan) → "extra" on the repeat auto adds
    threads_auto: bool = False  # threads = "auto" made `threads` (which the cell keeps)
    count: str = "off"  # off | instructions: the server under callgrind, instructions counted


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
    sysctl: tuple[tuple[str, str], ...] = ()  # kernel tunables set for the run

    @property
    def cell(self) -> RunCell:
        o = self.options
        return RunCell(
            server=self.server,
            server_settings=tuple(sorted(self.server_settings)),  # as the store reads it back
            scale=self.scale,
            workload=self.workload.name,
            clients=self.clients,
            duration_s=o.duration_s,
            transactions=o.transactions,
            warmup_s=o.warmup_s,
            protocol=o.protocol,
            threads=o.threads,
            rate=o.rate,
            latency_limit_ms=o.latency_limit_ms,
            connect=o.connect,
            vacuum=o.vacuum,
            checkpoint=o.checkpoint,
            latency_log=o.latency_log,
            max_tries=o.max_tries,
            connection=o.connection,
            sysctl=tuple(sorted(self.sysctl)),
            count=None if o.count == "off" else o.count,
        )

    @property
    def stored_cell(self) -> RunCell:
        """The cell as the run's result stores it: with whether the run was profiled ("on",
        or "extra": the repeat `auto` adds, kept out of the statistics)."""
        return replace(self.cell, profile=self.options.profile if self.profiled else None)

    @property
    def variant(self) -> tuple[tuple[str, str], ...]:
        """What the cell sets around its server, its settings and kernel tunables: a server
        run with another variant is a server of its own in the results."""
        return self.server_settings + self.sysctl

    @property
    def point(self) -> str:
        """The cell without its configuration (server, server settings, kernel tunables): the
        cells sharing a point are the ones a comparison of configurations sets side by side."""
        config = ("server", "server_settings", "sysctl")
        return self._identity({k: v for k, v in self.cell.stored().items() if k not in config})

    @property
    def cell_id(self) -> str:
        return hashlib.sha256(self._identity(self.cell.stored()).encode()).hexdigest()[:16]

    def _identity(self, cell: dict[str, Any]) -> str:
        """The cell's values with its workload's scripts and variables, as canonical JSON."""
        scripts = [(s.kind, s.name, s.weight, s.text) for s in self.workload.scripts]
        return json.dumps([cell, scripts, self.workload.defines], sort_keys=True)

    @property
    def pgbench_threads(self) -> int:
        """The threads pgbench runs: it lowers -j to the clients (-c)."""
        return min(self.options.threads, self.clients)

    @property
    def profiled(self) -> bool:
        return self.options.profile in ("on", PROFILED_EXTRA)

    @property
    def counted(self) -> bool:
        """Instructions counted: the server runs under callgrind (`count = "instructions"`)."""
        return self.options.count != "off"

    @property
    def run_key(self) -> str:
        return f"{self.cell_id}-r{self.repeat}"

    def estimated_seconds(self, per_run_overhead: float = 1.5) -> float:
        """The run's warmup and measured time (-t mode: a nominal 10 s) and what surrounds it."""
        duration = self.options.duration_s
        return (10 if duration is None else duration) + self.options.warmup_s + per_run_overhead

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={redact_setting(k, v)}" for k, v in self.server_settings)
        extra += "".join(f" {k}={v}" for k, v in self.sysctl)
        rate = f" R={self.options.rate:g}" if self.options.rate else ""
        conn = " -C" if self.options.connect else ""
        kind = "" if self.options.connection == "socket" else f" {self.options.connection}"
        return (
            f"{self.server}{extra} s={self.scale} {self.workload.name} c={self.clients}"
            f" {self.options.protocol}{kind}{rate}{conn} #{self.repeat}"
        )


@dataclass(frozen=True)
class Shard:
    """`run --shard K/N`: part K (from 1) of N of a plan's runs (`plan.shards`)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


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
    quick: bool = False  # a first look: runs short on purpose, not for publishing
    builds: tuple[BuildRecipe, ...] = ()  # the [build.NAME] tables, `from` resolved
    auto: AutoRepeats | None = None  # repeats = "auto": specs hold its first rounds
    pgbench_cpus: str | None = None  # [pgbench] cpus: the CPU list pgbench is pinned to
    pgbench_numa: NumaPolicy | None = None  # [pgbench] numa: numactl's placement of pgbench
    hosts: tuple[HostPlan, ...] = ()  # the [[host]] tables
    pgbench_hosts: tuple[str, ...] = ()  # where pgbench runs; () is this machine
    shard: Shard | None = None  # sharded: specs hold only this part of the runs
    all_specs: tuple[RunSpec, ...] = ()  # sharded: every run of the plan (its identity)
    pgbench_profile: bool = True  # [pgbench] profile: profiled runs profile pgbench too
    groups: tuple[GroupPlan, ...] = ()  # the [[server_group]] tables
    # [pgbench] keep_logs: the load generators' whole per-transaction logs are brought back
    # and kept beside their reductions (else only the reductions)
    pgbench_keep_logs: bool = False
    # threads = "auto": the CPUs pgbench may use on each load generator (this machine's, or
    # each [pgbench] host's as `plan.load` was told them)
    auto_cpus: tuple[int, ...] = ()
    # [dataset]: how pgbench -i makes every dataset
    dataset: DatasetOptions = field(default_factory=DatasetOptions)
    # [campaign] decide, equivalence, correction: how its comparisons are judged
    verdicts: Verdicts = field(default_factory=Verdicts)
    # [pooler]: the managed PgBouncer of connection = "pgbouncer"
    pooler: PoolerPlan = field(default_factory=PoolerPlan)
    # [campaign] restart: "each-round" restarts the managed servers and drops the page cache
    # before every round of repeats
    restart: str = "never"

    @property
    def measures_floors(self) -> bool:
        """Whether the campaign records noise floors: restarts between rounds, or rebuilds."""
        return self.restart != "never" or any(s.copy_of for s in self.servers)

    @property
    def counts_generator_cpus(self) -> bool:
        """Whether some run's threads depend on the CPUs of the load generator hosts."""
        return (
            bool(self.pgbench_hosts)
            and self.pgbench_cpus is None
            and any(s.options.threads_auto for s in self.all_specs or self.specs)
        )

    @property
    def profiles_pgbench(self) -> bool:
        """Whether some run profiles pgbench beside its server."""
        return self.pgbench_profile and any(s.profiled for s in self.specs)

    def host(self, name: str) -> HostPlan:
        return next(h for h in self.hosts if h.name == name)

    def uses_connection(self, kind: str, server: str | None = None) -> bool:
        """Whether a run (of this server, alone or in a group) connects this way."""
        return any(
            s.options.connection == kind and (server is None or server in self.members(s.server))
            for s in self.specs
        )

    @property
    def needed_builds(self) -> tuple[BuildRecipe, ...]:
        """The builds a server or the [pgbench] install uses, in plan order; those of profiled
        servers (and pgbench's, when it is profiled) are built for profiles (frame pointers,
        debug info)."""
        used = {s.install for s in self.servers if s.managed} | {self.pgbench_install}
        runs = self.all_specs or self.specs  # a shard builds what the whole plan does
        profiled = {self.server(s.server).install for s in runs if s.profiled}
        if self.profiles_pgbench:
            profiled.add(self.pgbench_install)
        return tuple(
            replace(b, profiling=BUILD_PREFIX + b.name in profiled)
            for b in self.builds
            if BUILD_PREFIX + b.name in used
        )

    @property
    def needed_binaries(self) -> tuple[str, ...]:
        """The prebuilt binaries the managed servers name ("9.6", "12.22"), in plan order."""
        named = (s.install or "" for s in self.servers if s.managed)
        return tuple(
            dict.fromkeys(n[len(BINARIES_PREFIX) :] for n in named if n.startswith(BINARIES_PREFIX))
        )

    @property
    def stored_text(self) -> str:
        """The plan's text as it may be stored or shown: no secret in it."""
        return redact_plan_text(self.text)

    @property
    def files(self) -> dict[str, str]:
        """Every file the plan refers to (custom scripts, the patches of its builds) and its
        content's digest: part of the plan's identity, so an edited script or patch is a
        changed plan."""
        scripts = {
            script.name: hashlib.sha256(script.text.encode()).hexdigest()[:16]
            for spec in self.all_specs or self.specs
            for script in spec.workload.scripts
            if script.kind == "file"
        }
        setup = self.dataset.setup_sql
        if setup is not None:
            scripts[setup] = hashlib.sha256(self.dataset.setup_text.encode()).hexdigest()[:16]
        return scripts | self.patch_digests

    @property
    def patch_digests(self) -> dict[str, str]:
        return {
            path: hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
            for build in self.needed_builds
            for path in build.patches
            if Path(path).is_file()
        }

    @property
    def digest(self) -> str:
        """Identity of the plan: its stored text and its files' contents (never a secret)."""
        identity = json.dumps([self.stored_text, sorted(self.files.items())])
        return hashlib.sha256(identity.encode()).hexdigest()[:16]

    @property
    def sysctl_names(self) -> tuple[str, ...]:
        """The kernel tunables the campaign sets ([matrix.sysctl]; [matrix.sysfs] by their
        path under /sys)."""
        return tuple(sorted({name for spec in self.specs for name, _ in spec.sysctl}))

    def server(self, name: str) -> ServerPlan:
        return next(s for s in self.servers if s.name == name)

    @property
    def server_names(self) -> list[str]:
        """Every name a run's server may have: the servers, then the groups."""
        return [s.name for s in self.servers] + [g.name for g in self.groups]

    def is_group(self, name: str) -> bool:
        return any(g.name == name for g in self.groups)

    def counts(self, server: str) -> bool:
        """Whether the server's runs are counted: it runs under callgrind (all its runs or
        none, as the parser checks)."""
        return any(s.counted for s in self.specs if s.server == server)

    def reset_of(self, spec: RunSpec) -> str:
        """How the run finds its dataset: "reuse", "snapshot" or "init" (`run_reset`)."""
        return run_reset(self.dataset.reset, spec.options.reinit)

    def members(self, name: str) -> tuple[str, ...]:
        """The servers a run of this server or group drives."""
        return next((g.servers for g in self.groups if g.name == name), (name,))

    @property
    def axis_orders(self) -> dict[str, list[str]]:
        """The order of the plan's ordered axes (`planned_axis_orders`)."""
        return planned_axis_orders(self.text)

    def estimated_seconds(self, per_run_overhead: float = 1.5) -> float:
        return sum(spec.estimated_seconds(per_run_overhead) for spec in self.specs)
