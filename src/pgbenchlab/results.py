"""Immutable result records, as the runner hands them to the store.

Every number says how it was obtained (`LatencySource`). A field pgbench or the server did not
produce is None, never zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pgbenchlab.analysis.diagnosis import RULES_VERSION, Bottleneck
from pgbenchlab.findings import RunWarning
from pgbenchlab.pgbench.report import PgbenchReport
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.costs import RunCosts
from pgbenchlab.records.observed import ObservedRun

if TYPE_CHECKING:
    from pgbenchlab.analysis.diagnosis import Diagnosis
    from pgbenchlab.profiles import Profile
    from pgbenchlab.records.telemetry import RunTelemetry

RESULT_SCHEMA_VERSION = 1


class RunStatus(StrEnum):
    """What became of a run attempt. Only `ok` is complete: its numbers enter statistics and
    it is never repeated. Every other status is repeated when the same campaign runs again,
    and makes `run` exit 1 (130 for `interrupted`).

    | status      | meaning                                                   | numbers kept |
    |-------------|-----------------------------------------------------------|--------------|
    | ok          | pgbench measured the whole run and exited 0               | yes, counted |
    | aborted     | pgbench's clients stopped early (a SQL error, the server  | partial,     |
    |             | died): in the warmup or the measured run alike            | never counted|
    | failed      | nothing was measured: the server, the dataset, or pgbench | no           |
    |             | itself failed before or without a report                  |              |
    | interrupted | the user stopped the campaign (Ctrl-C, SIGTERM)           | no           |
    """

    OK = "ok"
    ABORTED = "aborted"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def complete(self) -> bool:
        return self is RunStatus.OK


OK, ABORTED, FAILED, INTERRUPTED = RunStatus
COMPLETE_STATUSES = tuple(s.value for s in RunStatus if s.complete)


class CampaignStatus(StrEnum):
    """How a campaign ended (`running` while it runs)."""

    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # the user stopped it; run it again to go on
    STOPPED = "stopped"  # the results could no longer be written (disk full, lock)
    INCOMPLETE = "incomplete"  # merged without some of its plan's shards (`missing_shards`)
    IMPORTED = "imported"  # read from files pgbench wrote elsewhere (`pgbenchlab import`)


def missing_shards_text(missing: Sequence[str]) -> str:
    """What an incomplete merge lacks, in one phrase: "shards 1/3, 3/3 missing"."""
    return f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing"


@dataclass(frozen=True)
class Second:
    """Second ``t`` of a run, covering (t - 1, t] from the measured start, from pgbench's -P 1
    lines or, where every transaction was logged, the log (min/max come only from the log)."""

    t: int
    tps: float
    latency_mean_ms: float | None
    latency_stddev_ms: float | None
    latency_min_ms: float | None = None
    latency_max_ms: float | None = None
    lag_ms: float | None = None
    skipped: int | None = None
    failed: int | None = None


@dataclass(frozen=True)
class LatencySummary:
    """Latency distribution of a run from its per-transaction log."""

    source: str  # "full log" | "sampled log (rate 0.05)"
    samples: int
    percentiles_ms: dict[str, float]  # "50", "90", "95", "99", "99.9"
    min_ms: float
    max_ms: float
    mean_ms: float
    stddev_ms: float
    histogram_json: str
    # Under -R pgbench's latency counts from the scheduled start; service time = latency − lag.
    service_percentiles_ms: dict[str, float] | None = None
    service_histogram_json: str | None = None
    lag_percentiles_ms: dict[str, float] | None = None  # schedule lag (-R), from the log


@dataclass(frozen=True)
class RunHost:
    """A host that took part in a run: its role (server | pgbench), the plan's name for it
    ("local": the machine that ran the campaign) and its SSH address ("" for local)."""

    role: str
    host: str
    address: str = ""


@dataclass(frozen=True)
class RunOrigin:
    """Where a run was made: the machine that ran its campaign (its host name) and, for a
    campaign run in shards (`run --shard`), which part ("K/N"; None when not sharded)."""

    machine: str
    shard: str | None = None


@dataclass(frozen=True)
class GeneratorFigures:
    """One load generator's part of a run split across several: its share, seed, clock and
    start (this machine's clock), and its own report's figures and CPU."""

    host: str
    clients: int
    threads: int
    rate: float | None
    seed: int
    cpus: int | None  # the CPUs it could use
    clock_offset_s: float
    started_at: float | None
    tps: float | None
    transactions: int | None
    latency_avg_ms: float | None
    cpu_s: float
    busy: float | None  # its CPU time and run-queue wait over what its threads (at most its
    # CPUs) could use


@dataclass(frozen=True)
class ServerPart:
    """One member server's part of a group's run (`plan.groups`): its pgbench's figures (the
    sum of its shares' reports), the commits the server itself counted meanwhile, and what
    limited it (the diagnosis of a single server's run, on its own telemetry and figures), with
    what that diagnosis read (`observed`), so that new rules judge the member again."""

    server: str
    clients: int
    tps: float | None
    transactions: int | None
    failed: int | None
    latency_avg_ms: float | None
    server_commits: int | None  # its database's commits over the run (None: not sampled)
    commits_unexplained: int | None  # commits neither its pgbench nor the sampler made
    verdict: Bottleneck | None = None  # None: not sampled, or no report
    evidence: tuple[str, ...] = ()  # the verdict's evidence, one line each
    costs: RunCosts | None = None  # what its server spent over the run (None: not sampled)
    # the diagnosis' details: the rules that judged the part (rules_version: today's, for a part
    # made now) and what else held
    details: Mapping[str, Any] = field(default_factory=lambda: {"rules_version": RULES_VERSION})
    observed: ObservedRun | None = None  # the member's run as its own (None: stored before 30)


@dataclass(frozen=True)
class RunResult:
    """Everything stored about one run."""

    run_key: str
    cell_id: str
    sequence: int
    repeat: int
    status: RunStatus
    spec: RunCell  # the run's cell, and whether it was profiled
    argv: tuple[str, ...]
    started_at: float
    finished_at: float
    pgbench_version: str
    error: str | None = None
    tps: float | None = None
    transactions: int | None = None
    failed: int | None = None
    skipped: int | None = None
    late: int | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    lag_avg_ms: float | None = None
    lag_max_ms: float | None = None
    connection_time_ms: float | None = None
    warmup_tps: float | None = None
    vacuum_s: float | None = None  # the hygiene before the run: its VACUUM (None: none) ...
    checkpoint_s: float | None = None  # ... and its CHECKPOINT, each waited for
    client_cpu_s: float | None = None
    latency: LatencySummary | None = None
    seconds: tuple[Second, ...] = ()
    report: PgbenchReport | None = None  # pgbench's report, parsed (None: it printed none)
    warnings: tuple[RunWarning, ...] = ()  # what the run's checks found (`findings`)
    artifacts: tuple[str, ...] = ()
    schema_version: int = RESULT_SCHEMA_VERSION
    telemetry: RunTelemetry | None = None  # what the server and the OS did meanwhile
    diagnosis: Diagnosis | None = None  # what limited the run, with its evidence
    sysctl: tuple[tuple[str, str], ...] = ()  # kernel tunables read back before the run
    instructions_per_tx: float | None = None  # a counted run's (profiles.counting)
    instructions_tool: str | None = None  # what counted them: "callgrind"
    profile: Profile | None = None  # the server's CPU profile when the run was profiled
    generators: tuple[GeneratorFigures, ...] = ()  # a run split across load generators
    pgbench_profile: Profile | None = None  # pgbench's, when it was profiled too
    servers: tuple[ServerPart, ...] = ()  # a group's run: each member server's part
    # how the run's dataset started ([dataset] reset): "reuse", "init" (pgbench -i before it) or
    # "snapshot (reflink)" / "snapshot (copy)" (restored from its image so); None: not known
    reset: str | None = None

    @property
    def client_cpu_us_per_tx(self) -> float | None:
        if self.client_cpu_s is None or not self.transactions:
            return None
        return self.client_cpu_s * 1e6 / self.transactions
