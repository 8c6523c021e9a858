"""A run's result from what pgbench left behind: a pure function, no server, store or clock.

Inputs are pgbench's outputs (stdout, stderr, return code, CPU and wall time), the analysis of
its per-transaction log (read by the caller), the run spec, the pgbench version and the
telemetry captured meanwhile; times are passed in. The figures come from pgbench's report;
latency percentiles and (from a full log) the per-second series from the log, else the
series from the -P 1 lines. The run's checks become warnings (`findings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pgbenchlab import findings
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES
from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.findings import RunWarning
from pgbenchlab.invocation.command import Completed, Share
from pgbenchlab.invocation.shares import total_report
from pgbenchlab.pgbench.logs import TransactionLogSummary
from pgbenchlab.pgbench.progress import ProgressLine, error_summary, parse_stderr
from pgbenchlab.pgbench.report import PgbenchReport, parse_report
from pgbenchlab.plan import RunSpec
from pgbenchlab.records.telemetry import NO_LOG_ACCESS, RunTelemetry
from pgbenchlab.results import GeneratorFigures, LatencySummary, RunResult, RunStatus, Second
from pgbenchlab.telemetry.crosscheck import check_commits

INTERRUPTED_TEXT = "interrupted by the user"


@dataclass(frozen=True)
class LogReading:
    """What the run's per-transaction log gave: its analysis, or why there is none."""

    sampling: float | None = None  # the log's sampling rate; None: no log was written
    summary: TransactionLogSummary | None = None
    error: str | None = None  # the log was written but could not be analysed


@dataclass(frozen=True)
class Hygiene:
    """What the hygiene before a run found (a refused CHECKPOINT) and took: the seconds of its
    VACUUM and of its CHECKPOINT (None: not done). A group's run adds its members'."""

    warnings: tuple[RunWarning, ...] = ()
    vacuum_s: float | None = None
    checkpoint_s: float | None = None

    def __add__(self, other: Hygiene) -> Hygiene:
        return Hygiene(
            self.warnings + other.warnings,
            _sum(self.vacuum_s, other.vacuum_s),
            _sum(self.checkpoint_s, other.checkpoint_s),
        )


def report_figures(report: PgbenchReport) -> dict[str, Any]:
    """A run's figures as pgbench's report states them (a run here and an imported one alike)."""
    connection = report.initial_connection_time_ms
    return {
        "tps": report.tps,
        "transactions": report.transactions,
        "failed": report.failed,
        "skipped": report.skipped,
        "late": report.late,
        "latency_avg_ms": report.latency_avg_ms if report.latency_avg_measured else None,
        "latency_stddev_ms": report.latency_stddev_ms,
        "lag_avg_ms": report.lag_avg_ms,
        "lag_max_ms": report.lag_max_ms,
        "connection_time_ms": connection
        if connection is not None
        else report.average_connection_time_ms,
    }


