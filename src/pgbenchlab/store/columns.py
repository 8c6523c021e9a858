"""The one registry of a run's columns: the `runs` table, the insert, the readers, the export
and the report's run fields all follow `RUN_COLUMNS`.

Columns present before the registry existed were created by migration 1 (`schema`), whose
SQL stays as it was so that databases already written migrate; a column added later names its
schema version in ``since`` and its migration is `added_columns_sql(since)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pgbenchlab.pgbench.report import PgbenchReport
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.costs import RunCosts
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.store.readers import attr as _attr
from pgbenchlab.store.readers import instructions_per_tx, instructions_tool, run_costs, stored_cell
from pgbenchlab.store.readers import lag as _lag
from pgbenchlab.store.readers import latency as _latency
from pgbenchlab.store.readers import masked as _masked
from pgbenchlab.store.readers import per_tx as _per_tx
from pgbenchlab.store.readers import percentile as _percentile
from pgbenchlab.store.readers import service as _service
from pgbenchlab.store.readers import spec_field as _spec
from pgbenchlab.store.readers import tls as _tls
from pgbenchlab.store.records import RunRecord

# The store's own columns of `runs`, not the run's: (name, SQL type, NOT NULL).
KEY_COLUMNS = (("id", "INTEGER", False), ("campaign_id", "INTEGER", True))


@dataclass(frozen=True)
class Codec:
    """A column whose value is a record or an enum: its stored form (JSON, text) and back."""

    plain: Callable[[Any], Any]
    typed: Callable[[Any], Any]


@dataclass(frozen=True)
class RunColumn:
    """One column of `runs`: how it is stored, what it means, how a `RunResult` gives it."""

    name: str
    sql_type: str  # INTEGER | REAL | TEXT
    unit: str  # "" for text and identities
    doc: str
    read: Callable[[RunResult], Any]
    required: bool = False  # NOT NULL
    json: bool = False  # stored as JSON text, read back decoded
    exported: bool = True  # in `pgbenchlab export` rows (the detail of one run has them all)
    since: int = 1  # the schema version that added it
    record: Codec | None = None  # read back as a record (a cell, a report) or an enum
    # A metric runs are compared on (`store.metrics`): which way is better, HIGHER or LOWER.
    better: str = ""

    @property
    def key(self) -> str:
        """The name of the decoded value: a JSON column without its ``_json``."""
        return self.name.removesuffix("_json") if self.json else self.name

    def encode(self, result: RunResult) -> Any:
        value = self.plain(self.read(result))
        return json.dumps(value, sort_keys=True) if self.json else value

    def decode(self, stored: Any) -> Any:
        if stored is None:
            return None
        value = json.loads(stored) if self.json else stored
        return self.record.typed(value) if self.record else value

    def plain(self, value: Any) -> Any:
        """A value as stored (a record as its JSON), from what `read` or `decode` gives."""
        return self.record.plain(value) if self.record else value

    @property
    def ddl(self) -> str:
        not_null = " NOT NULL" if self.required else ""
        return f"{self.name} {self.sql_type}{not_null}"


CELL = Codec(RunCell.stored, RunCell.from_stored)
REPORT = Codec(lambda r: r.stored() if r else {}, PgbenchReport.from_stored)
STATUS = Codec(str, RunStatus)
COSTS = Codec(lambda c: c.stored() if c else None, RunCosts.from_stored)  # NULL before 26


def _c(
    name: str, sql_type: str, unit: str, doc: str, read: Callable[[RunResult], Any], **kw: Any
) -> RunColumn:
    return RunColumn(name, sql_type, unit, doc, read, **kw)


REAL, INT, TEXT = "REAL", "INTEGER", "TEXT"
NN = {"required": True}
HIGHER, LOWER = "higher", "lower"


def _ms(name: str, doc: str, read: Callable[[RunResult], Any], **kw: Any) -> RunColumn:
    """A time in milliseconds: lower is better."""
    return _c(name, REAL, "ms", doc, read, better=LOWER, **kw)


# What the server spent per committed transaction (`telemetry.costs`): name, unit, meaning and
# the figure of the run's totals; those totals, how each was read and why a figure is absent
# are in costs_json. All added by schema 26 (instructions: `instructions_per_tx`, schema 25).
PER_TX = (
    ("server_cpu_us_per_tx", "µs", "the server's CPU time (user + system)", "server_cpu_s"),
    ("server_user_us_per_tx", "µs", "the server's user CPU time", "server_user_s"),
    ("server_system_us_per_tx", "µs", "the server's system CPU time", "server_system_s"),
    ("wal_bytes_per_tx", "bytes", "WAL the server wrote", "wal_bytes"),
    ("buffers_hit_per_tx", "blocks", "shared buffers found", "buffers_hit"),
    ("buffers_read_per_tx", "blocks", "blocks read into shared buffers", "buffers_read"),
    ("buffers_dirtied_per_tx", "blocks", "shared buffers dirtied", "buffers_dirtied"),
    ("buffers_written_per_tx", "blocks", "shared buffers backends wrote", "buffers_written"),
    ("context_switches_per_tx", "switches", "the server's context switches", "context_switches"),
    ("cycles_per_tx", "cycles", "CPU cycles of the server", "cycles"),
)
COST_COLUMNS = (
    *(
        _c(
            name,
            REAL,
            unit,
            f"{doc} per transaction",
            _per_tx(figure, unit),
            since=26,
            better=LOWER,
        )
        for name, unit, doc, figure in PER_TX
    ),
    _c(
        "costs_json",
        TEXT,
        "",
        "the run's cost totals, how each was read, why one is absent",
        run_costs,
        json=True,
        record=COSTS,
        since=26,
    ),
)

RUN_COLUMNS: tuple[RunColumn, ...] = (
    _c("run_key", TEXT, "", "the run's identity: its cell and repeat", _attr("run_key"), **NN),
    _c(
        "cell_id",
        TEXT,
        "",
        "the matrix cell: a digest of every option of the run",
        _attr("cell_id"),
        **NN,
    ),
    _c("sequence", INT, "", "position in the run order, from 0", _attr("sequence"), **NN),
    _c("repeat", INT, "", "which repeat of the cell, from 1", _attr("repeat"), **NN),
    _c(
        "status",
        TEXT,
        "",
        "ok | aborted | failed | interrupted",
        _attr("status"),
        record=STATUS,
        **NN,
    ),
    _c("error", TEXT, "", "why the run did not complete", _attr("error")),
    _c("server", TEXT, "", "the server's name in the plan", _spec("server"), **NN),
    _c(
        "server_settings_json",
        TEXT,
        "",
        "the setting variant of the server (secrets masked)",
        lambda r: dict(_masked(r.spec.server_settings)),
        json=True,
        **NN,
    ),
    _c("scale", INT, "", "pgbench scale factor of the dataset", _spec("scale"), **NN),
    _c("workload", TEXT, "", "the workload's name", _spec("workload"), **NN),
    _c("clients", INT, "clients", "concurrent clients (-c)", _spec("clients"), **NN),
    _c("threads", INT, "threads", "pgbench worker threads (-j)", _spec("threads"), **NN),
    _c("protocol", TEXT, "", "query protocol (-M)", _spec("protocol"), **NN),
    _c("duration_s", INT, "s", "measured duration (-T)", _spec("duration_s")),
    _c(
        "transactions_per_client",
        INT,
        "transactions",
        "transactions per client (-t)",
        _spec("transactions"),
    ),
    _c("warmup_s", INT, "s", "unmeasured run before the measured one", _spec("warmup_s"), **NN),
    _c("rate", REAL, "tx/s", "target rate (-R), TPS", _spec("rate")),
    _c("latency_limit_ms", REAL, "ms", "latency limit (-L)", _spec("latency_limit_ms")),
    _c(
        "connect",
        INT,
        "",
        "new connection per transaction (-C), 0 or 1",
        lambda r: int(r.spec.connect),
        **NN,
    ),
    _c("vacuum", TEXT, "", "what was vacuumed before the run", _spec("vacuum"), **NN),
    _c(
        "spec_json",
        TEXT,
        "",
        "every option of the run's cell",
        stored_cell,
        json=True,
        exported=False,
        record=CELL,
        **NN,
    ),
    _c("argv_json", TEXT, "", "pgbench's command line", lambda r: list(r.argv), json=True, **NN),
    _c("pgbench_version", TEXT, "", "the pgbench that ran it", _attr("pgbench_version"), **NN),
    _c("started_at", REAL, "s", "start, Unix time", _attr("started_at"), **NN),
    _c("finished_at", REAL, "s", "end, Unix time", _attr("finished_at"), **NN),
    _c("tps", REAL, "tx/s", "pgbench's TPS, without connection time", _attr("tps"), better=HIGHER),
    _c("transactions", INT, "transactions", "transactions processed", _attr("transactions")),
    _c("failed", INT, "transactions", "failed transactions", _attr("failed")),
    _c(
        "skipped",
        INT,
        "transactions",
        "transactions skipped as already late (-L)",
        _attr("skipped"),
    ),
    _c("late", INT, "transactions", "transactions above the latency limit", _attr("late")),
    _ms("latency_avg_ms", "pgbench's latency average", _attr("latency_avg_ms")),
    _ms(
        "latency_stddev_ms",
        "pgbench's latency standard deviation",
        _attr("latency_stddev_ms"),
    ),
    _ms("lag_avg_ms", "average schedule lag under -R", _attr("lag_avg_ms")),
    _ms("lag_max_ms", "largest schedule lag under -R", _attr("lag_max_ms")),
    _ms(
        "connection_time_ms",
        "pgbench's initial connection time",
        _attr("connection_time_ms"),
    ),
    _ms("p50_ms", "median latency, from the log", _percentile("50")),
    _ms("p90_ms", "90th percentile latency, from the log", _percentile("90")),
    _ms("p95_ms", "95th percentile latency, from the log", _percentile("95")),
    _ms("p99_ms", "99th percentile latency, from the log", _percentile("99")),
    _ms("p999_ms", "99.9th percentile latency, from the log", _percentile("99.9")),
    _ms("min_ms", "lowest latency, from the log", _latency(lambda lat: lat.min_ms)),
    _ms("max_ms", "highest latency, from the log", _latency(lambda lat: lat.max_ms)),
    _c(
        "latency_source",
        TEXT,
        "",
        "how the percentiles were measured",
        _latency(lambda lat: lat.source),
    ),
    _c(
        "latency_samples",
        INT,
        "transactions",
        "transactions in the latency distribution",
        _latency(lambda lat: lat.samples),
    ),
    _ms("service_p50_ms", "median of latency minus schedule lag", _service("50")),
    _ms("service_p99_ms", "p99 of latency minus schedule lag", _service("99")),
    _ms("service_p999_ms", "p99.9 of latency minus schedule lag", _service("99.9")),
    _c("warmup_tps", REAL, "tx/s", "TPS of the warmup", _attr("warmup_tps"), better=HIGHER),
    _c("client_cpu_s", REAL, "s", "pgbench's CPU time", _attr("client_cpu_s")),
    _c(
        "client_cpu_us_per_tx",
        REAL,
        "µs",
        "pgbench CPU time per transaction",
        _attr("client_cpu_us_per_tx"),
        better=LOWER,
    ),
    _c(
        "report_json",
        TEXT,
        "",
        "pgbench's report, parsed",
        _attr("report"),
        json=True,
        exported=False,
        record=REPORT,
        **NN,
    ),
    _c(
        "warnings_json",
        TEXT,
        "",
        "warnings about the run: code, evidence and sentence",
        lambda r: [w.stored() for w in r.warnings],
        json=True,
        **NN,
    ),
    _c(
        "artifacts_json",
        TEXT,
        "",
        "raw files kept for the run",
        lambda r: list(r.artifacts),
        json=True,
        **NN,
    ),
    _c(
        "result_schema",
        INT,
        "",
        "version of the run record's layout",
        _attr("schema_version"),
        **NN,
    ),
    _c(
        "connection",
        TEXT,
        "",
        "how pgbench reached the server: socket, tcp or tls",
        lambda r: r.spec.connection,
        since=10,
    ),
    _c(
        "tls_protocol", TEXT, "", "TLS protocol pgbench's connections negotiated", _tls(0), since=10
    ),
    _c("tls_cipher", TEXT, "", "TLS cipher pgbench's connections negotiated", _tls(1), since=10),
    _c(
        "sysctl_json",
        TEXT,
        "",
        "the kernel tunables of the run's cell ([matrix.sysctl])",
        lambda r: dict(r.spec.sysctl),
        json=True,
        since=13,
    ),
    _ms("lag_p50_ms", "median schedule lag under -R, from the log", _lag("50"), since=19),
    _ms("lag_p99_ms", "p99 of schedule lag under -R, from the log", _lag("99"), since=19),
    _ms(
        "lag_p999_ms",
        "p99.9 of schedule lag under -R, from the log",
        _lag("99.9"),
        since=19,
    ),
    _c("vacuum_s", REAL, "s", "the VACUUM before the run", _attr("vacuum_s"), since=22),
    _c("checkpoint_s", REAL, "s", "the CHECKPOINT before the run", _attr("checkpoint_s"), since=22),
    _c(
        "instructions_per_tx",
        REAL,
        "instructions",
        "client backends' instructions per committed transaction, connection setup excluded",
        instructions_per_tx,
        since=25,
        better=LOWER,
    ),
    _c(
        "instructions_tool",
        TEXT,
        "",
        "what counted instructions_per_tx: callgrind (count = instructions) or perf stat",
        instructions_tool,
        since=25,
    ),
    *COST_COLUMNS,
    _c(
        "reset",
        TEXT,
        "",
        'how the dataset started: "reuse", "init" (pgbench -i before the run) or "snapshot" '
        "(restored from its image, by reflink or plain copy)",
        _attr("reset"),
        since=31,
    ),
)
COLUMN = {c.name: c for c in RUN_COLUMNS}
BY_KEY = {c.key: c for c in RUN_COLUMNS}


def run_insert(campaign_id: int, result: RunResult) -> tuple[str, tuple[Any, ...]]:
    """The INSERT of one run and its parameters."""
    names = ", ".join(("campaign_id", *(c.name for c in RUN_COLUMNS)))
    marks = ", ".join("?" * (len(RUN_COLUMNS) + 1))
    values = (campaign_id, *(c.encode(result) for c in RUN_COLUMNS))
    return f"INSERT INTO runs ({names}) VALUES ({marks})", values


def added_columns_sql(version: int, columns: tuple[RunColumn, ...] = RUN_COLUMNS) -> str:
    """The migration adding the columns of schema ``version`` (> 1; NULL in runs stored
    before it): ``MIGRATIONS[version] = added_columns_sql(version)``."""
    if version <= 1:
        raise ValueError("schema 1 created its columns with its own SQL")
    added = [c for c in columns if c.since == version]
    if any(c.required for c in added):
        raise ValueError("a column added to stored runs cannot be NOT NULL")
    return "".join(f"ALTER TABLE runs ADD COLUMN {c.ddl};\n" for c in added)


def run_as_dict(run: RunRecord, *, every_column: bool = False) -> dict[str, Any]:
    """A run as one flat dict: its id, campaign and registry columns (JSON ones decoded, under
    their names without ``_json``); the cell's spec and pgbench's parsed report only with
    ``every_column``."""
    record: dict[str, Any] = {"id": run.id, "campaign_id": run.campaign_id}
    wanted = [c for c in RUN_COLUMNS if c.exported or every_column]
    for column in sorted(wanted, key=lambda c: c.json):  # the JSON ones last
        record[column.key] = column.plain(run[column.key])
    return record
