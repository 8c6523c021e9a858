"""The measured-run sequence, one for a single server's run and a group's: telemetry (and perf,
when the run is profiled) beside every server of the run, hygiene, the warmup, the measured
pgbench, the result assembled from what it left, each server's commits checked against it, and
what limited it diagnosed (`diagnosing`).

Where pgbench runs is chosen in one place (`_pgbench`): a single server's run through the
campaign's executor, a group's on every member at once through the campaign's load generators
(`together`); the rest of the sequence does not know which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from pgbenchlab.campaign.assemble import Hygiene
from pgbenchlab.campaign.counting import BackendCounts, counting_server, reference_run
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import Capturing, Executor, Profiling, Telemetry
from pgbenchlab.campaign.generators import Target
from pgbenchlab.campaign.measure import (
    Around,
    Pgbench,
    finished_run,
    measured_invocation,
    sampling_rate,
)
from pgbenchlab.campaign.together import GroupExecutor, diagnosed, generators_of, server_parts
from pgbenchlab.diagnosing import diagnose_run
from pgbenchlab.invocation.command import Completed
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.plan import POOLER, Plan, RunSpec
from pgbenchlab.profiles import RunProfiles
from pgbenchlab.profiles.counting import TOOL, ProcessCounts, counted_run
from pgbenchlab.records.telemetry import Point, RunTelemetry
from pgbenchlab.results import RunResult
from pgbenchlab.server import Endpoint, ManagedServer, Server
from pgbenchlab.telemetry.pooler import PooledCapture


class RunSession(Protocol):
    """What a measured run uses of its campaign's session (`session.Session`)."""

    plan: Plan
    reporter: Reporter
    telemetry: Telemetry
    pgbench: Pgbench
    executor: Executor
    results_dir: Path

    @property
    def version(self) -> str: ...

    def hygiene(self, spec: RunSpec, endpoint: Endpoint) -> Hygiene: ...


@dataclass(frozen=True)
class Member:
    """A server of the run, ready: its own name, the admin endpoint on the run's database (for
    hygiene and the samplers) and pgbench's (connecting the run's way)."""

    name: str
    server: Server
    endpoint: Endpoint
    client: Endpoint


def measured_run(
    session: RunSession, spec: RunSpec, members: Sequence[Member], artifacts: Path, started: float
) -> RunResult:
    """The run on its prepared servers: telemetry from before the hygiene, and perf too when
    the run is profiled, so it follows the measured run's backends from their fork."""
    grouped = session.plan.is_group(spec.server)

    def phase(text: str) -> None:
        session.reporter.phase(spec, text)

    captures = {m.name: _capture(session, spec, m, phase) for m in members}
    profiler = None if grouped else _profiler(session, spec, members[0].server, artifacts)
    if profiler is None:
        return _measured(session, spec, members, artifacts, started, captures, None)
    profiler.start()
    try:
        return _measured(session, spec, members, artifacts, started, captures, profiler)
    finally:
        profiler.close()


def _capture(
    session: RunSession, spec: RunSpec, member: Member, phase: Callable[[str], None]
) -> Capturing:
    """The member's telemetry for the run, with its pooler's when the run goes through one."""
    server = member.server

    def sampled(points: Sequence[Point]) -> None:
        session.reporter.sampled(spec, member.name, points)

    threads = spec.pgbench_threads
    capture = session.telemetry.capture(server, member.endpoint, threads, phase, sampled)
    if spec.options.connection != POOLER or not isinstance(server, ManagedServer):
        return capture
    if server.pooler is None:
        return capture
    return PooledCapture(capture, server.pooler, member.endpoint, member.endpoint.dbname)


def _profiler(
    session: RunSession, spec: RunSpec, server: Server, artifacts: Path
) -> Profiling | None:
    if not spec.profiled:
        return None
    pgbench = session.pgbench.client.install if session.plan.pgbench_profile else None
    return session.telemetry.profiler(server, spec.label, artifacts, pgbench)


