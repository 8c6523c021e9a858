"""Running pgbench for a run spec: the warmup (not counted; its TPS sets the log sampling rate)
and the measured run with ``-P 1`` and a per-transaction log, through the campaign's executor;
then reading that log for the result."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.campaign.assemble import Hygiene, LogReading, MeasuredRun, assemble
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.campaign.executor import Executor
from pgbenchlab.campaign.generators import clock_offsets, common_window
from pgbenchlab.campaign.layout import archive, log_files, sanitize_argv
from pgbenchlab.errors import PgbenchParseError, first_line
from pgbenchlab.invocation import command
from pgbenchlab.invocation.shares import total_report
from pgbenchlab.pgbench.log_reduced import (
    REDUCTION_SUFFIX,
    merge_reductions,
    read_reduction,
    summarise_reduction,
)
from pgbenchlab.pgbench.logs import analyse_transaction_logs
from pgbenchlab.pgbench.progress import (
    ProgressLine,
    error_summary,
    parse_progress_line,
    parse_stderr,
)
from pgbenchlab.plan import RunSpec
from pgbenchlab.records.telemetry import RunTelemetry
from pgbenchlab.results import RunResult
from pgbenchlab.server import Endpoint

# Per-transaction log lines per second that keep the observer effect well under 1 %
# (a full log costs ≈ 0.7 µs of client CPU per line; see bench/observer_effect.md).
LOG_LINES_PER_SECOND = 5_000


class RunAborted(Exception):
    """pgbench's clients stopped early in a phase before the measured run (the warmup)."""


@dataclass(frozen=True)
class Pgbench:
    """The campaign's pgbench, run through its executor; progress lines go to `on_progress`."""

    client: PgbenchClient
    executor: Executor

    def run(
        self,
        endpoint: Endpoint,
        run: command.Invocation,
        cwd: Path,
        on_progress: Callable[[ProgressLine], None],
        on_start: Callable[[int], None] | None = None,
    ) -> command.Completed:
        dbname = endpoint.client_dbname(self.client.version.major)
        argv = command.build_argv(self.client.binary, self.client.version, run, dbname)

        def on_line(line: str) -> None:
            parsed = parse_progress_line(line)
            if parsed is not None:
                on_progress(parsed)

        # -T is checked between transactions only; allow generous slack before killing.
        timeout = None if run.seconds is None else run.seconds * 2 + 120
        call = command.Call(tuple(argv), endpoint.libpq_env(), cwd, timeout, on_line, on_start)
        return self.executor.pgbench(call)

    def warmup(
        self,
        spec: RunSpec,
        endpoint: Endpoint,
        cwd: Path,
        on_progress: Callable[[ProgressLine], None],
        on_phase: Callable[[str], None],
    ) -> float | None:
        """The warmup's TPS (None without a warmup or a report); raises when it failed."""
        if spec.options.warmup_s == 0:
            return None
        on_phase("warmup")
        run = command.Invocation(
            spec.workload, spec.scale, spec.clients, spec.options, spec.options.warmup_s
        )
        done = self.run(endpoint, run, cwd, on_progress)
        if done.interrupted:
            raise KeyboardInterrupt
        if done.returncode != 0:
            cause = f"warmup: pgbench exited {done.returncode}: {error_summary(done.stderr)}"
            raise (RunAborted if parse_stderr(done.stderr).aborted else RuntimeError)(cause)
        try:
            return total_report(done).tps
        except PgbenchParseError:
            return None

    def read_log(
        self,
        spec: RunSpec,
        artifacts: Path,
        sampling: float | None,
        done: command.Completed | None = None,
    ) -> LogReading:
        """The measured run's per-transaction log, analysed (or why it could not be); a run
        on load generator hosts: their logs' reductions merged (each cut to the common window
        on its host)."""
        files, reductions = log_files(artifacts), reduction_files(artifacts)
        if sampling is None or not (files or reductions):
            return LogReading()
        shares = done.shares if done else ()
        window = common_window(shares, spec.options.duration_s)
        pg_major = self.client.version.major[0]
        rate_limited, has_retries = spec.options.rate is not None, spec.options.max_tries != 1
        try:
            if reductions:  # reduced on the load generators, cut to the window there
                summary = summarise_reduction(
                    merge_reductions([read_reduction(r) for r in reductions]),
                    pg_major=pg_major,
                    rate_limited=rate_limited,
                    has_retries=has_retries,
                    sampling_rate=sampling,
                    window=window,
                )
            else:
                summary = analyse_transaction_logs(
                    files,
                    pg_major=pg_major,
                    rate_limited=rate_limited,
                    has_retries_column=has_retries,
                    sampling_rate=sampling,
                    window=window,
                    clock_offsets_s=clock_offsets(shares, files),
                )
        except PgbenchParseError as exc:
            return LogReading(sampling, error=first_line(exc))
        return LogReading(sampling, summary)


def reduction_files(artifacts: Path) -> list[Path]:
    """The reductions of a run's logs its load generators brought back."""
    return sorted(artifacts.glob(f"*{REDUCTION_SUFFIX}"))


@dataclass(frozen=True)
class Around:
    """What a measured run's caller saw around it: when it started, the warmup's TPS, the log
    sampling chosen from it, and what hygiene found before it."""

    started: float
    warmup_tps: float | None
    sampling: float | None
    hygiene: Hygiene


def finished_run(
    pgbench: Pgbench,
    spec: RunSpec,
    done: command.Completed,
    artifacts: Path,
    around: Around,
    *,
    telemetry: RunTelemetry | None,
    version: str,
    results_dir: Path,
    phase: Callable[[str], None],
) -> RunResult:
    """A measured run's result: an interrupted one at once; else with its log read and its
    outputs archived."""
    argv = sanitize_argv(done.argv, results_dir)
    if done.interrupted:
        return assemble(spec, version, MeasuredRun(done, argv, around.started, time.time()))
    phase("analysing")
    log = pgbench.read_log(spec, artifacts, around.sampling, done)
    finished = time.time()
    kept = archive(artifacts, done, argv)
    run = MeasuredRun(
        done,
        argv,
        around.started,
        finished,
        log,
        around.warmup_tps,
        telemetry,
        kept,
        around.hygiene,
    )
    return assemble(spec, version, run)


def measured_invocation(spec: RunSpec, log_dir: Path, sampling: float | None) -> command.Invocation:
    return command.Invocation(
        spec.workload,
        spec.scale,
        spec.clients,
        spec.options,
        spec.options.duration_s,
        log_dir=log_dir if sampling else None,
        sampling_rate=sampling or 1.0,
    )


def sampling_rate(spec: RunSpec, warmup_tps: float | None) -> float | None:
    """The per-transaction log sampling rate (None: no log), from the plan and warmup TPS."""
    mode = spec.options.latency_log
    if mode == "off":
        return None
    if mode == "full":
        return 1.0
    if mode != "auto":
        return float(mode)
    expected = spec.options.rate or warmup_tps
    if not expected or expected <= LOG_LINES_PER_SECOND:
        return 1.0
    rate = LOG_LINES_PER_SECOND / expected
    return float(f"{rate:.2g}")  # a readable rate such as 0.15
