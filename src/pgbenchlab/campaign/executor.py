"""The seam between a campaign and the world outside Python: pgbench, dataset preparation and
hygiene, and the telemetry beside each run.

`LocalExecutor` does these for real (`pgbench.command`, `dataset`, `telemetry`); a test can
give a campaign another executor that replays recorded pgbench outputs instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Protocol

from pgbenchlab import dataset, findings
from pgbenchlab.findings import RunWarning
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation
from pgbenchlab.pgbench import command
from pgbenchlab.profiles import RunProfiles
from pgbenchlab.results import RunResult
from pgbenchlab.server import Endpoint, Server
from pgbenchlab.telemetry.campaign import CampaignTelemetry
from pgbenchlab.telemetry.records import RunTelemetry

CLIENT_FILES = ("PGSSLROOTCERT",)  # libpq's environment variables naming files it reads

if TYPE_CHECKING:
    from pgbenchlab.analysis.diagnosis import Diagnosis
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
    ) -> Capturing: ...

    def diagnose(self, server: str, result: RunResult) -> Diagnosis | None: ...

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
    def pgbench(
        self,
        argv: list[str],
        env: dict[str, str],
        *,
        cwd: Path,
        on_stderr_line: Callable[[str], None] | None = None,
        timeout_s: float | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> command.Completed: ...

    def prepare_dataset(
        self, server: Server, scale: int, *, pgbench: Path, work_dir: Path, force: bool
    ) -> dataset.Prepared: ...

    def vacuum(self, endpoint: Endpoint, mode: str) -> None: ...

    def checkpoint(self, endpoint: Endpoint) -> RunWarning | None:
        """CHECKPOINT and wait for it; a warning when the server refused."""
        ...

    def telemetry(self, store: Store, campaign_id: int, *, fsync_test: bool) -> Telemetry: ...


class LocalExecutor:
    """The real thing: pgbench and pg_test_fsync as processes on the load generator's host
    (this machine by default), SQL on the run's server."""

    def __init__(self, host: Host = LOCAL_HOST, pgbench_cpus: str | None = None) -> None:
        self.host = host
        self.pgbench_cpus = pgbench_cpus  # the plan's [pgbench] cpus

    def pgbench(
        self,
        argv: list[str],
        env: dict[str, str],
        *,
        cwd: Path,
        on_stderr_line: Callable[[str], None] | None = None,
        timeout_s: float | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> command.Completed:
        return command.execute(
            argv,
            env,
            cwd=cwd,
            on_stderr_line=on_stderr_line,
            timeout_s=timeout_s,
            on_start=on_start,
            host=self.host,
            cpus=self.pgbench_cpus,
        )

    def prepare_dataset(
        self, server: Server, scale: int, *, pgbench: Path, work_dir: Path, force: bool
    ) -> dataset.Prepared:
        return dataset.ensure(
            server, scale, pgbench=pgbench, work_dir=work_dir, force=force, host=self.host
        )

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
        )


class GeneratorExecutor(LocalExecutor):
    """pgbench on a load generator host: each run in a fresh directory there, its log files
    brought back into the run's artifacts directory, the directory removed."""

    def pgbench(
        self,
        argv: list[str],
        env: dict[str, str],
        *,
        cwd: Path,
        on_stderr_line: Callable[[str], None] | None = None,
        timeout_s: float | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> command.Completed:
        there = self.host.make_temp_dir("pgbench-", self._state)
        try:
            done = super().pgbench(
                [_moved(arg, str(cwd), str(there)) for arg in argv],
                self._client_files(env, there),
                cwd=Path(there),  # a path on the generator host
                on_stderr_line=on_stderr_line,
                timeout_s=timeout_s,
                on_start=on_start,
            )
            for name in self.host.list_dir(there):
                (cwd / name).write_bytes(self.host.read_bytes(there / name))
        finally:
            self.host.remove_tree(there)
        return replace(done, argv=tuple(argv))

    def _client_files(self, env: dict[str, str], there: PurePath) -> dict[str, str]:
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
        self, server: Server, scale: int, *, pgbench: Path, work_dir: Path, force: bool
    ) -> dataset.Prepared:
        return super().prepare_dataset(
            server, scale, pgbench=pgbench, work_dir=Path(self._state), force=force
        )

    @functools.cached_property
    def _state(self) -> PurePath:
        """pgbenchlab's directory there, made once (not one more round trip per pgbench)."""
        state = self.host.state_dir()
        assert state is not None, "a load generator host is another machine"
        self.host.mkdir(state)
        return state


def _moved(arg: str, here: str, there: str) -> str:
    """pgbench's log prefix, from this machine's run directory to the one there."""
    prefix = "--log-prefix="
    return arg.replace(here, there, 1) if arg.startswith(prefix + here) else arg
