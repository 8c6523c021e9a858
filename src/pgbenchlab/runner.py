"""Execute a campaign: every run spec end to end, each result stored as soon as it finishes.

Per run: the server (with the run's setting variant), the dataset, hygiene (vacuum as asked,
CHECKPOINT), the warmup (same workload, not counted; its TPS sets the log sampling rate), the
measured pgbench with ``-P 1`` and a per-transaction log, then parsing and storing. A failure
in one run is recorded with its reason and the campaign goes on.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import shutil
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import zstandard

from pgbenchlab import __version__, dataset, files, installs, osuser
from pgbenchlab import server as server_module
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES
from pgbenchlab.claims import Claim
from pgbenchlab.errors import PgbenchParseError, PlanError, ServerError, StoreError, UserError
from pgbenchlab.installs import Installation
from pgbenchlab.pgbench import command
from pgbenchlab.pgbench.logs import TransactionLogSummary, analyse_transaction_logs
from pgbenchlab.pgbench.progress import (
    ProgressLine,
    error_summary,
    parse_progress_line,
    parse_stderr,
)
from pgbenchlab.pgbench.report import PgbenchReport, parse_report
from pgbenchlab.pgbench.version import PgVersion, parse_version
from pgbenchlab.plan import Plan, RunSpec, ServerPlan
from pgbenchlab.redaction import redact_setting
from pgbenchlab.results import ABORTED, FAILED, INTERRUPTED, OK, LatencySummary, RunResult, Second
from pgbenchlab.server import Endpoint, ExternalServer, ManagedServer, Server
from pgbenchlab.store import Store
from pgbenchlab.store.faults import results_writes
from pgbenchlab.telemetry import machine_facts
from pgbenchlab.telemetry.campaign import CampaignTelemetry, fsync_test_wanted
from pgbenchlab.telemetry.crosscheck import check_commits

# Per-transaction log lines per second that keep the observer effect well under 1 %
# (a full log costs ≈ 0.7 µs of client CPU per line; see bench/observer_effect.md).
LOG_LINES_PER_SECOND = 5_000
RETRIES_SINCE = (15,)  # pgbench --max-tries
RESULTS_DB = "results.db"


class Reporter(Protocol):
    """Progress events for a display; the runner never prints."""

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None: ...

    def run_started(self, spec: RunSpec, index: int, total: int) -> None: ...

    def phase(self, spec: RunSpec, text: str) -> None: ...

    def progress(self, spec: RunSpec, line: ProgressLine) -> None: ...

    def run_finished(self, spec: RunSpec, result: RunResult) -> None: ...

    def note(self, text: str) -> None: ...


class NullReporter:
    """A reporter that shows nothing: for scripts and benchmarks using the library."""

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None:
        pass

    def run_started(self, spec: RunSpec, index: int, total: int) -> None:
        pass

    def phase(self, spec: RunSpec, text: str) -> None:
        pass

    def progress(self, spec: RunSpec, line: ProgressLine) -> None:
        pass

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class Outcome:
    campaign_id: int
    results_dir: Path
    ran: int = 0
    skipped_done: int = 0
    failed: int = 0  # runs that did not complete (failed or aborted): exit code 1
    interrupted: bool = False
    results: list[RunResult] = field(default_factory=list)


class RunAborted(Exception):
    """pgbench's clients stopped early in a phase before the measured run (the warmup)."""


@dataclass(frozen=True)
class PgbenchClient:
    install: Installation
    version: PgVersion
    version_text: str

    @property
    def binary(self) -> Path:
        return self.install.binary("pgbench")


def choose_pgbench(plan: Plan, found: list[Installation]) -> PgbenchClient:
    if plan.pgbench_install == "newest":
        install = installs.newest_pgbench(found)
    else:
        install = installs.resolve(plan.pgbench_install, found, need_server=False)
    text = command.version_of(install.binary("pgbench"))
    version = parse_version(text)
    require_client_features(plan, version, text)
    return PgbenchClient(install, version, text)


