"""What the pgbench benchmarks share: one managed server, CPU accounting per run, paired
ratios (the provenance, verdict and history of every figure file are bench/figure.py's, named
here for the scripts that import them from this module).

A noisy 2-core host varies 6–14 % from run to run, mostly by slow drift (other tenants), so
configurations are interleaved round by round (the order rotates) and compared as paired
ratios within a round; CPU time per transaction of everything involved (server, pgbench, this
process) is the tight measure, TPS the direct one. Other processes' CPU during each run is
recorded so a busy machine shows in the result instead of hiding in it.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cpuclock import machine_busy_s, own_cpu_s
from figure import HERE, REPO, Provenance, duration_text, median_interval  # noqa: F401 (scripts)
from pgbenchlab import dataset, installs, osuser, plan
from pgbenchlab.analysis.comparison import LogDifference, log_half_width
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.invocation import command
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.records.version import PgVersion, parse_version
from pgbenchlab.server import Endpoint, ManagedServer, postmaster_pid
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.capture import Capture, CaptureConfig
from pgbenchlab.telemetry.serverlog import ServerLog

PROC = Path("/proc")
SCALE = 10


# -- runs on one managed server ------------------------------------------------------------------


def spec_for(workload: str, clients: int, seconds: int) -> plan.RunSpec:
    text = f"""
