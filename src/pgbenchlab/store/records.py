"""What the store's reading API returns: frozen records, JSON already decoded, absent values None.

A run's own columns are those of `pgbenchlab.store.columns.RUN_COLUMNS`, so `RunRecord` holds
them by key rather than listing them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgbenchlab import files
from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.analysis.floors import BUILD_FLOOR as BUILD_FLOOR
from pgbenchlab.analysis.floors import RESTART_FLOOR as RESTART_FLOOR
from pgbenchlab.analysis.floors import RUN_FLOOR as RUN_FLOOR
from pgbenchlab.pgbench.report import PgbenchReport
from pgbenchlab.records.cell import RunCell
from pgbenchlab.results import CampaignStatus, RunResult, RunStatus
from pgbenchlab.server import ServerFacts


@dataclass(frozen=True)
class CampaignRecord:
    id: int
    name: str
    status: CampaignStatus
    plan_path: str
    plan_text: str
    plan_digest: str
    started_at: float
    finished_at: float | None
    pgbenchlab_version: str
    pgbench_version: str | None
    machine: Mapping[str, Any]
    description: str
    files: Mapping[str, str]
    axis_orders: Mapping[str, tuple[str, ...]]  # servers and setting values in plan order
    missing_shards: tuple[str, ...] = ()  # a merge without them ("2/3"): status incomplete


@dataclass(frozen=True)
class CampaignSummary:
    """A campaign as listings show it: its record and how many runs it has (latest attempts)."""

    campaign: CampaignRecord
    runs: int


@dataclass(frozen=True)
class RunValue:
    """What deciding more rounds needs of one run: its cell and round, TPS when ok, wall time."""

    cell_id: str
    repeat: int
    tps: float | None  # None unless the run is ok
    seconds: float
    figures: tuple[tuple[str, float], ...] = ()  # the metrics asked for (ok runs, as stored)


@dataclass(frozen=True)
class ServerRecord:
    """One server of a campaign; a setting variant of a server is a record of its own."""

    name: str
    variant: Mapping[str, str]
    kind: str
    version: str
    version_num: int
    install: str | None
    data_dir: str | None
    settings: Mapping[str, str]
    requested: Mapping[str, str]
    recorded_at: float
    build: Mapping[str, Any] | None = None  # provenance of a server built from source
    description: str = ""  # the plan's words for it


@dataclass(frozen=True)
class ServerStorage:
    """The file system of a server's data directory, as recorded before its first run."""

    fs_type: str | None
    mount_options: str | None  # the mount's, then the super block's in parentheses


@dataclass(frozen=True)
class DatasetRecord:
    server: str
    scale: int
    database: str
    initialized_at: float
    init_seconds: float | None  # None: an existing dataset was reused
    reused: bool


@dataclass(frozen=True)
class RunRecord:
    """One stored run, as the registry's columns read it back (`values`, by key: a JSON column
    decoded, under its name without ``_json``). Callers read it by attribute: the cell,
    pgbench's report and the status as the records and enum the run's result held (`spec`,
    `report`, `status`), its identity, figures and outcome typed; code that walks the registry
    (exports, metrics chosen by name) reads ``record[key]``."""

    id: int
    campaign_id: int
    values: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def _float(self, key: str) -> float | None:
        value = self.values[key]
        return None if value is None else float(value)

    def _int(self, key: str) -> int | None:
        value = self.values[key]
        return None if value is None else int(value)

    @property
    def run_key(self) -> str:
        return str(self.values["run_key"])

    @property
    def cell_id(self) -> str:
        return str(self.values["cell_id"])

    @property
    def sequence(self) -> int:
        return int(self.values["sequence"])

    @property
    def repeat(self) -> int:
        return int(self.values["repeat"])

    @property
    def status(self) -> RunStatus:
        return RunStatus(self.values["status"])

    @property
    def error(self) -> str | None:
        error = self.values["error"]
        return None if error is None else str(error)

    @property
    def spec(self) -> RunCell:
        cell: RunCell = self.values["spec"]
        return cell

    @property
    def report(self) -> PgbenchReport | None:
        report: PgbenchReport | None = self.values["report"]
        return report

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.values["argv"])

    @property
    def warnings(self) -> tuple[Any, ...]:
        """The stored warnings as decoded (`findings.from_stored` makes them records)."""
        return tuple(self.values["warnings"])

    @property
    def tps(self) -> float | None:
        return self._float("tps")

    @property
    def transactions(self) -> int | None:
        return self._int("transactions")

    @property
    def failed(self) -> int | None:
        return self._int("failed")

    @property
    def skipped(self) -> int | None:
        return self._int("skipped")

    @property
    def late(self) -> int | None:
        return self._int("late")

    @property
    def latency_avg_ms(self) -> float | None:
        return self._float("latency_avg_ms")

    @property
    def p50_ms(self) -> float | None:
        return self._float("p50_ms")

    @property
    def p99_ms(self) -> float | None:
        return self._float("p99_ms")

    @property
    def p999_ms(self) -> float | None:
        return self._float("p999_ms")

    @property
    def latency_source(self) -> str | None:
        source = self.values["latency_source"]
        return None if source is None else str(source)

    @property
    def instructions_per_tx(self) -> float | None:
        return self._float("instructions_per_tx")