def require_client_features(plan: Plan, version: PgVersion, version_text: str) -> None:
    """Refuse, before anything starts, options the campaign's pgbench does not have."""
    if version.major < RETRIES_SINCE and any(s.options.max_tries != 1 for s in plan.specs):
        raise PlanError(
            f"{plan.path}: max_tries needs pgbench 15 or later; this campaign's pgbench is "
            f"{version_text.strip()}: remove max_tries or choose a newer [pgbench] install"
        )


def cluster_root(results_dir: Path, account: osuser.OsAccount) -> Path:
    """Where managed clusters live: beside the results, or (as root) where the account reaches."""
    if not account.is_switch:
        return results_dir / "clusters"
    key = hashlib.sha256(str(results_dir.resolve()).encode()).hexdigest()[:10]
    root = osuser.ROOT_STATE_DIR / "clusters" / key
    osuser.ROOT_STATE_DIR.mkdir(mode=0o755, exist_ok=True)
    account.make_dir(osuser.ROOT_STATE_DIR / "clusters", 0o755)
    account.make_dir(root)
    return root


def remove_clusters(results_dir: Path) -> list[Path]:
    """Stop and delete the managed clusters a results directory's campaigns created: under its
    cluster root, and in the explicit data directories its servers table records (their
    contents only, as the directory may be a mount point). Holds the campaign lock, so a
    running campaign's clusters are never touched; a data directory another campaign claims
    now is left alone."""
    results_dir = results_dir.resolve()
    account = osuser.server_account()
    root = cluster_root(results_dir, account)
    db = results_dir / RESULTS_DB
    store = Store(db) if db.exists() else None
    try:
        explicit = []
        if store is not None:
            store.acquire()
            explicit = [d for d in store.recorded_data_dirs() if not d.is_relative_to(root)]
        data_dirs = sorted(p.parent for p in root.glob(f"*/*/data/{server_module.MARKER}"))
        removed = [d for d in explicit if _remove_explicit_cluster(d)]
        for data_dir in data_dirs:
            server_module.stop_leftover(data_dir)
        shutil.rmtree(root, ignore_errors=True)
        return data_dirs + removed
    finally:
        if store is not None:
            store.close()


def _remove_explicit_cluster(data_dir: Path) -> bool:
    if not (data_dir / server_module.MARKER).is_file():
        return False
    try:
        claim = Claim(data_dir, "pgbenchlab clean")
    except ServerError:
        return False  # another campaign uses it now
    try:
        server_module.stop_leftover(data_dir)
        server_module.remove_cluster_files(data_dir)
        claim.set_state("")
    finally:
        claim.release()
    return True


