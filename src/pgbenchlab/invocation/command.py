"""Build pgbench's argv for a run and execute it on a `Host` (never through a shell).

Connection details reach pgbench through libpq's environment variables, so a password never
appears in argv, a process listing or a stored command line.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from pgbenchlab.cpusets import NumaPolicy
from pgbenchlab.hosts import LOCAL_HOST, Host, Process, pinned
from pgbenchlab.plan import RunOptions, Workload
from pgbenchlab.records.version import PgVersion

LOG_PREFIX = "pgbench_log"


@dataclass(frozen=True)
class Invocation:
    """What to run: the measured run, or its warmup (same workload, no log)."""

    workload: Workload
    scale: int
    clients: int
    options: RunOptions
    seconds: int | None  # -T; None with -t
    log_dir: Path | None = None  # write a per-transaction log here
    sampling_rate: float = 1.0
    progress: bool = True


@dataclass(frozen=True)
class Call:
    """One pgbench process to start, wherever it runs: its argv, its libpq environment (kept
    out of argv and of this record's repr: it may hold a password), the directory it runs in,
    the time it may take, and who hears its stderr lines and its pid."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    cwd: PurePath
    timeout_s: float | None = None
    on_stderr_line: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    on_start: Callable[[int], None] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # pgbench's own user + system CPU time
    interrupted: bool
    shares: tuple[Share, ...] = ()  # a run split across load generators: each one's part


@dataclass(frozen=True)
class Share:
    """One load generator's part of a run split across several, or one group member's part of a
    group's run (`campaign.generators`, `campaign.together`)."""

    host: str
    clients: int
    threads: int
    rate: float | None  # its -R
    seed: int  # its --random-seed
    cpus: int | None  # the CPUs it may use there (its pinned ones, else the host's)
    clock_offset_s: float  # its clock minus this machine's
    started_at: float | None  # when its pgbench started, on this machine's clock
    completed: Completed
    server: str = ""  # the group member it drove ("": the run's only server)
    wait_per_s: float | None = None  # its threads' run-queue wait per second while it ran

    @property
    def label(self) -> str:
        """Its name in logs and results: the host, and the member server in a group's run."""
        return f"{self.server}@{self.host}" if self.server else self.host


def build_argv(binary: Path, version: PgVersion, run: Invocation, dbname: str) -> list[str]:
    opts = run.options
    argv = [str(binary), "-n", "-c", str(run.clients), "-j", str(opts.threads)]
    argv += ["-M", opts.protocol]
    if run.seconds is not None:
        argv += ["-T", str(run.seconds)]
    else:
        argv += ["-t", str(opts.transactions)]
    if run.progress:
        argv += ["-P", "1"]
    for script in run.workload.scripts:
        flag = "-b" if script.kind == "builtin" else "-f"
        argv += [flag, f"{script.name}@{script.weight}"]  # explicit weight: paths may hold '@'
    if all(s.kind == "file" for s in run.workload.scripts):
        argv += ["-s", str(run.scale)]  # custom scripts see :scale = 1 otherwise
    for name, value in run.workload.defines:
        argv += ["-D", f"{name}={value}"]
    if opts.rate:
        argv += ["-R", f"{opts.rate:g}"]
    if opts.latency_limit_ms:
        # pgbench keeps whole microseconds; ":g" would round 1234.567 ms to 1234.57
        argv += ["-L", f"{opts.latency_limit_ms:.3f}".rstrip("0").rstrip(".")]
    if opts.connect:
        argv.append("-C")
    if opts.max_tries != 1:  # 15+; the plan is checked against the pgbench that runs
        argv.append(f"--max-tries={opts.max_tries}")
    if run.log_dir is not None:
        argv.append("-l")
        if version.major >= (10,):  # 9.6 writes into the working directory, which we set
            argv.append(f"--log-prefix={run.log_dir / LOG_PREFIX}")
        if run.sampling_rate < 1.0:
            argv.append(f"--sampling-rate={run.sampling_rate:.6g}")
    argv.append(dbname)
    return argv


def execute(
    call: Call, *, host: Host = LOCAL_HOST, cpus: str | None = None, numa: NumaPolicy | None = None
) -> Completed:
    """Run the call's pgbench on host (pinned to the CPU list cpus, placed by the NUMA policy
    numa, when given), streaming its
    stderr lines to the call's callback; measure its CPU time. The pinning tool execs pgbench:
    same pid, and argv stays pgbench's own. The call's `on_start` receives pgbench's pid as
    soon as it is started (a sampler watches it)."""
    started = time.monotonic()
    stdout_lines: list[str] = []
    stderr_lines: list[str] = []

    def on_stderr(line: str) -> None:
        stderr_lines.append(line)
        if call.on_stderr_line:
            call.on_stderr_line(line)

    proc = host.start(
        pinned(list(call.argv), cpus, host, numa),
        env={**_base_env(), **call.env, "PG_COLOR": "never"},
        cwd=call.cwd,
        on_stdout_line=stdout_lines.append,
        on_stderr_line=on_stderr,
    )
    interrupted, killer = False, None
    try:  # from here on a Ctrl-C stops the process
        killer = _kill_after(proc, call.timeout_s) if call.timeout_s else None
        if call.on_start is not None:
            call.on_start(proc.pid)
        end = proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        proc.interrupt()  # ask pgbench to stop; kill it if it has not within 10 s
        _kill_after(proc, 10)
        end = proc.wait()
    if killer:
        killer.cancel()
    return Completed(
        call.argv,
        end.returncode,
        "".join(f"{line}\n" for line in stdout_lines),
        "".join(f"{line}\n" for line in stderr_lines),
        time.monotonic() - started,
        end.cpu_s,
        interrupted,
    )


def _base_env() -> dict[str, str]:
    # Connection options come with the endpoint; where libpq finds a dsn's service= comes from
    # here, as it does for the plan check.
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "PGSERVICEFILE", "PGSYSCONFDIR")
    return {k: v for k, v in os.environ.items() if k in keep}


def _kill_after(proc: Process, timeout_s: float) -> threading.Timer:
    # A reaped process is never signalled (its pid may be someone else's by then).
    timer = threading.Timer(timeout_s, proc.kill)
    timer.daemon = True
    timer.start()
    return timer


def version_of(binary: PurePath, host: Host = LOCAL_HOST) -> str:
    argv = [str(binary), "-V"]
    done = host.run(argv, timeout=20)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    return done.stdout.strip()


def supports_tls(binary: PurePath, host: Host = LOCAL_HOST) -> bool:
    """Whether pgbench's libpq was built with TLS: one without refuses sslmode=require before
    it tries to connect (here to a socket directory that does not exist)."""
    env = {"PATH": "/usr/bin:/bin", "PGSSLMODE": "require", "PGHOST": "/nonexistent-pgbenchlab"}
    done = host.run([str(binary), "-n", "-t", "1", "postgres"], env=env, timeout=20)
    return "SSL support is not compiled in" not in done.stderr