def _sum(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


@dataclass(frozen=True)
class MeasuredRun:
    """Everything the measured pgbench left behind, and what the caller saw around it."""

    completed: Completed
    argv: tuple[str, ...]  # as stored (`layout.sanitize_argv`)
    started_at: float
    finished_at: float
    log: LogReading = LogReading()
    warmup_tps: float | None = None
    telemetry: RunTelemetry | None = None
    artifacts: tuple[str, ...] = ()
    hygiene: Hygiene = field(default_factory=Hygiene)  # before the run


def _no_report(done: Completed) -> str:
    """Why a run has no report: how pgbench ended and its last words; of the first pgbench
    that failed, named, when several ran (load generators, a group's members)."""
    failed = next((s for s in done.shares if s.completed.returncode != 0), None)
    if failed is None:
        return f"pgbench exited {done.returncode} without a report: {error_summary(done.stderr)}"
    part = failed.completed
    return (
        f"pgbench on {failed.label} exited {part.returncode} without a report: "
        f"{error_summary(part.stderr)}"
    )


def assemble(spec: RunSpec, pgbench_version: str, run: MeasuredRun) -> RunResult:
    """The run's result: ok, aborted (pgbench exited non-zero or its clients stopped early),
    failed (no report) or interrupted."""
    done = run.completed
    if done.interrupted:
        return failure(spec, pgbench_version, RunStatus.INTERRUPTED, INTERRUPTED_TEXT, run)
    try:
        report = total_report(done)
    except PgbenchParseError:
        failed = failure(spec, pgbench_version, RunStatus.FAILED, _no_report(done), run)
        return replace(failed, telemetry=run.telemetry, client_cpu_s=done.cpu_s)
    stderr = parse_stderr(done.stderr)
    aborted = done.returncode != 0 or stderr.aborted
    latency, log_seconds = _from_log(run.log)
    warnings = [*run.hygiene.warnings, *_commit_warnings(spec, report, run.telemetry)]
    warnings += run_warnings(spec, report, done)
    generators = generator_figures(done.shares, spec.options.duration_s)
    warnings += generator_warnings(generators, done.shares, run.log)
    if run.log.error is not None:  # the report's figures stand without the log
        warnings.append(findings.log_unreadable(run.log.error))
    warnings += _server_log_warnings(run.telemetry) + cost_warnings(run.telemetry)
    return RunResult(
        run_key=spec.run_key,
        cell_id=spec.cell_id,
        sequence=spec.sequence,
        repeat=spec.repeat,
        status=RunStatus.ABORTED if aborted else RunStatus.OK,
        spec=spec.stored_cell,
        argv=run.argv,
        started_at=run.started_at,
        finished_at=run.finished_at,
        pgbench_version=pgbench_version,
        error=error_summary(done.stderr) if aborted else None,
        **report_figures(report),
        warmup_tps=run.warmup_tps,
        vacuum_s=run.hygiene.vacuum_s,
        checkpoint_s=run.hygiene.checkpoint_s,
        client_cpu_s=done.cpu_s,
        latency=latency,
        seconds=log_seconds or progress_seconds(done),
        report=report,
        warnings=tuple(warnings),
        artifacts=run.artifacts,
        telemetry=run.telemetry,
        generators=generators,
    )


def generator_figures(
    shares: Sequence[Share], duration_s: int | None
) -> tuple[GeneratorFigures, ...]:
    """Each load generator's own figures, from its own report, CPU time and run-queue wait."""
    figures = []
    for share in shares:
        try:
            report: PgbenchReport | None = parse_report(share.completed.stdout)
        except PgbenchParseError:
            report = None
        usable = min(share.threads, share.cpus or share.threads)
        busy = None
        if duration_s:  # on a CPU (wait4) or waiting for one (read while it ran), per second
            busy = (share.completed.cpu_s / duration_s + (share.wait_per_s or 0.0)) / usable
        figures.append(
            GeneratorFigures(
                share.label,
                share.clients,
                share.threads,
                share.rate,
                share.seed,
                share.cpus,
                share.clock_offset_s,
                share.started_at,
                report.tps if report else None,
                report.transactions if report else None,
                report.latency_avg_ms if report else None,
                share.completed.cpu_s,
                busy,
            )
        )
    return tuple(figures)


def generator_warnings(
    figures: Sequence[GeneratorFigures], shares: Sequence[Share], log: LogReading
) -> list[RunWarning]:
    """A saturated load generator by name, and what the common window kept and cut."""
    found = [
        findings.generator_saturated(f.host, f.busy, min(f.threads, f.cpus or f.threads))
        for f in figures
    ]
    summary = log.summary
    if summary is not None and summary.window is not None:
        starts = [s.started_at for s in shares if s.started_at is not None]
        spread_ms = (max(starts) - min(starts)) * 1000
        cut = summary.lines_outside_window
        found.append(findings.generators_window(len(shares), summary.window, spread_ms, cut))
    return [w for w in found if w is not None]


def failure(
    spec: RunSpec,
    pgbench_version: str,
    status: RunStatus,
    error: str,
    run: MeasuredRun | None = None,
    *,
    started_at: float | None = None,
    finished_at: float | None = None,
) -> RunResult:
    """A result with no figures: the run failed, aborted before measuring, or was stopped.
    Times and argv come from `run` where pgbench ran, else from the keywords."""
    return RunResult(
        run_key=spec.run_key,
        cell_id=spec.cell_id,
        sequence=spec.sequence,
        repeat=spec.repeat,
        status=status,
        spec=spec.stored_cell,
        argv=run.argv if run else (),
        started_at=run.started_at if run else started_at or 0.0,
        finished_at=run.finished_at if run else finished_at or 0.0,
        pgbench_version=pgbench_version,
        error=error,
        warnings=run.hygiene.warnings if run else (),
        artifacts=run.artifacts if run else (),
    )


def run_warnings(spec: RunSpec, report: PgbenchReport, done: Completed) -> list[RunWarning]:
    """What the run's own figures say about how far to trust it (a run split across load
    generators: each one's CPU is judged on its own, `generator_warnings`)."""
    found = (
        findings.scale_below_clients(spec.workload.updates_branches, spec.scale, spec.clients),
        findings.threads_reduced(report.threads, spec.options.threads),
        findings.run_stalled(done.wall_s, spec.options.duration_s),
        None
        if done.shares
        else findings.pgbench_saturated(done.cpu_s, spec.options.duration_s, spec.pgbench_threads),
    )
    return [w for w in found if w is not None]


def _server_log_warnings(telemetry: RunTelemetry | None) -> list[RunWarning]:
    """An external server's log that could not be read on the host the plan names (without a
    host its log is not looked for: no warning)."""
    reason = None if telemetry is None else telemetry.unavailable_because("server_log")
    if not reason or reason == NO_LOG_ACCESS:
        return []
    return [findings.server_log_unread(reason)]


def cost_warnings(telemetry: RunTelemetry | None) -> list[RunWarning]:
    """The server's CPU accounted over the run checked against the other readings of it."""
    costs = None if telemetry is None else telemetry.costs
    if costs is None or costs.cpu_method is None or costs.server_cpu_s is None:
        return []
    found = findings.cpu_unaccounted(
        costs.cpu_method, costs.server_cpu_s, costs.seen_cpu_s, costs.host_busy_s,
        costs.host_others_s,
    )  # fmt: skip
    return [found] if found is not None else []


def _commit_warnings(
    spec: RunSpec, report: PgbenchReport, telemetry: RunTelemetry | None
) -> list[RunWarning]:
    commits = check_commits(
        report.transactions,
        telemetry,
        clients=spec.clients,
        connect_each=spec.options.connect,
        builtin_only=all(s.kind == "builtin" for s in spec.workload.scripts),
    )
    found = [commits.finding()] if commits is not None and not commits.agrees else []
    return found + _pinning_warnings(telemetry)


def _pinning_warnings(telemetry: RunTelemetry | None) -> list[RunWarning]:
    """A pinned role whose processes the kernel let run on other CPUs than asked."""
    if telemetry is None:
        return []
    found = (
        findings.pinning_not_applied(a.role, a.requested, a.observed) for a in telemetry.affinity
    )
    return [w for w in found if w is not None]


def _from_log(log: LogReading) -> tuple[LatencySummary | None, tuple[Second, ...]]:
    if log.summary is None or log.sampling is None:
        return None, ()
    return latency_summary(log.summary, log.sampling), log_series(log.summary, log.sampling)


def progress_seconds(done: Completed) -> tuple[Second, ...]:
    """The -P 1 series; a run split across load generators: theirs summed second by second,
    over the seconds all of them reported (latency and lag weighted by each one's TPS)."""
    if not done.shares:
        return seconds_from_progress(parse_stderr(done.stderr).progress)
    series = [
        {s.t: s for s in seconds_from_progress(parse_stderr(share.completed.stderr).progress)}
        for share in done.shares
    ]
    common = sorted(set.intersection(*(set(by_t) for by_t in series)))
    return tuple(_summed([by_t[t] for by_t in series]) for t in common)


def _summed(parts: Sequence[Second]) -> Second:
    tps = sum(p.tps for p in parts)

    def weighted(values: list[float | None]) -> float | None:
        if tps <= 0 or any(v is None for v in values):
            return None
        return sum(p.tps * v for p, v in zip(parts, values, strict=True) if v is not None) / tps

    def total(values: list[int | None]) -> int | None:
        return None if any(v is None for v in values) else sum(v or 0 for v in values)

    return Second(
        t=parts[0].t,
        tps=tps,
        latency_mean_ms=weighted([p.latency_mean_ms for p in parts]),
        latency_stddev_ms=None,
        lag_ms=weighted([p.lag_ms for p in parts]),
        skipped=total([p.skipped for p in parts]),
        failed=total([p.failed for p in parts]),
    )


def seconds_from_progress(lines: Sequence[ProgressLine]) -> tuple[Second, ...]:
    # After a stall pgbench reports late, off the whole second ("3.5 s" then "4.0 s"): both
    # round to the same second, and the later line is kept.
    by_second = {
        (t := round(p.elapsed_s) if p.elapsed_s is not None else i + 1): Second(
            t=t,
            tps=p.tps,
            latency_mean_ms=p.latency_avg_ms,
            latency_stddev_ms=p.latency_stddev_ms,
            lag_ms=p.lag_ms,
            skipped=p.skipped,
            failed=p.failed,
        )
        for i, p in enumerate(lines)
    }
    return tuple(by_second.values())


def latency_summary(summary: TransactionLogSummary, sampling: float) -> LatencySummary | None:
    """The run's latency distribution from the log analysis (exact on the logged sample)."""
    latency = summary.latency
    if latency is None or not latency.count:
        return None
    source = "full log" if sampling >= 1.0 else f"sampled log (rate {sampling:g})"
    service = summary.service_time
    service_histogram = summary.service_time_histogram
    return LatencySummary(
        source=source,
        samples=latency.count,
        percentiles_ms={p: latency.percentile_ms(p) for p in STANDARD_PERCENTILES},
        min_ms=latency.min_ms,
        max_ms=latency.max_ms,
        mean_ms=latency.mean_ms,
        stddev_ms=latency.stddev_ms,
        histogram_json=summary.latency_histogram.to_json(),
        service_percentiles_ms=(
            {p: service.percentile_ms(p) for p in STANDARD_PERCENTILES} if service else None
        ),
        service_histogram_json=service_histogram.to_json() if service_histogram else None,
        lag_percentiles_ms=(
            {p: summary.lag.percentile_ms(p) for p in STANDARD_PERCENTILES} if summary.lag else None
        ),
    )


def log_series(summary: TransactionLogSummary, sampling: float) -> tuple[Second, ...]:
    """Per-second series from a full log (exact); a sampled log leaves it to -P 1. Numbered
    like -P 1 and telemetry, second t covering (t - 1, t]; the log's seconds are wall-clock
    ones, so they sit within a second of pgbench's own."""
    if sampling < 1.0 or not summary.per_second:
        return ()
    first = summary.per_second[0].start_s
    return tuple(
        Second(
            t=row.start_s - first + 1,
            tps=float(row.successful),
            latency_mean_ms=row.latency_mean_ms,
            latency_stddev_ms=row.latency_stddev_ms,
            latency_min_ms=row.latency_min_ms,
            latency_max_ms=row.latency_max_ms,
            lag_ms=row.lag_mean_ms,
            skipped=row.skipped,
            failed=row.failed,
        )
        for row in summary.per_second
    )
