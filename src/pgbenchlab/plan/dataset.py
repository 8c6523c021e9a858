"""The plan's `[dataset]`: how `pgbench -i` makes every dataset, and the SQL run after it.

    [dataset]
    partitions = 8               # --partitions (pgbench 13+), partition_method = "range" | "hash"
    fillfactor = 90              # -F
    unlogged_tables = true       # --unlogged-tables
    foreign_keys = true          # --foreign-keys
    init_steps = "dtgvp"         # -I (pgbench 11+): the steps and their order; keys (p) kept
    setup_sql = "setup.sql"      # run in the dataset once pgbench -i is done (functions, indexes)
    reset = "snapshot"           # how each run's dataset starts: "reuse", "snapshot", "init"

Every option, and the setup SQL's content, is part of the dataset's identity: a dataset made
with other options (or another setup) is never reused for these; its database name carries the
identity (`pgbench_s10_3f2a9c01`), so datasets of different options live side by side. A plan
without `[dataset]` makes the datasets it always made (`pgbench_s10`).

`reset` is not how a dataset is made but how each run finds it, so it is no part of the
identity: "reuse" (the default) runs on the dataset as the runs before left it, "snapshot"
restores the data directory from an image taken once the dataset was built
(`server.snapshot`), "init" runs pgbench -i again before every run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pgbenchlab import files
from pgbenchlab.plan.values import Context, choice, plan_path

DATASET_KEYS = (
    "partitions",
    "partition_method",
    "fillfactor",
    "unlogged_tables",
    "foreign_keys",
    "init_steps",
    "setup_sql",
    "reset",
)
REUSE, SNAPSHOT, INIT = "reuse", "snapshot", "init"
RESET_MODES = (REUSE, SNAPSHOT, INIT)
INIT_STEPS = frozenset("dtgGvpf")
PARTITIONS_SINCE = (13,)  # pgbench --partitions
INIT_STEPS_SINCE = (11,)  # pgbench -I


@dataclass(frozen=True)
class DatasetOptions:
    partitions: int | None = None
    partition_method: str | None = None
    fillfactor: int | None = None
    unlogged_tables: bool = False
    foreign_keys: bool = False
    init_steps: str | None = None
    setup_sql: str | None = None  # the file, as the plan names it (absolute)
    setup_text: str = ""  # its content, read when the plan was
    reset: str = REUSE  # how each run finds its dataset (RESET_MODES); not how it is made

    @property
    def identity(self) -> str:
        """A short digest of how the datasets are made ("" for pgbench -i's defaults)."""
        made = replace(self, reset=REUSE)
        if made == DatasetOptions():
            return ""
        fields = asdict(made) | {"setup_sql": None}  # the content counts, not where it lies
        del fields["reset"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]

    def init_arguments(self) -> list[str]:
        """pgbench -i's options for these (before the scale and database)."""
        argv = ["-I", self.init_steps] if self.init_steps else []
        argv += ["-F", str(self.fillfactor)] if self.fillfactor is not None else []
        argv += [f"--partitions={self.partitions}"] if self.partitions else []
        if self.partition_method:
            argv.append(f"--partition-method={self.partition_method}")
        argv += ["--unlogged-tables"] if self.unlogged_tables else []
        argv += ["--foreign-keys"] if self.foreign_keys else []
        return argv

    def needs_pgbench(self) -> tuple[tuple[int, ...], str] | None:
        """The oldest pgbench these options need and why (None: any)."""
        if self.partitions or self.partition_method:
            return PARTITIONS_SINCE, "partitions"
        if self.init_steps:
            return INIT_STEPS_SINCE, "init_steps"
        return None


def run_reset(reset: str, reinit: str) -> str:
    """How a run finds its dataset: the plan's reset, or "init" where its cell runs pgbench -i
    before each run anyway (reinit = "per-run")."""
    return INIT if reinit == "per-run" else reset


def parse_dataset(value: Any, ctx: Context, base: Path) -> DatasetOptions:
    if value is None:
        return DatasetOptions()
    if not isinstance(value, dict):
        raise ctx.fail("dataset", "must be a table ([dataset])")
    ctx.check_keys(value, DATASET_KEYS, "dataset")
    partitions = _whole(value, "partitions", ctx, low=1)
    method = value.get("partition_method")
    if method is not None and method not in ("range", "hash"):
        raise ctx.fail("dataset.partition_method", f'must be "range" or "hash"; got {method!r}')
    if method is not None and not partitions:
        raise ctx.fail("dataset.partition_method", "needs partitions")
    fillfactor = _whole(value, "fillfactor", ctx, low=10, high=100)
    steps = value.get("init_steps")
    if steps is not None:
        if not isinstance(steps, str) or not steps or set(steps) - INIT_STEPS:
            raise ctx.fail("dataset.init_steps", f"must be letters of dtgGvpf; got {steps!r}")
        if "p" not in steps or not {"g", "G"} & set(steps) or "t" not in steps:
            raise ctx.fail(
                "dataset.init_steps",
                "must create the tables (t), fill them (g or G) and add the primary keys (p): "
                "a dataset is recognised complete by its keyed tables",
            )
    setup, text = value.get("setup_sql"), ""
    if setup is not None:
        if not isinstance(setup, str) or not setup:
            raise ctx.fail("dataset.setup_sql", "must be the path of an SQL file")
        setup = plan_path(setup, base)
        try:
            text = files.read_text(Path(setup))
        except files.Unreadable as exc:
            raise ctx.fail("dataset.setup_sql", f"cannot read {setup}: {exc}") from None
    return DatasetOptions(
        partitions=partitions,
        partition_method=method,
        fillfactor=fillfactor,
        unlogged_tables=_flag(value, "unlogged_tables", ctx),
        foreign_keys=_flag(value, "foreign_keys", ctx),
        init_steps=steps,
        setup_sql=setup,
        setup_text=text,
        reset=choice(value.get("reset", REUSE), RESET_MODES, ctx, "dataset.reset"),
    )


def _whole(
    value: dict[str, Any], key: str, ctx: Context, *, low: int, high: int = 10**6
) -> int | None:
    found = value.get(key)
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, int) or not low <= found <= high:
        raise ctx.fail(
            f"dataset.{key}", f"must be a whole number from {low} to {high}; got {found!r}"
        )
    return found


def _flag(value: dict[str, Any], key: str, ctx: Context) -> bool:
    found = value.get(key, False)
    if not isinstance(found, bool):
        raise ctx.fail(f"dataset.{key}", f"must be true or false; got {found!r}")
    return found