@dataclass(frozen=True)
class ProbeRecord:
    """One probe of a capacity search: the stored run behind it, its role and offered rate
    (None for the closed-loop start), its clients and its verdict against the SLO."""

    run_id: int
    search: str  # the searched cell's id
    role: str
    rate: float | None
    clients: int
    passed: bool
    verdict: str
    tps: float | None


@dataclass(frozen=True)
class RunEvent:
    """Something the server did during a run (a checkpoint, autovacuum), seconds from start."""

    t: float
    kind: str
    detail: str


@dataclass(frozen=True)
class RunDiagnosis:
    verdict: Bottleneck
    evidence: tuple[str, ...]
    details: Mapping[str, Any]


@dataclass(frozen=True)
class RunTelemetryFacts:
    """What a run's telemetry was recorded over."""

    duration_s: float
    host_cpus: int | None
    activity_rounds: int


@dataclass(frozen=True)
class WaitEvents:
    wait_event_type: str
    wait_event: str
    samples: int


TelemetryPoint = tuple[str, str, int, float]  # source, metric, t, value


def artifact_parts(campaign: str, campaign_id: int, sequence: int, run_key: str) -> tuple[str, ...]:
    """Where a run attempt's raw files are kept, under the results directory: written by the
    campaign, read by `show`."""
    return (*campaign_artifact_parts(campaign, campaign_id), f"{sequence:04d}-{run_key}")


def campaign_artifact_parts(campaign: str, campaign_id: int) -> tuple[str, ...]:
    """Where a campaign's run attempts keep their raw files, under the results directory."""
    return ("artifacts", f"{campaign}-{campaign_id}")


def campaign_artifacts(results_dir: Path, campaign: str, campaign_id: int) -> Path | None:
    """The directory of a campaign's raw files, None where its stored name (a database may come
    from another machine) would lead out of results_dir."""
    return files.within(results_dir, *campaign_artifact_parts(campaign, campaign_id))


def run_artifacts(
    results_dir: Path, campaign: str, campaign_id: int, sequence: int, run_key: str
) -> Path | None:
    """The directory of a run attempt's raw files, None where the stored names would lead out
    of results_dir."""
    return files.within(results_dir, *artifact_parts(campaign, campaign_id, sequence, run_key))


@dataclass(frozen=True)
class NoiseFloor:
    """How much one metric moves between identical members: run to run (repeats), restart to
    restart, build to build (the same source built twice); ``spread`` relative (about the
    CV), ``evidence`` how it was measured."""

    metric: str
    kind: str  # RUN_FLOOR | RESTART_FLOOR | BUILD_FLOOR
    spread: float
    server: str = ""  # the server it was measured on ("" for the campaign's median)
    evidence: str = ""
    cell: str = ""  # the cell id it was measured in ("" for the whole campaign)


@dataclass(frozen=True)
class BisectionRecord:
    """A performance bisection as stored: what was asked, the commits of its range (hash,
    subject, author_date), its steps in the order made, and its answer once it has one."""

    name: str
    request: Mapping[str, Any]
    commits: tuple[Mapping[str, str], ...]
    steps: tuple[Mapping[str, Any], ...]
    status: str
    answer: Mapping[str, Any] | None
    started_at: float
    updated_at: float


@dataclass(frozen=True)
class FollowCommit:
    """A commit a followed branch selected: what it is, where it stands on the branch's
    first-parent line (0: its root), the campaign of its runs, and its status ("measured",
    "running" while its campaign runs, "does not build", "does not start") with the detail."""

    follow: str
    commit_hash: str
    parent: str | None
    position: int
    subject: str
    author_date: str  # ISO 8601, as git prints it
    source: str
    branch: str
    campaign: str
    status: str
    detail: str
    seconds: float | None  # what building and measuring it took
    measured_at: float

    @property
    def short(self) -> str:
        return self.commit_hash[:10]


@dataclass(frozen=True)
class ImportedFile:
    """A file an import read (`pgbenchlab import`): its path under the imported directory, its
    SHA-256 and size, its role (output, stderr, log, statistics, unread) and, for one that gave
    or fed a run, the run's index in the import's runs (its id once stored); why it was not read
    (unread) or what was made of it."""

    path: str
    sha256: str
    size: int
    role: str
    run: int | None = None  # index in ImportedCampaign.runs when writing, the run's id on reading
    note: str = ""


@dataclass(frozen=True)
class ImportedServer:
    """A server of an imported campaign as the reports (14+: its version) and names tell it."""

    facts: ServerFacts
    variant: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ImportedCampaign:
    """An imported campaign whole, stored in one transaction by `Store.record_import`."""

    name: str
    source: str  # the directory or connection it was read from (no secret)
    plan_text: str  # what was asked: the source and the pattern, as TOML
    digest: str  # of every file read and of the pattern: the same import has the same digest
    description: str
    pgbench_version: str | None
    servers: tuple[ImportedServer, ...]
    runs: tuple[RunResult, ...]
    files: tuple[ImportedFile, ...]
    started_at: float
    finished_at: float


@dataclass(frozen=True)
class JoinedSets:
    """The test sets a plan adds to a campaign, and what of the new plan the campaign keeps
    beside its text: its files' digests and its axes' orders."""

    added: tuple[str, ...]
    files: Mapping[str, str]
    axis_orders: Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class PlanChange:
    """One change of a campaign's plan: when, the test sets it added, and the plan before."""

    changed_at: float
    added: tuple[str, ...]
    plan_text: str
    plan_digest: str
