"""The report's view model: frozen records that every output (HTML, Markdown, images, the
terminal summary) renders, so that all of them show the same numbers.

A field the results database does not hold is None, never zero. Mappings are tuples of pairs so
that the records stay immutable.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.analysis.scalability import UslFit
from pgbenchlab.findings import RunWarning
from pgbenchlab.plan.schema import PROFILED_EXTRA
from pgbenchlab.profiles import FunctionTime, Profile, ProfileDiff
from pgbenchlab.records.costs import RunCosts
from pgbenchlab.report.views.capacity import CapacityView
from pgbenchlab.results import RunStatus
from pgbenchlab.store import NoiseFloor

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Advice:
    """A warning with what to do about it, and the runs (or cell) it concerns."""

    kind: str
    severity: str  # "error" (results missing or partial) | "warning" (results to doubt)
    message: str
    remedy: str
    run_ids: tuple[int, ...] = ()
    cell_id: str | None = None


@dataclass(frozen=True)
class CampaignView:
    id: int
    name: str
    status: str
    plan_path: str
    plan_text: str
    started_at: float
    finished_at: float | None
    pgbenchlab_version: str
    pgbench_version: str | None
    machine: Pairs
    description: str = ""
    # servers ("server") and server-setting values in the order the plan lists them
    axis_orders: tuple[tuple[str, tuple[str, ...]], ...] = ()
    missing_shards: tuple[str, ...] = ()  # an incomplete merge: its plan's shards it lacks
    # test sets later plans added: (when, the servers added), oldest first
    joined: tuple[tuple[float, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class ServerView:
    """One server as recorded: a variant of a server (the settings and kernel tunables its
    cells set) is a server of its own."""

    label: str  # name plus the variant: the value of the "server" axis
    name: str
    variant: Pairs
    kind: str
    version: str
    version_num: int
    install: str | None
    data_dir: str | None
    settings: Pairs  # every setting not at its default, as SHOW prints it
    build: Pairs = ()  # a server built from source: its provenance, (title, text) pairs
    storage: str | None = None  # its data directory's file system and mount options
    description: str = ""  # what it is, in the plan's words (a test set: what changed)
    telemetry_gaps: Pairs = ()  # (source, why): the telemetry its major could not give
    setup: Pairs = ()  # its tablespaces and one-off preparations (`views.setup`)


@dataclass(frozen=True)
class SecondView:
    t: int
    tps: float
    latency_mean_ms: float | None
    latency_min_ms: float | None
    latency_max_ms: float | None
    lag_ms: float | None


@dataclass(frozen=True)
class HistogramView:
    """Latency histogram: bin i holds counts[i] transactions with lower[i] <= latency < upper[i]."""

    lower_ms: tuple[float, ...]
    upper_ms: tuple[float, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class EventView:
    """Something the server did during a run (a checkpoint, autovacuum), seconds from start."""

    t: float
    kind: str
    detail: str


@dataclass(frozen=True)
class TelemetrySeries:
    """One telemetry series of a run as the run detail draws it: in display units (cores, MB/s,
    backends), on the run's seconds axis (``t`` covers the second (t − 1, t], as TPS does)."""

    dataset: str  # the chart data it belongs to (`telemetry_series`)
    label: str
    t: tuple[int, ...]
    values: tuple[float | None, ...]  # None: no reading that second


