"""Telemetry as a campaign uses it: once per server (storage, pg_config, pg_test_fsync once per
device), and per run a `Capture` configured for that server and a diagnosis of the result.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Protocol

import psycopg

from pgbenchlab import builds
from pgbenchlab.diagnosing import Evidence
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation
from pgbenchlab.records.telemetry import Point
from pgbenchlab.server import Endpoint, ExternalServer, ManagedServer, Server, postmaster_pid
from pgbenchlab.telemetry.capture import Capture, CaptureConfig
from pgbenchlab.telemetry.external import ExternalPlace, locate
from pgbenchlab.telemetry.fsync import FsyncFigure, run_pg_test_fsync
from pgbenchlab.telemetry.machine import parse_pg_config, storage_facts
from pgbenchlab.telemetry.profiler import PgbenchTarget, Profiler, RunProfiler
from pgbenchlab.telemetry.serverlog import ServerLog
from pgbenchlab.telemetry.symbols import symbols_note

FSYNC_TEST_ENV = "PGBENCHLAB_FSYNC_TEST"  # "on"/"off": force pg_test_fsync either way
# pg_test_fsync takes about 15 s per storage device: worth it when that is under 2 % of the
# campaign's planned time, so a quick campaign is not slowed by a quarter.
FSYNC_TEST_MIN_PLANNED_S = 750


def fsync_test_wanted(planned_seconds: float) -> bool:
    """Whether a campaign of that planned length runs pg_test_fsync (the environment decides
    first)."""
    forced = os.environ.get(FSYNC_TEST_ENV)
    if forced in ("on", "off"):
        return forced == "on"
    return planned_seconds >= FSYNC_TEST_MIN_PLANNED_S


@dataclass(frozen=True)
class ServerTelemetryFacts:
    """Recorded once per campaign and server, beside the server's settings."""

    server: str
    storage: dict[str, Any] | None  # file system, mount options and device of the data dir
    pg_config: dict[str, str] | None  # build options
    fsync: FsyncFigure | None


def read_pg_config(endpoint: Endpoint, server: Server) -> dict[str, str] | None:
    """The running server's build options (the pg_config view needs a superuser; a managed
    server's own pg_config program says the same)."""
    try:
        with endpoint.connect() as conn:
            rows = conn.execute("SELECT name, setting FROM pg_config").fetchall()
        return {str(k): str(v) for k, v in rows}
    except psycopg.Error:
        pass
    if isinstance(server, ManagedServer):
        try:
            done = server.host.run([str(server.install.binary("pg_config"))], env=None, timeout=20)
        except OSError:
            return None
        return parse_pg_config(done.stdout) or None
    return None


class FactsStore(Protocol):
    """Where a campaign keeps its servers' facts (the results store)."""

    def record_server_facts(self, campaign_id: int, facts: ServerTelemetryFacts) -> None: ...

    def fsync_figure(self, campaign_id: int, device: str) -> FsyncFigure | None: ...


