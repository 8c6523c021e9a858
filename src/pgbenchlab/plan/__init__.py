"""The plan file: parse, validate and expand a campaign into an ordered list of run specs.

Validation happens before anything starts. Every mistake raises `PlanError` naming the file, the
key and what to do. Expansion is deterministic: the same plan (and seed) gives the same order.

* :mod:`.schema` — the keys each table may hold and the values some of them allow,
* :mod:`.records` — `Plan`, `RunSpec`, `RunOptions`, `Workload`, `Script`, `ServerPlan`,
* :mod:`.values` — one value checked and converted (durations, latencies, names, choices),
* :mod:`.workloads` — builtins and script files, with their weights,
* :mod:`.servers` — the ``[[server]]`` tables: managed installations or an external dsn,
* :mod:`.groups` — the ``[[server_group]]`` tables: servers a run drives together,
* :mod:`.hosts` — the ``[[host]]`` tables (machines over SSH) and the servers and load
  generators that name them,
* :mod:`.builds` — the ``[build.NAME]`` tables: PostgreSQL built from source (recipes only),
* :mod:`.auto` — ``repeats = "auto"``: its minimum, maximum and precision,
* :mod:`.matrix` — the axes expanded into cells, and the cells into ordered runs,
* :mod:`.shards` — ``run --shard K/N``: a machine's part of the runs, whole matrix points,
* :mod:`.parsing` — `load` and `parse`: the TOML read and checked as a whole, with warnings.

The package is the top of the data flow: it imports only `errors`, `files`, `redaction`,
`findings`, the build recipe record (`builds.recipe`), the build install prefix (`installs`),
the comparison thresholds and corrections (`analysis.comparison`, `analysis.multiplicity`)
and psycopg's connection-string parser, never the runner, the store or the reports.
"""

from pgbenchlab.plan.auto import AutoRepeats, Verdicts, stored_verdicts
from pgbenchlab.plan.dataset import INIT, SNAPSHOT, DatasetOptions
from pgbenchlab.plan.parsing import load, parse
from pgbenchlab.plan.pooler import POOLER
from pgbenchlab.plan.records import (
    GroupPlan,
    HostPlan,
    Plan,
    PoolerPlan,
    PreparePlan,
    RunOptions,
    RunSpec,
    Script,
    ServerPlan,
    Shard,
    Workload,
)
from pgbenchlab.plan.schema import DEFAULT_MAX_TRIES, MAX_RUNS
from pgbenchlab.plan.shards import missing_shards, parse_shard, shard_of, sharded
from pgbenchlab.plan.values import plan_path, planned_axis_orders, setting_text

__all__ = [
    "DEFAULT_MAX_TRIES",
    "INIT",
    "MAX_RUNS",
    "POOLER",
    "SNAPSHOT",
    "AutoRepeats",
    "DatasetOptions",
    "GroupPlan",
    "HostPlan",
    "Plan",
    "PoolerPlan",
    "PreparePlan",
    "RunOptions",
    "RunSpec",
    "Script",
    "ServerPlan",
    "Shard",
    "Verdicts",
    "Workload",
    "load",
    "missing_shards",
    "parse",
    "parse_shard",
    "plan_path",
    "planned_axis_orders",
    "setting_text",
    "shard_of",
    "sharded",
    "stored_verdicts",
]