[defaults]
duration = "{seconds}s"
[matrix]
scale = [{SCALE}]
workload = ["{workload}"]
clients = [{clients}]
"""
    return plan.parse(text, "bench.toml", base=HERE).specs[0]


def rotated(modes: Sequence[str], round_no: int) -> list[str]:
    """Round r starts with mode r mod n: each mode takes every position equally often."""
    k = round_no % len(modes)
    return [*modes[k:], *modes[:k]]


@dataclass(frozen=True)
class Measured:
    """One pgbench run. CPU in µs per transaction; ``other_share`` is the share of all CPUs
    used by processes outside the measurement while it ran."""

    tps: float
    client_us: float  # pgbench (wait4)
    server_us: float  # postmaster and backends, the sampler's backend included (/proc)
    own_us: float  # this process during the run: the sampler thread when one runs
    other_share: float
    busy_share: float  # all CPU used on the host, share of all CPUs

    @property
    def total_us(self) -> float:
        return self.client_us + self.server_us + self.own_us


@dataclass
class BenchServer:
    binary: Path
    version: PgVersion
    server: ManagedServer
    endpoint: Endpoint
    logs: Path

    def run(
        self,
        spec: plan.RunSpec,
        *,
        sampling: float | None,
        progress: bool = True,
        captures: Sequence[Capture] = (),
        on_stderr_line: Callable[[str], None] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> Measured:
        """One run with pgbench's options as given: -P 1 when ``progress``, a per-transaction
        log at ``sampling`` (None: no log), the telemetry ``captures`` beside it (and
        ``on_start`` told pgbench's pid, as a campaign's profiler is). Only the time pgbench
        runs is accounted: a capture's start and stop (connecting, reading the server log) lie
        outside it, as in a campaign."""
        argv = self.argv(spec, sampling=sampling, progress=progress)
        pid = self.postmaster()
        for capture in captures:
            capture.start()

        def started(pgbench: int) -> None:
            for capture in captures:
                capture.pgbench_started(pgbench)
            if on_start is not None:
                on_start(pgbench)

        done = None
        try:
            before = (server_cpu_s(pid), own_cpu_s(), machine_busy_s(), time.monotonic())
            call = command.Call(
                tuple(argv), self.endpoint.libpq_env(), self.logs, None, on_stderr_line, started
            )
            done = command.execute(call)
            after = (server_cpu_s(pid), own_cpu_s(), machine_busy_s(), time.monotonic())
        finally:
            for capture in captures:
                capture.stop(done.cpu_s if done else None)
        report = parse_report(done.stdout)
        assert report.tps is not None and report.transactions
        server, own, busy, wall = (a - b for a, b in zip(after, before, strict=True))
        capacity = (os.cpu_count() or 1) * wall
        other = max(0.0, busy - server - own - done.cpu_s) / capacity
        per_tx = 1e6 / report.transactions
        return Measured(
            report.tps,
            done.cpu_s * per_tx,
            server * per_tx,
            own * per_tx,
            other,
            busy / capacity,
        )

    def argv(
        self, spec: plan.RunSpec, *, sampling: float | None, progress: bool = True
    ) -> list[str]:
        """pgbench's argv for ``spec`` (old logs removed): -P 1 when ``progress``, a
        per-transaction log at ``sampling`` (None: no log)."""
        for old in self.logs.glob(f"{command.LOG_PREFIX}.*"):
            old.unlink()
        invocation = command.Invocation(
            spec.workload,
            spec.scale,
            spec.clients,
            spec.options,
            spec.options.duration_s,
            log_dir=self.logs if sampling else None,
            sampling_rate=sampling or 1.0,
            progress=progress,
        )
        return command.build_argv(self.binary, self.version, invocation, self.endpoint.dbname)

    def postmaster(self) -> int:
        pid = postmaster_pid(self.server.data_dir)
        assert pid is not None
        return pid

    def capture(self) -> Capture:
        """The telemetry capture pgbenchlab runs beside a measured run."""
        return Capture(
            CaptureConfig(
                self.endpoint,
                log=ServerLog(self.server.log_path),
                postmaster_pid=postmaster_pid(self.server.data_dir),
                disk_device=LOCAL_HOST.device_of(self.server.data_dir),
                pgbench_threads=None,
                host_cpus=os.cpu_count(),
            )
        )

    def vacuum(self) -> None:
        dataset.vacuum(self.endpoint, "pgbench")


def server_cpu_s(postmaster: int) -> float:
    times = osstats.server_times(PROC, postmaster)
    assert times is not None
    return times[0]


@contextmanager
def bench_server(settings: dict[str, str] | None = None) -> Iterator[BenchServer]:
    """A managed PostgreSQL 18 (embedded) with a scale-10 dataset, removed afterwards."""
    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve("embedded", installs.discover()), account)
    home = account.make_dir(Path(tempfile.mkdtemp(prefix="pgbl-bench-", dir="/var/tmp")), 0o755)
    server = ManagedServer(
        "bench", install, home / "data", account, settings or {"shared_buffers": "512MB"}
    )
    server.prepare()
    binary = install.binary("pgbench")
    logs = Path(tempfile.mkdtemp(prefix="pgbl-bench-logs-"))
    try:
        endpoint = dataset.ensure(server, SCALE, pgbench=binary, work_dir=logs, force=True).endpoint
        yield BenchServer(binary, parse_version(command.version_of(binary)), server, endpoint, logs)
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


@dataclass(frozen=True)
class Ratio:
    """Geometric mean of paired ratios with its confidence interval."""

    value: float
    low: float
    high: float

    def text(self, digits: int = 3) -> str:
        return f"{self.value:.{digits}f} ({self.low:.{digits}f} – {self.high:.{digits}f})"


def paired_ratio(base: Sequence[float], other: Sequence[float], confidence: float = 0.95) -> Ratio:
    """other ÷ base, round by round: a t interval on the mean log ratio (n - 1 df)."""
    logs = [math.log(o / b) for b, o in zip(base, other, strict=True)]
    mean = statistics.fmean(logs)
    if len(logs) < 2:  # no interval from one pair
        return Ratio(math.exp(mean), 0.0, math.inf)
    se = statistics.stdev(logs) / math.sqrt(len(logs))
    half = log_half_width(LogDifference(mean, se, len(logs) - 1), confidence)
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def paired_median(base: Sequence[float], other: Sequence[float], confidence: float = 0.95) -> Ratio:
    """other ÷ base, round by round: the median of the rounds' ratios with its distribution-free
    interval (`figure.median_interval`). A round that another tenant slowed by a third moves it
    by one rank, where it moves a geometric mean by a third over the number of rounds."""
    ratios = [o / b for b, o in zip(base, other, strict=True)]
    return Ratio(*median_interval(ratios, confidence))


def busy_note(measured: Sequence[Measured], limit: float = 0.05) -> list[str]:
    """A warning when other processes used more than ``limit`` of the CPUs on average."""
    share = statistics.fmean(m.other_share for m in measured)
    text = f"Other processes used {share:.1%} of the CPUs during the runs (mean)."
    if share <= limit:
        return [text]
    return [
        f"**Not a final figure**: {text} Rerun on a quiet machine for the figure of record.",
    ]