class Servers:
    """The campaign's servers, started on first use, restarted for another setting variant."""

    def __init__(self, plan: Plan, results_dir: Path, found: list[Installation]) -> None:
        self.plan = plan
        self.results_dir = results_dir
        self.found = found
        self.account = osuser.server_account() if any(s.managed for s in plan.servers) else None
        self.live: dict[str, Server] = {}
        self.variants: dict[str, tuple[tuple[str, str], ...]] = {}
        self.claims: dict[str, Claim] = {}

    def validate(self) -> None:
        """Everything a user can get wrong about servers, checked before anything starts:
        installations, setting names, data directories, external servers' reachability and,
        without init = true, their pgbench tables."""
        self.check_distinct_data_dirs()
        for server in self.plan.servers:
            if server.managed:
                install = installs.resolve(server.install or "embedded", self.found)
                check_settings(server, self.plan, install)
                if server.data_dir:
                    self.check_data_dir(Path(server.data_dir))
            else:
                assert server.dsn is not None
                external = ExternalServer(server.name, server.dsn, init_allowed=server.init)
                external.prepare()
                if not server.init:
                    scales = (s.scale for s in self.plan.specs if s.server == server.name)
                    dataset.require_datasets(external, scales)

    def check_distinct_data_dirs(self) -> None:
        seen: dict[Path, str] = {}
        for server in self.plan.servers:
            if server.managed and server.data_dir:
                path = Path(server.data_dir).resolve()
                if path in seen:
                    raise PlanError(
                        f"servers {seen[path]} and {server.name} both use data_dir {path}: "
                        "give each server a directory of its own",
                        where=self.plan.path,
                    )
                seen[path] = server.name

    def claim(self) -> None:
        """Hold every managed server's data directory for this campaign (see claims.py)."""
        owner = f"campaign {self.plan.name} (results {self.results_dir}, pid {os.getpid()})"
        for server in self.plan.servers:
            if server.managed and server.name not in self.claims:
                self.claims[server.name] = Claim(self.data_dir(server), owner)

    def release(self) -> None:
        for claim in self.claims.values():
            claim.release()
        self.claims.clear()

    def data_dir(self, plan: ServerPlan) -> Path:
        if plan.data_dir:
            return Path(plan.data_dir)
        assert self.account is not None
        root = cluster_root(self.results_dir, self.account)
        return files.inside(root, self.plan.name, plan.name, "data")

    def check_data_dir(self, data_dir: Path) -> None:
        server_module.check_data_dir(data_dir)
        assert self.account is not None
        if not data_dir.exists() and not self.account.can_create(data_dir):
            raise ServerError(
                f"the server account {self.account.name} cannot create this directory: "
                "make its parent writable (and every ancestor traversable) for it, "
                "or choose another data_dir",
                where=str(data_dir),
            )

    def get(self, spec: RunSpec) -> tuple[Server, bool]:
        """The running server for spec, and whether it was (re)started for it."""
        plan = self.plan.server(spec.server)
        server = self.live.get(plan.name)
        if server is None:
            server = self._create(plan)
            self.live[plan.name] = server
            self._configure(server, plan, spec.server_settings)
            server.prepare()
            return server, True
        if isinstance(server, ManagedServer) and (
            self.variants.get(plan.name) != spec.server_settings or not server.is_alive()
        ):
            self._configure(server, plan, spec.server_settings)
            server.restart()
            return server, True
        return server, False

    def _configure(
        self, server: Server, plan: ServerPlan, variant: tuple[tuple[str, str], ...]
    ) -> None:
        if isinstance(server, ManagedServer):
            server.settings = dict(plan.settings) | dict(variant)
        self.variants[plan.name] = variant

    def _create(self, plan: ServerPlan) -> Server:
        if not plan.managed:
            assert plan.dsn is not None
            return ExternalServer(plan.name, plan.dsn, init_allowed=plan.init)
        assert self.account is not None
        install = installs.resolve(plan.install or "embedded", self.found)
        install = osuser.reachable_install(install, self.account)
        data_dir = self.data_dir(plan)
        if not plan.data_dir:
            self.account.make_dir(data_dir.parent.parent, 0o700)
            self.account.make_dir(data_dir.parent, 0o700)
        return ManagedServer(
            plan.name,
            install,
            data_dir,
            self.account,
            dict(plan.settings),
            claim=self.claims.get(plan.name),
        )

    def stop_all(self) -> None:
        for server in self.live.values():
            server.stop()
        self.live.clear()


def check_settings(server: ServerPlan, plan: Plan, install: Installation) -> None:
    """Every combination of settings the server will start with, judged by its own postgres."""
    variants = {
        tuple((dict(server.settings) | dict(spec.server_settings)).items())
        for spec in plan.specs
        if spec.server == server.name
    }
    for variant in sorted(variants):
        problem = server_module.settings_problem(install, dict(variant))
        if problem is not None:
            raise ServerError(problem, where=f"{plan.path}: server {server.name}")


