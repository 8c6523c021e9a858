"""The plan's `[dataset]`: how `pgbench -i` makes every dataset, and the SQL run after it.

    [dataset]
    partitions = 8               # --partitions (pgbench 13+), partition_method = "range" | "hash"
    fillfactor = 90              # -F
    unlogged_tables = true       # --unlogged-tables
    foreign_keys = true          # --foreign-keys
    init_steps = "dtgvp"         # -I (pgbench 11+): the steps and their order; keys (p) kept
    setup_sql = "setup.sql"      # run in the dataset once pgbench -i is done (functions, indexes)
    tablespace = "/fast/ts"      # --tablespace: the tables in a tablespace under this directory
    index_tablespace = "/ssd/ix" # --index-tablespace: the indexes likewise
    temp_tablespaces = "/tmpfs"  # the server's temp_tablespaces: temporary files there
    reset = "snapshot"           # how each run's dataset starts: "reuse", "snapshot", "init"

Every option, and the setup SQL's content, is part of the dataset's identity: a dataset made
with other options (or another setup) is never reused for these; its database name carries the
identity (`pgbench_s10_3f2a9c01`), so datasets of different options live side by side. A plan
without `[dataset]` makes the datasets it always made (`pgbench_s10`). The temporary files'
directory alone is no part of the identity: no part of the dataset lies there (it is a server
setting; changing it changes the plan).

A tablespace directory is absolute and serves managed servers on this machine only (each
cluster gets a directory of its own under it: `server.tablespaces`).

`reset` is not how a dataset is made but how each run finds it, so it is no part of the
identity: "reuse" (the default) runs on the dataset as the runs before left it, "snapshot"
restores the data directory from an image taken once the dataset was built
(`server.snapshot`), "init" runs pgbench -i again before every run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pgbenchlab import files
from pgbenchlab.plan.values import Context, choice, plan_path

# The directories of the dataset's tablespaces, by the role each serves.
TABLESPACE_KEYS = ("tablespace", "index_tablespace", "temp_tablespaces")
TABLESPACE_ROLES = {
    "tablespace": "tables",
    "index_tablespace": "indexes",
    "temp_tablespaces": "temporary files",
}
TEMP_SETTING = "temp_tablespaces"
DATASET_KEYS = (
    "partitions",
    "partition_method",
    "fillfactor",
    "unlogged_tables",
    "foreign_keys",
    "init_steps",
    "setup_sql",
    *TABLESPACE_KEYS,
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
    tablespace: str | None = None  # directories (absolute) of the tables' tablespace,
    index_tablespace: str | None = None  # the indexes',
    temp_tablespaces: str | None = None  # and the temporary files'
    reset: str = REUSE  # how each run finds its dataset (RESET_MODES); not how it is made

    @property
    def identity(self) -> str:
        """A short digest of how the datasets are made ("" for pgbench -i's defaults). The
        tablespaces count when given (a dataset made before them keeps its digest); the
        temporary files' directory never (no part of the dataset lies there), nor the reset
        (how each run finds the dataset, not how it is made)."""
        fields = asdict(self) | {"setup_sql": None}  # the content counts, not where it lies
        fields = {
            k: v
            for k, v in fields.items()
            if k != "reset"
            and (k not in TABLESPACE_KEYS or (v is not None and k != "temp_tablespaces"))
        }
        if fields == _DEFAULT_FIELDS:
            return ""
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]

    @property
    def tablespaces(self) -> dict[str, tuple[str, ...]]:
        """Each tablespace directory the plan names, with the roles it serves."""
        found: dict[str, tuple[str, ...]] = {}
        for key in TABLESPACE_KEYS:
            directory = getattr(self, key)
            if directory is not None:
                found[directory] = (*found.get(directory, ()), TABLESPACE_ROLES[key])
        return found

    def init_arguments(self) -> list[str]:
        """pgbench -i's options for these (before the scale and database)."""
        argv = ["-I", self.init_steps] if self.init_steps else []
        argv += ["-F", str(self.fillfactor)] if self.fillfactor is not None else []
        argv += [f"--partitions={self.partitions}"] if self.partitions else []
        if self.partition_method:
            argv.append(f"--partition-method={self.partition_method}")
        argv += ["--unlogged-tables"] if self.unlogged_tables else []
        argv += ["--foreign-keys"] if self.foreign_keys else []
        if self.tablespace:
            argv.append(f"--tablespace={tablespace_name(self.tablespace)}")
        if self.index_tablespace:
            argv.append(f"--index-tablespace={tablespace_name(self.index_tablespace)}")
        return argv

    def server_settings(self) -> tuple[tuple[str, str], ...]:
        """The settings the dataset's servers start with: temp_tablespaces when it is given."""
        if self.temp_tablespaces is None:
            return ()
        return ((TEMP_SETTING, tablespace_name(self.temp_tablespaces)),)

    def needs_pgbench(self) -> tuple[tuple[int, ...], str] | None:
        """The oldest pgbench these options need and why (None: any)."""
        if self.partitions or self.partition_method:
            return PARTITIONS_SINCE, "partitions"
        if self.init_steps:
            return INIT_STEPS_SINCE, "init_steps"
        return None


def tablespace_name(directory: str) -> str:
    """The tablespace of a directory the plan names: one per directory in every cluster, so a
    dataset made in another directory keeps its own."""
    return "pgbenchlab_" + hashlib.sha256(directory.encode()).hexdigest()[:8]


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
    places = {k: _directory(value, k, ctx) for k in TABLESPACE_KEYS}
    return DatasetOptions(
        **places,
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


def _directory(value: dict[str, Any], key: str, ctx: Context) -> str | None:
    found = value.get(key)
    if found is None:
        return None
    if not isinstance(found, str) or not found.startswith("/"):
        raise ctx.fail(f"dataset.{key}", f"must be an absolute directory path; got {found!r}")
    return str(PurePosixPath(found))  # one spelling per directory: "/a/b/" is "/a/b"


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


_DEFAULT_FIELDS = {
    k: v for k, v in asdict(DatasetOptions()).items() if k not in (*TABLESPACE_KEYS, "reset")
} | {"setup_sql": None}
