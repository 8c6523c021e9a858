"""The seam between a campaign and the world outside Python: pgbench, dataset preparation and
hygiene, and the telemetry beside each run.

`LocalExecutor` does these for real (`invocation.command`, `dataset`, `telemetry`); a test can
give a campaign another executor that replays recorded pgbench outputs instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Protocol

from pgbenchlab import dataset, findings
from pgbenchlab.cpusets import NumaPolicy
from pgbenchlab.diagnosing import Evidence
from pgbenchlab.findings import RunWarning
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation
from pgbenchlab.invocation import command
from pgbenchlab.pgbench import log_reducer
from pgbenchlab.pgbench.log_reduced import REDUCTION_SUFFIX
from pgbenchlab.pgbench.log_reducer import Layout
from pgbenchlab.plan import DatasetOptions
from pgbenchlab.profiles import RunProfiles
from pgbenchlab.records.telemetry import Point, RunTelemetry
from pgbenchlab.server import Endpoint, Server
from pgbenchlab.telemetry.campaign import CampaignTelemetry

CLIENT_FILES = ("PGSSLROOTCERT",)  # libpq's environment variables naming files it reads
REDUCE_TIMEOUT_S = 600  # a generator's log reduced (a few seconds per million lines)

if TYPE_CHECKING:
    from pgbenchlab.store import Store


class Capturing(Protocol):
    """Telemetry beside one measured run (`telemetry.capture.Capture`)."""

    def start(self) -> object: ...

    def pgbench_started(self, pid: int) -> None: ...

    def stop(self, pgbench_cpu_s: float | None = None) -> RunTelemetry | None: ...


class Telemetry(Protocol):
    """A campaign's telemetry (`telemetry.campaign.CampaignTelemetry`)."""

    def capture(
        self,
        server: Server,
        endpoint: Endpoint,
        threads: int | None,
        on_phase: Callable[[str], None] | None = None,
        on_sample: Callable[[Sequence[Point]], None] | None = None,
    ) -> Capturing: ...

    def evidence(self, server: str) -> Evidence:
        """What a run's diagnosis reads besides the run (`diagnosing.diagnose_run`)."""
        ...

    def profiler(
        self, server: Server, label: str, work_dir: Path, pgbench: Installation | None = None
    ) -> Profiling | None:
        """perf beside the run, and beside pgbench when its installation is given (None: the
        server's processes cannot be profiled)."""
        ...


class Profiling(Protocol):
    """CPU profiles beside one measured run (`telemetry.profiler.RunProfiler`)."""

    def start(self) -> None: ...

    def pgbench_started(self, pid: int) -> None:
        """The measured run starts now, in this pgbench process."""

    def measured(self) -> None: ...

    def stop(self) -> RunProfiles: ...

    def close(self) -> None: ...


class Executor(Protocol):
    def pgbench(self, call: command.Call) -> command.Completed: ...

    def prepare_dataset(
        self,
        server: Server,
        scale: int,
        *,
        pgbench: Path,
        work_dir: Path,
        force: bool,
        options: DatasetOptions = dataset.DEFAULTS,
    ) -> dataset.Prepared: ...

    def vacuum(self, endpoint: Endpoint, mode: str) -> None: ...

    def checkpoint(self, endpoint: Endpoint) -> RunWarning | None:
        """CHECKPOINT and wait for it; a warning when the server refused."""
        ...

    def telemetry(self, store: Store, campaign_id: int, *, fsync_test: bool) -> Telemetry: ...


class LocalExecutor:
    """The real thing: pgbench and pg_test_fsync as processes on the load generator's host
    (this machine by default), SQL on the run's server."""

    single_pgbench = True  # a run's pgbench is one process (its pid watched by the telemetry)

    def __init__(
        self,
        host: Host = LOCAL_HOST,
        pgbench_cpus: str | None = None,
        pgbench_numa: NumaPolicy | None = None,
    ) -> None:
        self.host = host
        self.pgbench_cpus = pgbench_cpus  # the plan's [pgbench] cpus
        self.pgbench_numa = pgbench_numa  # and numa

    def pgbench(self, call: command.Call) -> command.Completed:
        return command.execute(call, host=self.host, cpus=self.pgbench_cpus, numa=self.pgbench_numa)

    def prepare_dataset(
        self,
        server: Server,
        scale: int,
        *,
        pgbench: Path,
        work_dir: Path,
        force: bool,
        options: DatasetOptions = dataset.DEFAULTS,
    ) -> dataset.Prepared:
        return dataset.ensure(
            server, scale, pgbench=pgbench, work_dir=work_dir, force=force, host=self.host,
            options=options,
        )  # fmt: skip

    def vacuum(self, endpoint: Endpoint, mode: str) -> None:
        dataset.vacuum(endpoint, mode)

    def checkpoint(self, endpoint: Endpoint) -> RunWarning | None:
        return findings.checkpoint_refused() if dataset.checkpoint(endpoint) else None

    def telemetry(self, store: Store, campaign_id: int, *, fsync_test: bool) -> Telemetry:
        return CampaignTelemetry(
            store,
            campaign_id,
            fsync_test=fsync_test,
            host=self.host,
            pgbench_cpus=self.pgbench_cpus,
            watch_pgbench=self.single_pgbench,
            pgbench_numa=None if self.pgbench_numa is None else self.pgbench_numa.text,
        )