class StopSignals:
    """SIGTERM and SIGINT stop a campaign as Ctrl-C does, once. While the campaign cleans up
    (`shield`), and for any repeated signal, they are only noted: the clean-up always finishes,
    and the campaign still ends as interrupted (exit 130, nothing left running)."""

    STOPS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received = False
        self.shield = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {sig: signal.signal(sig, self._handle) for sig in self.STOPS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, action in self._previous.items():
            signal.signal(sig, action)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = not self.received
        self.received = True
        if first and not self.shield:
            raise KeyboardInterrupt


def run_campaign(
    plan: Plan,
    results_dir: Path,
    reporter: Reporter,
    *,
    fresh: bool = False,
) -> Outcome:
    results_dir = results_dir.resolve()
    found = installs.discover()
    pgbench = choose_pgbench(plan, found)
    servers = Servers(plan, results_dir, found)
    servers.validate()
    store = Store(results_dir / RESULTS_DB)
    try:
        store.acquire()
        servers.claim()
        campaign_id, done = open_campaign(store, plan, pgbench, fresh=fresh)
        outcome = Outcome(campaign_id, results_dir, skipped_done=len(done))
        todo = [s for s in plan.specs if s.run_key not in done]
        with StopSignals() as signals:
            try:
                reporter.campaign_started(plan, todo, len(done))
                Campaign(plan, store, campaign_id, results_dir, servers, pgbench, reporter).run(
                    todo, outcome
                )
            except KeyboardInterrupt:
                pass
            finally:
                signals.shield = True
                servers.stop_all()
            outcome.interrupted = signals.received
            store.finish_campaign(campaign_id, "interrupted" if signals.received else "finished")
        return outcome
    finally:
        servers.release()
        store.close()


def open_campaign(
    store: Store, plan: Plan, pgbench: PgbenchClient, *, fresh: bool
) -> tuple[int, set[str]]:
    """Continue the campaign of the same name (same plan), or start a new one."""
    existing = store.campaign(plan.name)
    redacted = plan.stored_text
    if existing is not None and not fresh:
        if existing["plan_digest"] != plan.digest:
            old_files = json.loads(existing["files_json"] or "{}")
            raise StoreError(
                f'campaign "{plan.name}" in this results database was run with a different plan '
                f"({plan_difference(str(existing['plan_text']), redacted, old_files, plan.files)})"
                "; run with --fresh to start it anew (earlier results are kept) or rename the "
                "campaign",
            )
        store.reopen_campaign(int(existing["id"]))
        return int(existing["id"]), store.done_run_keys(int(existing["id"]))
    versions = {"pgbenchlab": __version__, "pgbench": pgbench.version_text}
    campaign_id = store.start_campaign(
        plan.name,
        plan.path,
        redacted,
        plan.digest,
        versions,
        machine_facts(),
        plan.description,
        plan.files,
        plan.axis_orders,
    )
    return campaign_id, set()


def plan_difference(
    old: str, new: str, old_files: dict[str, str], new_files: dict[str, str]
) -> str:
    """What changed: the plan's lines, or the content of the files it refers to."""
    changed = [
        line[1:].strip()
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
    ]
    edited = sorted(
        name for name in old_files.keys() & new_files.keys() if old_files[name] != new_files[name]
    )
    parts = []
    if changed:
        parts.append(
            f"changed lines: {'; '.join(changed[:4])}" + (" …" if len(changed) > 4 else "")
        )
    if edited:
        parts.append(f"changed file: {', '.join(edited)}")
    return "; ".join(parts) or "the plan was stored by an older pgbenchlab"


class Campaign:
    def __init__(
        self,
        plan: Plan,
        store: Store,
        campaign_id: int,
        results_dir: Path,
        servers: Servers,
        pgbench: PgbenchClient,
        reporter: Reporter,
    ) -> None:
        self.plan = plan
        self.store = store
        self.campaign_id = campaign_id
        self.results_dir = results_dir
        self.servers = servers
        self.pgbench = pgbench
        self.reporter = reporter
        self.initialised: set[tuple[str, int]] = set()
        self.recorded_variants: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        self.telemetry = CampaignTelemetry(
            store, campaign_id, fsync_test=fsync_test_wanted(plan.estimated_seconds())
        )

    def run(self, todo: list[RunSpec], outcome: Outcome) -> None:
        with self.stopped_by_results_faults():
            for index, spec in enumerate(todo, start=1):
                self.reporter.run_started(spec, index, len(todo))
                result = self.run_one(spec)
                self.store.record_run(self.campaign_id, result)
                self.reporter.run_finished(spec, result)
                outcome.results.append(result)
                outcome.ran += 1
                outcome.failed += result.status in (FAILED, ABORTED)
                if result.status == INTERRUPTED:
                    raise KeyboardInterrupt

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
        artifacts = self.artifact_dir(spec)
        server: Server | None = None
        try:
            server = self.prepare_server(spec)
            endpoint = self.prepare_dataset(server, spec)
            result = self.measure(spec, endpoint, artifacts, started)
            if result.status in (FAILED, ABORTED) and result.error is not None:
                result = _with(result, error=self.describe(result.error, server))
            return result
        except StoreError:
            raise  # the results, not the run, failed: the campaign stops
        except KeyboardInterrupt:
            return self.failure(spec, started, INTERRUPTED, "interrupted by the user", ())
        except RunAborted as exc:
            return self.failure(spec, started, ABORTED, self.describe(exc, server), ())
        except (UserError, PgbenchParseError, OSError, RuntimeError) as exc:
            return self.failure(spec, started, FAILED, self.describe(exc, server), ())
        except Exception as exc:  # a run's failure must never lose the campaign's other runs
            detail = "".join(traceback.format_exception_only(exc)).strip()
            return self.failure(spec, started, FAILED, self.describe(detail, server), ())

    def describe(self, error: object, server: Server | None) -> str:
        text = str(error)
        if server is not None and server.managed and not server.is_alive():
            problems = server.log_problems() or server.log_tail(3)
            text += f" [server {server.name} was down; its log: {' | '.join(problems)}]"
            try:
                server.restart()
                self.reporter.note(f"restarted server {server.name} after a failed run")
            except UserError as exc:
                text += f" [restart failed: {exc}]"
        return text

    def failure(
        self, spec: RunSpec, started: float, status: str, error: str, argv: tuple[str, ...]
    ) -> RunResult:
        return RunResult(
            run_key=spec.run_key,
            cell_id=spec.cell_id,
            sequence=spec.sequence,
            repeat=spec.repeat,
            status=status,
            spec=spec.cell,
            argv=argv,
            started_at=started,
            finished_at=time.time(),
            pgbench_version=self.pgbench.version_text,
            error=error,
        )

    def artifact_dir(self, spec: RunSpec) -> Path:
        path = files.inside(
            self.results_dir,
            "artifacts",
            f"{self.plan.name}-{self.campaign_id}",
            f"{spec.sequence:04d}-{spec.run_key}",
        )
        shutil.rmtree(path, ignore_errors=True)  # an interrupted earlier attempt's leftovers
        with results_writes(path):
            path.mkdir(parents=True)
        return path

    def prepare_server(self, spec: RunSpec) -> Server:
        self.reporter.phase(spec, "server")
        server, _ = self.servers.get(spec)
        key = (server.name, spec.server_settings)
        if key not in self.recorded_variants:
            self.store.record_server(self.campaign_id, server.facts(), dict(spec.server_settings))
            self.recorded_variants.add(key)
        return server

    def prepare_dataset(self, server: Server, spec: RunSpec) -> Endpoint:
        reinit = spec.options.reinit
        key = (server.name, spec.scale)
        force = reinit == "per-run" or (reinit == "per-scale" and key not in self.initialised)
        self.reporter.phase(spec, "dataset")
        prepared = dataset.ensure(
            server, spec.scale, pgbench=self.pgbench.binary, work_dir=self.results_dir, force=force
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

    def hygiene(self, spec: RunSpec, endpoint: Endpoint) -> list[str]:
        self.reporter.phase(spec, "vacuum")
        dataset.vacuum(endpoint, spec.options.vacuum)
        if not spec.options.checkpoint:
            return []
        self.reporter.phase(spec, "checkpoint")
        warning = dataset.checkpoint(endpoint)
        return [warning] if warning else []

    def invoke(
        self,
        spec: RunSpec,
        endpoint: Endpoint,
        run: command.Invocation,
        cwd: Path,
        on_start: Callable[[int], None] | None = None,
    ) -> command.Completed:
        argv = command.build_argv(self.pgbench.binary, self.pgbench.version, run, endpoint.dbname)

        def on_line(line: str) -> None:
            parsed = parse_progress_line(line)
            if parsed is not None:
                self.reporter.progress(spec, parsed)

        seconds = run.seconds or 0
        # -T is checked between transactions only; allow generous slack before killing.
        timeout = None if run.seconds is None else seconds * 2 + 120
        return command.execute(
            argv,
            endpoint.libpq_env(),
            cwd=cwd,
            on_stderr_line=on_line,
            timeout_s=timeout,
            on_start=on_start,
        )

    def measure(
        self, spec: RunSpec, endpoint: Endpoint, artifacts: Path, started: float
    ) -> RunResult:
        capture = self.telemetry.capture(
            self.servers.live[spec.server],
            endpoint,
            spec.options.threads,
            lambda text: self.reporter.phase(spec, text),
        )
        warnings = self.hygiene(spec, endpoint)
        warmup_tps = self.warmup(spec, endpoint, artifacts)
        sampling = sampling_rate(spec, warmup_tps)
        self.reporter.phase(spec, "measuring")
        run = command.Invocation(
            spec.workload,
            spec.scale,
            spec.clients,
            spec.options,
            spec.options.duration_s,
            log_dir=artifacts if sampling else None,
            sampling_rate=sampling or 1.0,
        )
        capture.start()
        done: command.Completed | None = None
        try:
            done = self.invoke(spec, endpoint, run, artifacts, on_start=capture.pgbench_started)
        finally:
            telemetry = capture.stop(done.cpu_s if done else None)
        sanitized = sanitize_argv(done.argv, self.results_dir)
        if done.interrupted:
            return self.failure(spec, started, INTERRUPTED, "interrupted by the user", sanitized)
        self.reporter.phase(spec, "analysing")
        result = self.build_result(spec, done, sanitized, artifacts, started, warmup_tps, sampling)
        result = _with(result, telemetry=telemetry)
        result = _with(result, diagnosis=self.telemetry.diagnose(spec.server, result))
        commits = check_commits(
            result.transactions,
            telemetry,
            clients=spec.clients,
            connect_each=spec.options.connect,
            builtin_only=all(s.kind == "builtin" for s in spec.workload.scripts),
        )
        if commits is not None and not commits.agrees:
            warnings.append(commits.warning())
        with results_writes(artifacts):
            archive(artifacts, done, sanitized)
        kept = tuple(sorted(p.name for p in artifacts.iterdir()))
        return _with(result, warnings=(*warnings, *result.warnings), artifacts=kept)

    def warmup(self, spec: RunSpec, endpoint: Endpoint, artifacts: Path) -> float | None:
        if spec.options.warmup_s == 0:
            return None
        self.reporter.phase(spec, "warmup")
        run = command.Invocation(
            spec.workload, spec.scale, spec.clients, spec.options, spec.options.warmup_s
        )
        done = self.invoke(spec, endpoint, run, artifacts)
        if done.interrupted:
            raise KeyboardInterrupt
        if done.returncode != 0:
            cause = f"warmup: pgbench exited {done.returncode}: {error_summary(done.stderr)}"
            raise (RunAborted if parse_stderr(done.stderr).aborted else RuntimeError)(cause)
        try:
            return parse_report(done.stdout).tps
        except PgbenchParseError:
            return None

    def build_result(
        self,
        spec: RunSpec,
        done: command.Completed,
        argv: tuple[str, ...],
        artifacts: Path,
        started: float,
        warmup_tps: float | None,
        sampling: float | None,
    ) -> RunResult:
        stderr = parse_stderr(done.stderr)
        try:
            report: PgbenchReport | None = parse_report(done.stdout)
        except PgbenchParseError:
            report = None
        if report is None:
            message = (
                f"pgbench exited {done.returncode} without a report: {error_summary(done.stderr)}"
            )
            return _with(
                self.failure(spec, started, FAILED, message, argv), client_cpu_s=done.cpu_s
            )
        aborted = done.returncode != 0 or stderr.aborted
        warnings = run_warnings(spec, report, done)
        try:
            latency, log_seconds = self.analyse_log(spec, artifacts, sampling)
        except PgbenchParseError as exc:  # the report's figures stand without the log
            latency, log_seconds = None, ()
            warnings.append(f"the per-transaction log could not be analysed: {first_line(exc)}")
        seconds = log_seconds or seconds_from_progress(stderr.progress)
        return RunResult(
            run_key=spec.run_key,
            cell_id=spec.cell_id,
            sequence=spec.sequence,
            repeat=spec.repeat,
            status=ABORTED if aborted else OK,
            spec=spec.cell,
            argv=argv,
            started_at=started,
            finished_at=time.time(),
            pgbench_version=self.pgbench.version_text,
            error=error_summary(done.stderr) if aborted else None,
            tps=report.tps,
            transactions=report.transactions,
            failed=report.failed,
            skipped=report.skipped,
            late=report.late,
            latency_avg_ms=report.latency_avg_ms if report.latency_avg_measured else None,
            latency_stddev_ms=report.latency_stddev_ms,
            lag_avg_ms=report.lag_avg_ms,
            lag_max_ms=report.lag_max_ms,
            connection_time_ms=report.initial_connection_time_ms
            if report.initial_connection_time_ms is not None
            else report.average_connection_time_ms,
            warmup_tps=warmup_tps,
            client_cpu_s=done.cpu_s,
            latency=latency,
            seconds=seconds,
            report=asdict(report),
            warnings=tuple(warnings),
        )

    def analyse_log(
        self, spec: RunSpec, artifacts: Path, sampling: float | None
    ) -> tuple[LatencySummary | None, tuple[Second, ...]]:
        files = sorted(artifacts.glob(f"{command.LOG_PREFIX}.*"))
        if sampling is None or not files:
            return None, ()
        summary = analyse_transaction_logs(
            files,
            pg_major=self.pgbench.version.major[0],
            rate_limited=spec.options.rate is not None,
            has_retries_column=spec.options.max_tries != 1,
            sampling_rate=sampling,
        )
        return latency_summary(summary, sampling), log_series(summary, sampling)


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


def sanitize_argv(argv: tuple[str, ...], results_dir: Path) -> tuple[str, ...]:
    """argv as stored: the binary by name and paths relative to the results directory."""
    prefix = str(results_dir) + "/"
    cleaned = [Path(argv[0]).name]
    for previous, arg in itertools.pairwise(argv):
        if previous == "-D":  # a variable's value may be a connection string with a password
            name, _, value = arg.partition("=")
            arg = f"{name}={redact_setting(name, value)}"
        cleaned.append(arg.replace(prefix, ""))
    return tuple(cleaned)


def first_line(error: object) -> str:
    return str(error).strip().split("\n", 1)[0]


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


def run_warnings(spec: RunSpec, report: PgbenchReport, done: command.Completed) -> list[str]:
    warnings = []
    if spec.workload.updates and spec.scale < spec.clients:
        warnings.append(
            f"scale {spec.scale} < {spec.clients} clients on an updating workload: "
            "branch-row contention limits TPS; use scale ≥ clients"
        )
    if report.threads < spec.options.threads:
        warnings.append(f"pgbench used {report.threads} threads, not {spec.options.threads}")
    if spec.options.duration_s and done.wall_s > spec.options.duration_s * 1.5 + 5:
        warnings.append(
            f"the run took {done.wall_s:.0f} s for -T {spec.options.duration_s}: "
            "transactions stalled (-T is only checked between transactions)"
        )
    if done.cpu_s and spec.options.duration_s:
        busy = done.cpu_s / (spec.options.duration_s * max(1, spec.options.threads))
        if busy > 0.9:
            warnings.append(
                f"pgbench used {busy:.0%} of its {spec.options.threads} threads' CPU: "
                "the load generator may be the bottleneck; give it more threads or cores"
            )
    return warnings


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


def archive(artifacts: Path, done: command.Completed, argv: tuple[str, ...]) -> None:
    """Keep pgbench's raw output and logs, zstd-compressed, beside the results database."""
    compressor = zstandard.ZstdCompressor(level=3)
    (artifacts / "stdout.txt.zst").write_bytes(compressor.compress(done.stdout.encode()))
    (artifacts / "stderr.txt.zst").write_bytes(compressor.compress(done.stderr.encode()))
    (artifacts / "argv.json").write_text(json.dumps(list(argv)))
    for log in artifacts.glob(f"{command.LOG_PREFIX}.*"):
        if log.suffix == ".zst":
            continue
        with log.open("rb") as source, open(f"{log}.zst", "wb") as target:
            compressor.copy_stream(source, target)
        log.unlink()


def _with(result: RunResult, **changes: object) -> RunResult:
    return replace(result, **changes)  # type: ignore[arg-type]