@dataclass(frozen=True)
class RunView:
    """One run, the latest attempt of its run key, with every stored metric."""

    id: int
    run_key: str
    cell_id: str
    sequence: int
    repeat: int
    status: RunStatus
    error: str | None
    server: str  # the server label (name and variant: settings, kernel tunables)
    server_name: str
    scale: int
    workload: str
    clients: int
    threads: int
    protocol: str
    duration_s: int | None
    transactions_per_client: int | None
    warmup_s: int
    rate: float | None
    latency_limit_ms: float | None
    connect: bool
    vacuum: str
    options: Pairs  # the run's other options (spec), for telling cells apart
    started_at: float
    finished_at: float
    tps: float | None
    transactions: int | None
    failed: int | None
    skipped: int | None
    late: int | None
    late_share: float | None  # as pgbench printed it (late / its denominator)
    skipped_share: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    lag_avg_ms: float | None
    lag_max_ms: float | None
    connection_time_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    min_ms: float | None
    max_ms: float | None
    latency_source: str | None
    latency_samples: int | None
    service_p50_ms: float | None
    service_p99_ms: float | None
    service_p999_ms: float | None
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_p999_ms: float | None
    warmup_tps: float | None
    vacuum_s: float | None
    checkpoint_s: float | None
    client_cpu_s: float | None
    client_cpu_us_per_tx: float | None
    argv: tuple[str, ...]
    pgbench_version: str
    pgbench_output: str | None  # pgbench's own report, from the kept raw files
    stored_warnings: tuple[RunWarning, ...]
    connection: str = "socket"  # socket | tcp | tls
    tls_protocol: str | None = None  # what pgbench's connections negotiated, over TLS
    tls_cipher: str | None = None
    seconds: tuple[SecondView, ...] = ()
    histogram: HistogramView | None = None
    service_histogram: HistogramView | None = None
    events: tuple[EventView, ...] = ()
    diagnosis: Bottleneck | None = None  # what limited the run, from telemetry
    diagnosis_evidence: tuple[str, ...] = ()
    other_load_share: float | None = None  # of the host's CPUs, used by other processes
    cpu_affinity: tuple[str, ...] = ()  # the CPUs its processes were allowed, as sentences
    waits: tuple[tuple[str, int], ...] = ()  # ("LWLock:BufferContent", backend samples)
    retried: int | None = None  # transactions retried (--max-tries), from pgbench's report
    retries: int | None = None
    telemetry: tuple[TelemetrySeries, ...] = ()  # the drawn series; none without telemetry
    telemetry_left_out: bool = False  # recorded, but beyond what the report draws
    profiled: str | None = None  # "on"; "extra": auto's profiled repeat, out of the statistics
    figures: tuple[tuple[str, float], ...] = ()  # every metric stored (`store.metrics`), by name
    instructions_per_tx: float | None = None  # a counted run's, setup excluded
    instructions_tool: str | None = None  # what counted them (callgrind)
    # what the server spent per committed transaction (`telemetry.costs`), and its totals
    server_cpu_us_per_tx: float | None = None
    server_user_us_per_tx: float | None = None
    server_system_us_per_tx: float | None = None
    wal_bytes_per_tx: float | None = None
    buffers_hit_per_tx: float | None = None
    buffers_read_per_tx: float | None = None
    buffers_dirtied_per_tx: float | None = None
    buffers_written_per_tx: float | None = None
    context_switches_per_tx: float | None = None
    cycles_per_tx: float | None = None
    costs: RunCosts | None = None
    reset: str | None = None  # how its dataset started: reuse, init, snapshot (reflink|copy)

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.OK and self.tps is not None

    @property
    def counted(self) -> bool:
        """Whether the run enters its cell's statistics."""
        return self.profiled != PROFILED_EXTRA


@dataclass(frozen=True)
class Interval:
    """Mean of run-level values with a t confidence interval (low/high None for one run)."""

    n: int
    mean: float
    low: float | None
    high: float | None
    stddev: float | None
    cv: float | None


@dataclass(frozen=True)
class CellView:
    """One cell of the matrix: its repeats summarised."""

    cell_id: str
    dims: Pairs  # (axis, value) for every axis, clients included
    clients: int
    run_ids: tuple[int, ...]
    n_ok: int
    n_not_ok: int
    tps: Interval | None
    latency_avg_ms: float | None  # means over the successful repeats
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None  # the highest of all repeats: the worst transaction seen
    late_share: float | None
    skipped_share: float | None
    rate: float | None
    efficiency: float | None  # TPS / (TPS at the fewest clients x clients ratio)
    efficiency_base_clients: int | None

    def dim(self, axis: str) -> str:
        return dict(self.dims)[axis]


