"""Execute a campaign: every run spec end to end, each result stored as soon as it finishes.

Per run: the server (with the run's setting variant), the dataset, hygiene (vacuum as asked,
CHECKPOINT), the warmup, the measured pgbench, then the result assembled from what it left
and stored. A failure in one run is recorded with its reason and the campaign goes on; an
interruption ends it with the runs before kept.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgbenchlab import installs
from pgbenchlab.campaign import rounds
from pgbenchlab.campaign.assemble import INTERRUPTED_TEXT, failure
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.campaign.equipment import prepared
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import (
    Capturing,
    Executor,
    Profiling,
)
from pgbenchlab.campaign.fleet import run_origin
from pgbenchlab.campaign.generators import name_saturated
from pgbenchlab.campaign.hosts import run_hosts
from pgbenchlab.campaign.layout import (
    RESULTS_DB,
    artifact_dir,
    place_authority,
)
from pgbenchlab.campaign.measure import (
    Around,
    Pgbench,
    RunAborted,
    finished_run,
    measured_invocation,
    sampling_rate,
)
from pgbenchlab.campaign.resume import open_campaign
from pgbenchlab.campaign.servers import ServerPool
from pgbenchlab.campaign.together import measure_group
from pgbenchlab.errors import PgbenchParseError, StoreError, UserError
from pgbenchlab.findings import RunWarning
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.plan import AutoRepeats, Plan, RunSpec
from pgbenchlab.profiles import RunProfiles
from pgbenchlab.results import CampaignStatus, RunResult, RunStatus
from pgbenchlab.server import Endpoint, Server
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


def run_campaign(
    plan: Plan,
    results_dir: Path,
    reporter: Reporter,
    *,
    fresh: bool = False,
    built: list[installs.Installation] | None = None,
    budget_s: float | None = None,
) -> Outcome:
    """Run the plan's campaign (checked before anything starts). The plan's builds are made
    first unless the caller made them (built)."""
    results_dir = results_dir.resolve()
    with prepared(plan, results_dir, built, reporter) as (pgbench, servers, executor, tunables):
        return conduct(
            plan, results_dir, reporter, pgbench, servers, executor, fresh=fresh,
            budget_s=budget_s, tunables=tunables,
        )  # fmt: skip


def conduct(
    plan: Plan,
    results_dir: Path,
    reporter: Reporter,
    pgbench: PgbenchClient,
    servers: ServerPool,
    executor: Executor,
    *,
    fresh: bool = False,
    budget_s: float | None = None,
    tunables: KernelTunables | None = None,
) -> Outcome:
    """Run the runs of the plan not yet complete in results_dir, with these servers, this
    pgbench and this executor; every server is stopped and released, and the kernel tunables
    put back, at the end. With repeats = "auto", rounds follow while answers are open, within
    ``budget_s`` seconds."""
    started = time.monotonic()

    def run_todo(campaign: Campaign, outcome: Outcome, done: set[str]) -> None:
        todo = [s for s in plan.specs if s.run_key not in done]
        reporter.campaign_started(plan, todo, len(done))
        campaign.run(todo, outcome)
        if plan.auto is not None:
            campaign.add_rounds(plan.auto, outcome, rounds.Budget(started, budget_s))

    return drive(
        plan, results_dir, reporter, pgbench, servers, executor, run_todo, fresh=fresh,
        tunables=tunables,
    )  # fmt: skip


Body = Callable[["Campaign", Outcome, set[str]], None]


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
    """Open (or continue) the plan's campaign and let body run its runs (given the run keys
    already complete); an interruption ends body, every server is stopped and released, and
    the kernel tunables put back."""
    store = Store(results_dir / RESULTS_DB)
    try:
        store.acquire()
        servers.claim()
        campaign_id, done = open_campaign(store, plan, pgbench, fresh=fresh)
        outcome = Outcome(campaign_id, results_dir, skipped_done=len(done))
        tunables = tunables or KernelTunables(())
        campaign = Campaign(
            plan, store, campaign_id, results_dir, servers, pgbench, executor, reporter, tunables
        )
        with StopSignals() as signals:
            try:
                body(campaign, outcome, done)
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
            store.finish_campaign(campaign_id, ended)
        return outcome
    finally:
        servers.release()
        store.close()


class Campaign:
    """The per-run sequence: server → dataset → hygiene → warmup → measure → assemble → store."""

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
        self.recorded_variants: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    @property
    def version(self) -> str:
        return self.pgbench.client.version_text

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
            result = replace(self.run_one(spec), sysctl=self.applied)
            hosts = run_hosts(self.plan, spec)
            run_id = self.store.record_run(self.campaign_id, result, hosts, run_origin(self.plan))
            self.reporter.run_finished(spec, result)
        outcome.results.append(result)
        outcome.ran += 1
        outcome.failed += result.status in (RunStatus.FAILED, RunStatus.ABORTED)
        if result.status == RunStatus.INTERRUPTED:
            raise KeyboardInterrupt
        return run_id, result

    def add_rounds(self, auto: AutoRepeats, outcome: Outcome, budget: rounds.Budget) -> None:
        """Rounds beyond the minimum for the cells whose answer is open, until every answer
        is decided, the maximum is reached or the next round would overrun the budget."""
        first = [s for s in self.plan.specs if s.repeat == 1]
        asked = rounds.questions(first, self.plan.server_names)
        why = f"max_repeats ({auto.max_repeats}) reached"
        for round_ in range(auto.min_repeats + 1, auto.max_repeats + 1):
            values = self.store.run_values(self.campaign_id)
            tps = rounds.tps_by_cell(values)
            cells = rounds.open_cells(rounds.answer(q, tps, auto, round_) for q in asked)
            if not cells:
                why = "every answer decided"
                break
            done = self.store.done_run_keys(self.campaign_id)
            todo = [s for s in rounds.round_specs(first, round_, cells) if s.run_key not in done]
            per_run = rounds.seconds_per_run(values)
            if not budget.affords(len(todo), per_run):
                why = f"the budget allows no round of {len(todo)} run(s) more"
                break
            if todo:
                self.reporter.note(f"round {round_}: {len(todo)} run(s) for the open answers")
            self.run(todo, outcome)
        tps = rounds.tps_by_cell(self.store.run_values(self.campaign_id))
        final = [rounds.answer(q, tps, auto, math.inf) for q in asked]
        if all(a.decided for a in final):
            why = "every answer decided"
        outcome.answers = rounds.summary(final, why)
        for line in outcome.answers:
            self.reporter.note(line)

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
        server: Server | None = None
        self.applied = ()
        try:
            self.applied = tuple(self.tunables.apply(spec.sysctl).items())
            if self.plan.is_group(spec.server):  # several servers at once
                return measure_group(self, spec, artifacts, started)
            server = self.prepare_server(spec)
            endpoint = self.prepare_dataset(server, spec)
            result = self.measure(spec, server, endpoint, artifacts, started)
            if result.status in (RunStatus.FAILED, RunStatus.ABORTED) and result.error is not None:
                result = replace(result, error=self.describe(result.error, server))
            return result
        except StoreError:
            raise  # the results, not the run, failed: the campaign stops
        except KeyboardInterrupt:
            return self.failure(spec, started, RunStatus.INTERRUPTED, INTERRUPTED_TEXT)
        except RunAborted as exc:
            return self.failure(spec, started, RunStatus.ABORTED, self.describe(exc, server))
        except (UserError, PgbenchParseError, OSError, RuntimeError) as exc:
            return self.failure(spec, started, RunStatus.FAILED, self.describe(exc, server))
        except Exception as exc:  # a run's failure must never lose the campaign's other runs
            detail = "".join(traceback.format_exception_only(exc)).strip()
            return self.failure(spec, started, RunStatus.FAILED, self.describe(detail, server))

    def failure(self, spec: RunSpec, started: float, status: RunStatus, error: str) -> RunResult:
        return failure(
            spec, self.version, status, error, started_at=started, finished_at=time.time()
        )

    def describe(self, error: object, server: Server | None) -> str:
        """The error, with the server's log when it went down (and restarted for the next), or
        why its host could not be reached."""
        text, down = str(error), ""
        if server is None or not server.managed:
            return text
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

    def prepare_server(self, spec: RunSpec) -> Server:
        self.reporter.phase(spec, "server")
        server, _ = self.servers.get(spec)
        key = (server.name, spec.variant)
        if key not in self.recorded_variants:
            described = self.plan.server(spec.server).description
            self.store.record_server(
                self.campaign_id, server.facts(), dict(spec.variant), described
            )
            self.recorded_variants.add(key)
        return server

    def prepare_dataset(self, server: Server, spec: RunSpec) -> Endpoint:
        reinit = spec.options.reinit
        key = (server.name, spec.scale)
        force = reinit == "per-run" or (reinit == "per-scale" and key not in self.initialised)
        self.reporter.phase(spec, "dataset")
        prepared = self.executor.prepare_dataset(
            server,
            spec.scale,
            pgbench=self.pgbench.client.binary,
            work_dir=self.results_dir,
            force=force,
        )
        if key not in self.initialised or prepared.init_seconds is not None:
            self.store.record_dataset(
                self.campaign_id,
                server.name,
                spec.scale,
                prepared.endpoint.dbname,
                prepared.init_seconds,
            )
        self.initialised.add(key)
        return prepared.endpoint

    def hygiene(self, spec: RunSpec, endpoint: Endpoint) -> tuple[RunWarning, ...]:
        self.reporter.phase(spec, "vacuum")
        self.executor.vacuum(endpoint, spec.options.vacuum)
        if not spec.options.checkpoint:
            return ()
        self.reporter.phase(spec, "checkpoint")
        refused = self.executor.checkpoint(endpoint)
        return (refused,) if refused else ()

    def measure(
        self, spec: RunSpec, server: Server, endpoint: Endpoint, artifacts: Path, started: float
    ) -> RunResult:
        """Hygiene, warmup and the measured run, with telemetry and (when the run is profiled)
        perf from before the hygiene, so it follows the measured run's backends from their
        fork."""

        def phase(text: str) -> None:
            self.reporter.phase(spec, text)

        capture = self.telemetry.capture(server, endpoint, spec.pgbench_threads, phase)
        profiler: Profiling | None = None
        if spec.profiled:
            pgbench = self.pgbench.client.install if self.plan.pgbench_profile else None
            profiler = self.telemetry.profiler(server, spec.label, artifacts, pgbench)
        if profiler is None:
            return self.measured(spec, server, endpoint, artifacts, started, capture, None)
        profiler.start()
        try:
            return self.measured(spec, server, endpoint, artifacts, started, capture, profiler)
        finally:
            profiler.close()

    def measured(
        self,
        spec: RunSpec,
        server: Server,
        endpoint: Endpoint,
        artifacts: Path,
        started: float,
        capture: Capturing,
        profiler: Profiling | None,
    ) -> RunResult:
        def phase(text: str) -> None:
            self.reporter.phase(spec, text)

        def progress(line: ProgressLine) -> None:
            self.reporter.progress(spec, line)

        def pgbench_started(pid: int) -> None:
            if profiler is not None:  # first: it may hold pgbench still while perf attaches
                profiler.pgbench_started(pid)
            capture.pgbench_started(pid)

        hygiene = self.hygiene(spec, endpoint)
        # pgbench alone connects the run's way; the samplers and hygiene keep the admin one.
        client = server.client_endpoint(spec.options.connection).with_dbname(endpoint.dbname)
        client = place_authority(client, artifacts)
        warmup_tps = self.pgbench.warmup(spec, client, artifacts, progress, phase)
        sampling = sampling_rate(spec, warmup_tps)
        phase("measuring")
        run = measured_invocation(spec, artifacts, sampling)
        capture.start()
        done = None
        profiles = RunProfiles()
        try:
            done = self.pgbench.run(client, run, artifacts, progress, pgbench_started)
        finally:
            if profiler is not None:
                profiler.measured()
            telemetry = capture.stop(done.cpu_s if done else None)
        if profiler is not None and not done.interrupted:
            phase("profile")
            profiles = profiler.stop()
        around = Around(started, warmup_tps, sampling, hygiene)
        result = finished_run(
            self.pgbench, spec, done, artifacts, around, telemetry=telemetry,
            version=self.version, results_dir=self.results_dir, phase=phase,
        )  # fmt: skip
        if done.interrupted:
            return result
        result = replace(result, profile=profiles.server, pgbench_profile=profiles.pgbench)
        found = self.telemetry.diagnose(spec.server, result)
        return replace(result, diagnosis=name_saturated(found, result))