class GeneratorExecutor(LocalExecutor):
    """pgbench on a load generator host: each run in a fresh directory there, its log reduced
    there (`log_reducer`) and the reduction brought back into the run's artifacts directory
    (with the whole log files too when the plan keeps them), the directory removed."""

    def __init__(
        self,
        host: Host,
        pgbench_cpus: str | None = None,
        *,
        keep_logs: bool = False,
        pgbench_numa: NumaPolicy | None = None,
    ) -> None:
        super().__init__(host, pgbench_cpus, pgbench_numa)
        self.keep_logs = keep_logs  # [pgbench] keep_logs

    def pgbench(self, call: command.Call) -> command.Completed:
        there = self.work_dir()
        try:
            done = self.pgbench_in(there, call)
            cwd = Path(call.cwd)
            self.collect(there, cwd, log_layout(list(call.argv), None, 0.0), self.host.name)
        finally:
            self.host.remove_tree(there)
        return done

    def work_dir(self) -> PurePath:
        """A fresh directory for one run there (the caller removes it; a later start does,
        if this pgbenchlab is killed meanwhile)."""
        own = self.host.own_dir()
        assert own is not None, "a load generator host is another machine"
        return self.host.make_temp_dir("pgbench-", own)

    def pgbench_in(self, there: PurePath, call: command.Call) -> command.Completed:
        """The call's pgbench run in there (a directory on the generator host), its log files
        left there for `collect`."""
        cwd = Path(call.cwd)
        argv = [_moved(arg, str(cwd), str(there)) for arg in call.argv]
        moved = replace(
            call,
            argv=tuple(self._shipped_scripts(argv, cwd, there)),
            env=self._client_files(call.env, there),
            cwd=there,
        )
        return replace(super().pgbench(moved), argv=call.argv)

    def collect(self, there: PurePath, cwd: Path, layout: Layout, label: str) -> None:
        """The reduction of the log files in there, written into cwd as LABEL.reduction.json;
        the whole files too when the plan keeps them."""
        logs = sorted(n for n in self.host.list_dir(there) if n.startswith(command.LOG_PREFIX))
        if not logs:
            return
        script = there / Path(log_reducer.__file__).name
        self.host.write_text(script, Path(log_reducer.__file__).read_text(), mode=0o644)
        argv = ["python3", str(script), *log_reducer.arguments(layout)]
        done = self.host.run([*argv, *(str(there / n) for n in logs)], timeout=REDUCE_TIMEOUT_S)
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise OSError(f"reducing pgbench's log on host {self.host.name} failed: {reason}")
        (cwd / f"{label}{REDUCTION_SUFFIX}").write_text(done.stdout)
        if self.keep_logs:
            for name in logs:
                (cwd / name).write_bytes(self.host.read_bytes(there / name))

    def _shipped_scripts(self, argv: list[str], cwd: Path, there: PurePath) -> list[str]:
        """argv, each custom script (-f FILE@WEIGHT, a file on this machine) copied into the
        run's directory there and named by its copy."""
        shipped = []
        for i, arg in enumerate(argv):
            if i > 0 and argv[i - 1] == "-f":
                path, weight = arg.rsplit("@", 1)
                copy = there / f"script-{i}-{PurePath(path).name}"
                self.host.write_text(copy, (cwd / path).read_text(), mode=0o644)
                arg = f"{copy}@{weight}"
            shipped.append(arg)
        return shipped

    def _client_files(self, env: Mapping[str, str], there: PurePath) -> dict[str, str]:
        """env, the files libpq reads on pgbench's side (the authority a TLS server is verified
        against) copied into the run's directory there."""
        moved = dict(env)
        for name in CLIENT_FILES:
            if name in env:
                local = Path(env[name])
                moved[name] = str(there / local.name)
                self.host.write_text(there / local.name, local.read_text(), mode=0o644)
        return moved

    def prepare_dataset(
        self,
        server: Server,
        scale: int,
        *,
        pgbench: Path,
        work_dir: Path,
        force: bool,
        options: DatasetOptions = dataset.DEFAULTS,
    ) -> dataset.Prepared:
        return super().prepare_dataset(
            server, scale, pgbench=pgbench, work_dir=Path(self._state), force=force,
            options=options,
        )  # fmt: skip

    @functools.cached_property
    def _state(self) -> PurePath:
        """pgbenchlab's directory there, made once (not one more round trip per pgbench)."""
        state = self.host.state_dir()
        assert state is not None, "a load generator host is another machine"
        self.host.mkdir(state)
        return state


def log_layout(argv: list[str], window: tuple[float, float] | None, offset_s: float) -> Layout:
    """The log's columns as pgbench's argv asks for them, the window to keep (on this machine's
    clock) and the writing host's clock offset."""
    retries = any(a.startswith("--max-tries=") and a != "--max-tries=1" for a in argv)
    return Layout("-R" in argv, retries, window, round(offset_s * 1_000_000))


def _moved(arg: str, here: str, there: str) -> str:
    """pgbench's log prefix, from this machine's run directory to the one there."""
    prefix = "--log-prefix="
    return arg.replace(here, there, 1) if arg.startswith(prefix + here) else arg