def _measured(
    session: RunSession,
    spec: RunSpec,
    members: Sequence[Member],
    artifacts: Path,
    started: float,
    captures: Mapping[str, Capturing],
    profiler: Profiling | None,
) -> RunResult:
    def phase(text: str) -> None:
        session.reporter.phase(spec, text)

    def progress(line: ProgressLine) -> None:
        session.reporter.progress(spec, line)

    grouped = session.plan.is_group(spec.server)
    hygiene = sum((session.hygiene(spec, m.endpoint) for m in members), Hygiene())
    warmup_tps = _pgbench(session, members, grouped).warmup(
        spec, members[0].client, artifacts, progress, phase
    )
    sampling = sampling_rate(spec, warmup_tps)
    invocation = measured_invocation(spec, artifacts, sampling)
    counts = BackendCounts(counting_server(members[0].server)) if spec.counted else None
    reference: tuple[list[ProcessCounts], int] = ([], 0)
    if counts is not None:
        phase("counting a reference run (-t 1)")
        reference = reference_run(
            counts,
            lambda once: session.pgbench.run(members[0].client, once, artifacts, progress),
            invocation,
        )
    phase("measuring")
    starts = [_told(captures[m.name], profiler) for m in members]
    pgbench = _pgbench(session, members, grouped, starts)
    running: dict[str, Capturing] = {}
    done: Completed | None = None
    try:
        for name, capture in captures.items():
            capture.start()
            running[name] = capture
        if counts is not None:
            counts.mark()  # after the telemetry's connection: its backend is not counted
        on_start = None if grouped else starts[0]
        done = pgbench.run(members[0].client, invocation, artifacts, progress, on_start)
    finally:
        if profiler is not None:
            profiler.measured()
        telemetry = {n: c.stop(_pgbench_cpu_s(done, n, grouped)) for n, c in running.items()}
    profiles = RunProfiles()
    if profiler is not None and not done.interrupted:
        phase("profile")
        profiles = profiler.stop()
    around = Around(started, warmup_tps, sampling, hygiene)
    own = None if grouped else telemetry[members[0].name]
    result = finished_run(
        session.pgbench, spec, done, artifacts, around, telemetry=own,
        version=session.version, results_dir=session.results_dir, phase=phase,
    )  # fmt: skip
    if done.interrupted:
        return result
    if grouped:
        result = _with_parts(session, spec, result, done, telemetry)
    result = replace(result, profile=profiles.server, pgbench_profile=profiles.pgbench)
    if counts is not None:
        phase("counting")
        counted = counted_run(counts.collect(), result.transactions or 0, *reference)
        if counted is not None:
            result = replace(
                result,
                instructions_per_tx=counted.instructions_per_tx,
                instructions_tool=TOOL,
                profile=counted.profile,
            )
    return replace(result, diagnosis=diagnose_run(result, session.telemetry.evidence(spec.server)))


def _pgbench(
    session: RunSession,
    members: Sequence[Member],
    grouped: bool,
    starts: Sequence[Callable[[int], None]] | None = None,
) -> Pgbench:
    """Where the run's pgbench runs: a single server's run through the campaign's executor; a
    group's on every member at once through the campaign's load generators, each member's
    pgbench pid told to its own of `starts`."""
    if not grouped:
        return session.pgbench
    client = session.pgbench.client
    targets = [
        Target(m.client.libpq_env(), m.client.client_dbname(client.version.major), m.name)
        for m in members
    ]
    return Pgbench(client, GroupExecutor(generators_of(session.executor), targets, starts))


def _told(capture: Capturing, profiler: Profiling | None) -> Callable[[int], None]:
    """Who hears a measured pgbench's pid: the profiler first (it may hold pgbench still while
    perf attaches), then the member's samplers."""

    def started(pid: int) -> None:
        if profiler is not None:
            profiler.pgbench_started(pid)
        capture.pgbench_started(pid)

    return started


def _pgbench_cpu_s(done: Completed | None, member: str, grouped: bool) -> float | None:
    """The pgbench CPU time (wait4) a member's samplers are told: the run's, or in a group's
    run that of the member's own pgbench processes."""
    if done is None:
        return None
    if not grouped:
        return done.cpu_s
    own = [s.completed.cpu_s for s in done.shares if s.server == member]
    return sum(own) if own else None


def _with_parts(
    session: RunSession,
    spec: RunSpec,
    result: RunResult,
    done: Completed,
    telemetry: Mapping[str, RunTelemetry | None],
) -> RunResult:
    """A group's run with each member's part: its figures, its commits checked against its
    own pgbench (a warning naming the member that disagrees) and what limited it."""
    parts, warnings = server_parts(spec, done.shares, telemetry)
    result = replace(result, warnings=result.warnings + tuple(warnings))
    return replace(result, servers=diagnosed(parts, result, done, telemetry, session.telemetry))