@dataclass(frozen=True)
class ChangeView:
    """A cell of a candidate server against the same cell of the baseline server."""

    candidate: str
    baseline: str
    cell_id: str
    baseline_cell_id: str
    metric: str  # "tps" | "p99"
    relative_change: float
    ci_low: float | None
    ci_high: float | None
    verdict: ComparisonVerdict
    reason: str
    floors: str = ""  # the noise floors measured for its cells, and which its verdict beat
    held: bool = False  # a change within the build-to-build floor: said within noise


@dataclass(frozen=True)
class Axis:
    key: str
    title: str


@dataclass(frozen=True)
class Step:
    """A change point of one cell and metric: performance moved between two series values."""

    cell: str  # the other axes that vary, as text
    axes: Pairs  # every other axis of the cell
    metric: str
    previous: str
    label: str
    before: float  # geometric means of the segments either side
    after: float
    relative_step: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: ComparisonVerdict


@dataclass(frozen=True)
class Scan:
    """Every cell of the other axes scanned along ``axis``."""

    axis: str
    order: tuple[str, ...]
    threshold: float
    confidence: float
    cells: int  # cells with results at `steps.MIN_POINTS` values or more
    series: int  # (cell, metric) series scanned
    not_scanned: int  # cells with results at fewer values
    too_short: tuple[str, ...]  # scanned cells whose runs cannot show a step at `confidence`
    repeats_to_show: int | None  # runs per point that could, for those cells
    steps: tuple[Step, ...]
    metrics: tuple[str, ...] = ("tps", "p99", "p50")  # the metrics scanned (`store.metrics`)

    @property
    def cells_with_steps(self) -> int:
        return len({s.cell for s in self.steps})


@dataclass(frozen=True)
class CellProfile:
    cell_id: str
    label: str
    run_ids: tuple[int, ...]
    out_of_statistics: bool  # auto's extra repeat: not in the cell's figures
    transactions: int
    profile: Profile  # the runs' stacks summed (of the server, or of pgbench: profile.process)
    top: tuple[FunctionTime, ...]

    @property
    def cpu_us_per_tx(self) -> float | None:
        if not self.transactions:
            return None
        return self.profile.per_transaction(self.profile.samples, self.transactions)


@dataclass(frozen=True)
class ProfileChange:
    baseline: CellProfile
    candidate: CellProfile
    rows: tuple[ProfileDiff, ...]


@dataclass(frozen=True)
class ReportView:
    campaign: CampaignView
    servers: tuple[ServerView, ...]
    differing_settings: tuple[str, ...]  # setting names whose values differ between servers
    runs: tuple[RunView, ...]
    cells: tuple[CellView, ...]
    axes: tuple[Axis, ...]  # the axes that vary, clients excluded
    series_axis: str | None  # the default "one line per" axis
    baseline: str | None
    changes: tuple[ChangeView, ...]
    advice: tuple[Advice, ...]
    confidence: float
    scans: tuple[Scan, ...] = ()  # change points along the server and setting axes (`steps`)
    capacity: tuple[CapacityView, ...] = ()  # a capacity campaign's searches
    scalability: tuple[ScalabilityView, ...] = ()  # the USL per series of TPS against clients
    profiles: tuple[CellProfile, ...] = ()  # per profiled cell: the server's, then pgbench's
    profile_changes: tuple[ProfileChange, ...] = ()  # candidate cells against the baseline's
    correction: str = "holm"  # how `changes` are adjusted across cells (`analysis.multiplicity`)
    floors: tuple[NoiseFloor, ...] = ()  # the noise floors measured (`views.floors`)


@dataclass(frozen=True)
class ScalabilityView:
    """The Universal Scalability Law fitted to one series (`analysis.scalability`)."""

    label: str  # the series: its values on the axes that vary, clients aside
    dims: Pairs  # every axis but clients
    fit: UslFit
    departure: str | None  # where it departs from linear, and the wait event that grows there
    curve: tuple[tuple[float, float], ...]  # (clients, fitted TPS) over the measured range