class CampaignTelemetry:
    def __init__(
        self,
        store: FactsStore | None = None,
        campaign_id: int | None = None,
        *,
        fsync_test: bool | None = None,
        host: Host = LOCAL_HOST,
        pgbench_cpus: str | None = None,
        watch_pgbench: bool = True,
        pgbench_numa: str | None = None,
    ) -> None:
        self.store = store
        self.campaign_id = campaign_id
        self.host = host  # where pgbench runs; a managed server's samplers run on its own
        self.pgbench_cpus = pgbench_cpus  # the CPU list pgbench is pinned to
        self.pgbench_numa = pgbench_numa  # its NUMA policy ("membind=0")
        # False: a run's pgbench is several processes on several load generator hosts, each
        # watched by its own figures (`campaign.generators`), not by the run's samplers
        self.watch_pgbench = watch_pgbench
        if fsync_test is None:
            fsync_test = os.environ.get(FSYNC_TEST_ENV, "on") != "off"
        self.fsync_test = fsync_test
        self.facts: dict[str, ServerTelemetryFacts] = {}
        self.fsync_by_device: dict[str, FsyncFigure | None] = {}
        self.extension_checked: set[tuple[str, str]] = set()
        self.symbols: dict[str, str] = {}  # per host and binary: what it lacks for profiles

    def capture(
        self,
        server: Server,
        endpoint: Endpoint,
        threads: int | None,
        on_phase: Callable[[str], None] | None = None,
        on_sample: Callable[[Sequence[Point]], None] | None = None,
    ) -> Capture:
        """A capture for the next measured run on server (not started yet), handing each
        second's figures to on_sample. The first time a server is seen its facts are recorded
        (and pg_test_fsync runs: call this before the run's hygiene, not between the warmup
        and the run)."""
        external_host = server.host if isinstance(server, ExternalServer) else None
        place = None if external_host is None else locate(endpoint, external_host)
        self._prepare(server, endpoint, on_phase or (lambda text: None), place)
        if external_host is not None and place is not None:
            return self._external_capture(
                external_host, place, server.name, endpoint, threads, on_sample
            )
        if not isinstance(server, ManagedServer):
            return Capture(
                CaptureConfig(
                    endpoint,
                    pgbench_threads=threads,
                    host_cpus=self.host.cpu_count(),
                    **self._pgbench_watched(),
                    on_sample=on_sample,
                )
            )
        return Capture(
            CaptureConfig(
                endpoint,
                log=ServerLog(server.log_path),
                postmaster_pid=postmaster_pid(server.data_dir, server.host),
                disk_device=self._block_device(server.name),
                pgbench_threads=threads,
                host_cpus=server.host.cpu_count(),
                host=server.host,
                server_cpus=server.cpus,
                server_numa=None if server.numa is None else server.numa.text,
                **self._pgbench_watched(),
                on_sample=on_sample,
                own_cgroup=True,
            )
        )

    def _pgbench_watched(self) -> dict[str, Any]:
        """Where a capture watches pgbench's process (its pid is this host's), if at all, and
        where the plan placed it."""
        return {
            "pgbench_host": self.host,
            "watch_pgbench": self.watch_pgbench,
            "pgbench_cpus": self.pgbench_cpus,
            "pgbench_numa": self.pgbench_numa,
        }

    def _external_capture(
        self,
        host: Host,
        place: ExternalPlace,
        name: str,
        endpoint: Endpoint,
        threads: int | None,
        on_sample: Callable[[Sequence[Point]], None] | None,
    ) -> Capture:
        """The managed path's capture for an external server on a host the plan names: its
        /proc and its log there, as far as they can be had (`telemetry.external`)."""
        return Capture(
            CaptureConfig(
                endpoint,
                log=place.log,
                postmaster_pid=place.postmaster_pid,
                disk_device=self._block_device(name),
                pgbench_threads=threads,
                host_cpus=host.cpu_count(),
                host=host,
                **self._pgbench_watched(),
                log_problem=place.log_problem,
                processes_problem=place.postmaster_problem,
                on_sample=on_sample,
            )
        )

    def profiler(
        self, server: Server, label: str, work_dir: Path, pgbench: Installation | None = None
    ) -> RunProfiler | None:
        """perf beside the next measured run on a managed server, and beside pgbench when its
        installation is given (None: an external server's processes are not ours to profile,
        or it has no postmaster now)."""
        if not isinstance(server, ManagedServer):
            return None
        pid = postmaster_pid(server.data_dir, server.host)
        if pid is None:
            return None
        binary = server.install.binary("postgres")
        symbols = self._symbols(server.install, binary, server.host)
        target = f"server {server.name} ({binary}): postmaster {pid} and its processes; {label}"
        profiler = Profiler(pid, work_dir, label=target, symbols=symbols, host=server.host)
        if pgbench is None:
            return RunProfiler(profiler)
        client = pgbench.binary("pgbench")
        client_symbols = self._symbols(pgbench, client, self.host)
        return RunProfiler(profiler, PgbenchTarget(client, self.host, client_symbols, label))

    def _symbols(self, install: Installation, binary: Path, host: Host) -> str:
        """What the binary lacks for profiles (once per binary and host)."""
        key = f"{host.name}:{binary}"
        if key not in self.symbols:
            here = host is LOCAL_HOST
            provenance = builds.provenance_of(install) if here else None
            self.symbols[key] = symbols_note(binary, provenance, host)
        return self.symbols[key]

    def evidence(self, server: str) -> Evidence:
        """What a run's diagnosis reads besides the run (`diagnosing.diagnose_run`): the
        server's measured sync rates and the load generator host the samplers watched."""
        facts = self.facts.get(server)
        fsync = facts.fsync.ops_per_s if facts and facts.fsync else {}
        return Evidence(fsync, self._generator_name())

    def _generator_name(self) -> str | None:
        """The load generator host whose pgbench the run's samplers watched (None: this
        machine's, or several generators' each judged on its own)."""
        if not self.watch_pgbench or self.host is LOCAL_HOST:
            return None
        return self.host.name

    # -- once per server -----------------------------------------------------------------------

    def _prepare(
        self,
        server: Server,
        endpoint: Endpoint,
        on_phase: Callable[[str], None],
        place: ExternalPlace | None = None,
    ) -> None:
        if isinstance(server, ManagedServer):
            self._statements_extension(server, endpoint)
        if server.name in self.facts:
            return
        storage = fsync = None
        if isinstance(server, ManagedServer):
            storage = _storage(server.data_dir, server.host)
            if storage is not None:
                fsync = self._fsync(server, str(storage["device"]), on_phase)
        elif isinstance(server, ExternalServer) and server.host and place and place.data_dir:
            storage = _storage(place.data_dir, server.host)
        facts = ServerTelemetryFacts(server.name, storage, read_pg_config(endpoint, server), fsync)
        self.facts[server.name] = facts
        if self.store is not None and self.campaign_id is not None:
            self.store.record_server_facts(self.campaign_id, facts)

    def _block_device(self, name: str) -> str | None:
        facts = self.facts.get(name)
        if facts is None or not facts.storage or not facts.storage.get("block_device"):
            return None
        return str(facts.storage["device"])

    def _fsync(
        self, server: ManagedServer, device: str, on_phase: Callable[[str], None]
    ) -> FsyncFigure | None:
        if not self.fsync_test:
            return None
        if device not in self.fsync_by_device:
            stored = self._stored_fsync(device)
            if stored is None:
                on_phase("pg_test_fsync")
                binary = server.install.binary("pg_test_fsync")
                account, host = server.account, server.host
                parent = server.data_dir.parent
                stored = run_pg_test_fsync(binary, account, parent, device, host)
                if stored is None:  # the parent may not be the account's: try the data dir
                    stored = run_pg_test_fsync(binary, account, server.data_dir, device, host)
            self.fsync_by_device[device] = stored
        return self.fsync_by_device[device]

    def _stored_fsync(self, device: str) -> FsyncFigure | None:
        """A figure this campaign already measured on device (a resumed campaign)."""
        if self.store is None or self.campaign_id is None:
            return None
        return self.store.fsync_figure(self.campaign_id, device)

    def _statements_extension(self, server: ManagedServer, endpoint: Endpoint) -> None:
        """Create pg_stat_statements in the benchmark database when the plan loads it."""
        key = (server.name, endpoint.dbname)
        libraries = server.settings.get("shared_preload_libraries", "")
        if key in self.extension_checked or "pg_stat_statements" not in libraries:
            return
        self.extension_checked.add(key)
        try:
            with endpoint.connect() as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        except psycopg.Error:
            pass  # the capture then records the source as absent, with its reason


def _storage(data_dir: PurePath, host: Host) -> dict[str, Any] | None:
    try:
        return storage_facts(data_dir, host)
    except OSError:
        return None  # recorded as unknown; the run goes on
