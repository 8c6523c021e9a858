"""A campaign's session: opened once per campaign, it holds what every run goes through — the
results store and the campaign's row in it, the server pool, the campaign's pgbench and
executor, its telemetry, the kernel tunables and the stop signals — and runs one spec at a time
by the one measured-run sequence (`measured_run`), a single server's run and a group's alike.

Per run: the kernel tunables of its cell, its servers with their setting variant and their
datasets (reused, made again, or restored from their snapshot: `[dataset] reset`), then
`measured_run`; the result stored at once. A failure in one run is recorded
with its reason and the campaign goes on; an interruption ends it with the runs before kept.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgbenchlab.campaign import setup
from pgbenchlab.campaign.assemble import INTERRUPTED_TEXT, Hygiene, failure
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import Executor
from pgbenchlab.campaign.fleet import run_origin
from pgbenchlab.campaign.floors import between_rounds
from pgbenchlab.campaign.hosts import run_hosts
from pgbenchlab.campaign.layout import RESULTS_DB, artifact_dir, place_authority
from pgbenchlab.campaign.measure import Pgbench, RunAborted
from pgbenchlab.campaign.measured_run import Member, measured_run
from pgbenchlab.campaign.resume import open_campaign
from pgbenchlab.campaign.servers import ServerPool
from pgbenchlab.errors import PgbenchParseError, StoreError, UserError
from pgbenchlab.plan import INIT, SNAPSHOT, Plan, RunSpec
from pgbenchlab.results import CampaignStatus, RunResult, RunStatus
from pgbenchlab.server import Endpoint, ManagedServer, Server, snapshot
from pgbenchlab.stopsignals import StopSignals
from pgbenchlab.store import Store
from pgbenchlab.telemetry.campaign import fsync_test_wanted
from pgbenchlab.tunables import KernelTunables


@dataclass
class Outcome:
    campaign_id: int
    results_dir: Path
    ran: int = 0
    skipped_done: int = 0
    failed: int = 0  # runs that did not complete (failed or aborted): exit code 1
    interrupted: bool = False
    results: list[RunResult] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # repeats = "auto": how it ended


Body = Callable[["Session", Outcome, set[str]], None]


def drive(
    plan: Plan,
    results_dir: Path,
    reporter: Reporter,
    pgbench: PgbenchClient,
    servers: ServerPool,
    executor: Executor,
    body: Body,
    *,
    fresh: bool = False,
    tunables: KernelTunables | None = None,
) -> Outcome:
    """Open (or continue) the plan's campaign as a session and let body run its runs (given the
    run keys already complete); an interruption ends body, every server is stopped and
    released, and the kernel tunables put back."""
    store = Store(results_dir / RESULTS_DB)
    try:
        store.acquire()
        servers.claim()
        campaign_id, done = open_campaign(store, plan, pgbench, fresh=fresh, note=reporter.note)
        outcome = Outcome(campaign_id, results_dir, skipped_done=len(done))
        tunables = tunables or KernelTunables(())
        session = Session(
            plan, store, campaign_id, results_dir, servers, pgbench, executor, reporter, tunables
        )
        with StopSignals() as signals:
            try:
                body(session, outcome, done)
            except KeyboardInterrupt:
                pass
            finally:
                signals.shield = True
                try:
                    for problem in servers.stop_all():
                        reporter.note(problem)
                finally:
                    tunables.restore()
            outcome.interrupted = signals.received
            ended = CampaignStatus.INTERRUPTED if signals.received else CampaignStatus.FINISHED
            store.finish_campaign(campaign_id, ended, str(plan.shard or "1/1"))
        return outcome
    finally:
        servers.release()
        store.close()


class Session:
    """One campaign's runs, each by the same sequence: tunables → servers → datasets →
    `measured_run` → stored."""

    def __init__(
        self,
        plan: Plan,
        store: Store,
        campaign_id: int,
        results_dir: Path,
        servers: ServerPool,
        client: PgbenchClient,
        executor: Executor,
        reporter: Reporter,
        tunables: KernelTunables,
    ) -> None:
        self.plan = plan
        self.tunables = tunables
        self.applied: tuple[tuple[str, str], ...] = ()  # the current run's tunables
        self.resets: list[str] = []  # how the current run's datasets started, per server
        self.store = store
        self.campaign_id = campaign_id
        self.results_dir = results_dir
        self.servers = servers
        self.pgbench = Pgbench(client, executor)
        self.executor = executor
        self.reporter = reporter
        fsync_test = fsync_test_wanted(plan.estimated_seconds())
        self.telemetry = executor.telemetry(store, campaign_id, fsync_test=fsync_test)
        self.initialised: set[tuple[str, int]] = set()
        self.unprepared: set[str] = set()  # started since, their one-off preparation to run
        self.recorded_variants: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        self.round: int | None = None  # the round of the last run (restart = "each-round")

    @property
    def version(self) -> str:
        return self.pgbench.client.version_text

    @property
    def reset(self) -> str | None:
        """How the current run's datasets started (a group's members' when they differ)."""
        return ", ".join(dict.fromkeys(self.resets)) or None

    def run(self, todo: list[RunSpec], outcome: Outcome) -> None:
        for index, spec in enumerate(todo, start=1):
            self.run_stored(spec, index, len(todo), outcome)

    def run_stored(
        self, spec: RunSpec, index: int, total: int, outcome: Outcome
    ) -> tuple[int, RunResult]:
        """Run one spec and store its result: its run id and result (an interrupted run is
        stored, then the interruption goes on)."""
        with self.stopped_by_results_faults():
            self.reporter.run_started(spec, index, total)
            result = replace(self.run_one(spec), sysctl=self.applied, reset=self.reset)
            hosts = run_hosts(self.plan, spec)
            run_id = self.store.record_run(self.campaign_id, result, hosts, run_origin(self.plan))
            self.reporter.run_finished(spec, result)
        outcome.results.append(result)
        outcome.ran += 1
        outcome.failed += result.status in (RunStatus.FAILED, RunStatus.ABORTED)
        if result.status == RunStatus.INTERRUPTED:
            raise KeyboardInterrupt
        return run_id, result

    @contextmanager
    def stopped_by_results_faults(self) -> Iterator[None]:
        """The results can no longer be written (disk full, database locked or damaged): the
        campaign stops, marked stopped if the database still takes it; committed runs stay."""
        try:
            yield
        except StoreError:
            self.store.mark_stopped(self.campaign_id)
            raise

    def run_one(self, spec: RunSpec) -> RunResult:
        started = time.time()
        artifacts = artifact_dir(self.results_dir, self.plan.name, self.campaign_id, spec)
        servers: list[Server] = []  # each as soon as it is started: a failure names its log
        self.applied = ()
        self.resets = []
        try:
            if self.plan.restart != "never" and spec.repeat != self.round:
                between_rounds(self.servers, self.reporter, spec.repeat)
            self.round = spec.repeat
            self.applied = tuple(self.tunables.apply(spec.sysctl).items())
            grouped = self.plan.is_group(spec.server)
            members = [
                self.member(spec, name, artifacts, grouped, servers)
                for name in (self.plan.members(spec.server) if grouped else [spec.server])
            ]
            if grouped:
                self.record_group(spec, servers)
            result = measured_run(self, spec, members, artifacts, started)
            if result.status in (RunStatus.FAILED, RunStatus.ABORTED) and result.error:
                result = replace(result, error=self.describe(result.error, servers))
            return result
        except StoreError:
            raise  # the results, not the run, failed: the campaign stops
        except KeyboardInterrupt:
            return self.failure(spec, started, RunStatus.INTERRUPTED, INTERRUPTED_TEXT)
        except RunAborted as exc:
            return self.failure(spec, started, RunStatus.ABORTED, self.describe(exc, servers))
        except (UserError, PgbenchParseError, OSError, RuntimeError) as exc:
            return self.failure(spec, started, RunStatus.FAILED, self.describe(exc, servers))
        except Exception as exc:  # a run's failure must never lose the campaign's other runs
            detail = "".join(traceback.format_exception_only(exc)).strip()
            return self.failure(spec, started, RunStatus.FAILED, self.describe(detail, servers))

    def failure(self, spec: RunSpec, started: float, status: RunStatus, error: str) -> RunResult:
        return failure(
            spec, self.version, status, error, started_at=started, finished_at=time.time()
        )

    def describe(self, error: object, servers: list[Server]) -> str:
        """The error, with the log of each server of the run that went down (each restarted
        for the next run), or why its host could not be reached."""
        text = str(error)
        for server in servers:
            text = self._down(text, server)
        return text

    def _down(self, text: str, server: Server) -> str:
        if not server.managed:
            return text
        down = ""
        try:
            if server.is_alive():
                return text
            problems = server.log_problems() or server.log_tail(3)
            down = f" [server {server.name} was down; its log: {' | '.join(problems)}]"
            server.restart()
        except UserError as exc:
            return f"{text}{down} [restart failed: {exc}]"
        except OSError as exc:  # its host unreachable (a network lost): nothing known of it
            return f"{text} [{exc}]"
        self.reporter.note(f"restarted server {server.name} after a failed run")
        return text + down

    def member(
        self, spec: RunSpec, name: str, artifacts: Path, grouped: bool, started: list[Server]
    ) -> Member:
        """A server of the run started (its variant, noted in `started` at once) with its
        dataset ready, and the way pgbench connects to it (the run's connection; TLS verified
        against an authority written into the run's artifacts)."""
        own = replace(spec, server=name)
        server = self.prepare_server(own)
        started.append(server)
        endpoint = self.prepare_dataset(server, own)
        if name in self.unprepared:
            self.run_preparation(server, endpoint, own)
        client = server.client_endpoint(spec.options.connection).with_dbname(endpoint.dbname)
        client = place_authority(client, artifacts, name if grouped else "")
        return Member(name, server, endpoint, client)

    def prepare_server(self, spec: RunSpec) -> Server:
        self.reporter.phase(spec, "server")
        server, started = self.servers.get(spec)
        if started and self.plan.server(spec.server).prepare is not None:
            self.unprepared.add(server.name)
        key = (server.name, spec.variant)
        if key not in self.recorded_variants:
            described = self.plan.server(spec.server).description
            self.store.record_server(
                self.campaign_id, server.facts(), dict(spec.variant), described
            )
            if isinstance(server, ManagedServer) and server.pooler is not None:
                self.store.record_pooler(self.campaign_id, server.pooler.facts())
            setup.record_cluster(self.store, self.campaign_id, self.plan, server)
            self.recorded_variants.add(key)
        return server

    def run_preparation(self, server: Server, endpoint: Endpoint, spec: RunSpec) -> None:
        """The server's one-off preparation, once after its start, stored as it finishes."""
        wanted = self.plan.server(server.name).prepare
        assert wanted is not None
        self.reporter.phase(spec, setup.PHASE)
        setup.prepare_and_record(
            self.store,
            self.campaign_id,
            self.pgbench,
            wanted,
            server,
            endpoint,
            spec,
            self.results_dir,
            lambda line: self.reporter.progress(spec, line),
        )
        self.unprepared.discard(server.name)

    def record_group(self, spec: RunSpec, servers: list[Server]) -> None:
        """The group as a server of the campaign (reports show its cells like any server's):
        its members' version and installation (each one's when they differ), no data
        directory."""
        key = (spec.server, spec.variant)
        if key in self.recorded_variants:
            return
        facts = [s.facts() for s in servers]

        def each(values: list[str | None]) -> str | None:
            if len(set(values)) == 1:
                return values[0]
            return ", ".join(f"{f.name}: {v}" for f, v in zip(facts, values, strict=True))

        group = replace(
            facts[0],
            name=spec.server,
            kind="group",
            version=each([f.version for f in facts]) or "",
            install=each([f.install for f in facts]),
            data_dir=None,
        )
        self.store.record_server(self.campaign_id, group, dict(spec.variant))
        self.recorded_variants.add(key)

    def prepare_dataset(self, server: Server, spec: RunSpec) -> Endpoint:
        """The run's dataset ready on server, as the run's reset asks (noted for the run's
        record): reused, made again by pgbench -i, or its cluster restored from the image
        taken once its datasets were built (taken again when the run's dataset was made)."""
        reset = self.plan.reset_of(spec)
        key = (server.name, spec.scale)
        first = spec.options.reinit == "per-scale" and key not in self.initialised
        imaged = server if reset == SNAPSHOT and isinstance(server, ManagedServer) else None
        self.reporter.phase(spec, "dataset")
        image = None if imaged is None else snapshot.stored_image(imaged)
        if imaged is not None and image is not None:
            self.reporter.phase(spec, "dataset: restoring its snapshot")
            reset = f"{SNAPSHOT} ({snapshot.restore(imaged, image)})"
        prepared = self.executor.prepare_dataset(
            server,
            spec.scale,
            pgbench=self.pgbench.client.binary,
            work_dir=self.results_dir,
            force=reset == INIT or first,
            options=self.plan.dataset,
        )
        endpoint = prepared.endpoint
        if imaged is not None and (image is None or prepared.init_seconds is not None):
            self.reporter.phase(spec, "dataset: taking its snapshot")
            reset = f"{SNAPSHOT} ({snapshot.take(imaged).copy})"
            endpoint = imaged.endpoint.with_dbname(endpoint.dbname)  # restarted: a new port
        self.resets.append(reset)
        if key not in self.initialised or prepared.init_seconds is not None:
            self.store.record_dataset(
                self.campaign_id,
                server.name,
                spec.scale,
                prepared.endpoint.dbname,
                prepared.init_seconds,
            )
        self.initialised.add(key)
        return endpoint

    def hygiene(self, spec: RunSpec, endpoint: Endpoint) -> Hygiene:
        """The run's VACUUM and CHECKPOINT (as the cell asks), each timed."""
        self.reporter.phase(spec, "vacuum")
        started = time.monotonic()
        self.executor.vacuum(endpoint, spec.options.vacuum)
        vacuum_s = None if spec.options.vacuum == "none" else time.monotonic() - started
        if not spec.options.checkpoint:
            return Hygiene((), vacuum_s)
        self.reporter.phase(spec, "checkpoint")
        started = time.monotonic()
        refused = self.executor.checkpoint(endpoint)
        return Hygiene((refused,) if refused else (), vacuum_s, time.monotonic() - started)
