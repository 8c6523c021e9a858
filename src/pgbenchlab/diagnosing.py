"""What limited a run, decided in one place from its evidence.

The evidence is the run's own record (its figures, per-second series, telemetry and load
generators) and two facts about where it ran: the sync rates pg_test_fsync measured on its
server's storage, and the load generator host its samplers watched. The campaign diagnoses each
run here as it assembles it, and each group member's part the same way (the part seen as the
member's own run, which the part keeps: `ServerPart.observed`); a stored run or member part
whose verdict came from older rules (`rules_version`) is diagnosed here again from what was
stored (`store.rediagnosis`). The rules themselves are `analysis.diagnosis`, the figures they
read `analysis.telemetry_figures`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pgbenchlab.analysis import diagnosis, telemetry_figures
from pgbenchlab.analysis.diagnosis import RULES_VERSION, Diagnosis, with_saturated_generators
from pgbenchlab.analysis.pooler_load import pooler_load, with_saturated_pooler
from pgbenchlab.records.observed import ObservedRun
from pgbenchlab.results import RunResult, ServerPart


@dataclass(frozen=True)
class Evidence:
    """What a diagnosis reads besides the run: its server's measured syncs per second (one
    8 kB write, per wal_sync_method; empty when pg_test_fsync did not run) and the load
    generator host whose pgbench the samplers watched (None: this machine's, or several
    generators' each judged on its own)."""

    fsync_ops_per_s: Mapping[str, float] = field(default_factory=dict)
    pgbench_host: str | None = None


def observed_run(result: RunResult) -> ObservedRun:
    """What the rules read of a run being assembled."""
    return ObservedRun(
        result.tps,
        tuple((s.t, s.tps) for s in result.seconds),
        result.spec.rate is not None,
        result.spec.clients,
        tuple((g.host, g.busy, usable_cpus(g.threads, g.cpus)) for g in result.generators),
        result.telemetry,
    )


def usable_cpus(threads: int, cpus: int | None) -> int:
    """The CPUs a load generator's pgbench could use: its threads, or fewer CPUs."""
    return min(threads, cpus or threads)


def diagnose_run(result: RunResult, evidence: Evidence) -> Diagnosis | None:
    """The run's diagnosis, as it is assembled (a group member's part: seen as its own run)."""
    return diagnose(observed_run(result), evidence)


def diagnose(run: ObservedRun, evidence: Evidence) -> Diagnosis | None:
    """The rules over the run's telemetry, naming a load generator that wanted nearly all its
    usable CPUs, and above all a pooler that used its one CPU (None: nothing to judge)."""
    found = with_saturated_generators(_by_the_rules(run, evidence), run.generators)
    return with_saturated_pooler(found, pooler_load(run.telemetry))


def stale(details: Mapping[str, object]) -> bool:
    """Whether a stored diagnosis came from other rules than these (`rules_version`)."""
    return details.get("rules_version") != RULES_VERSION


def judged(part: ServerPart, found: Diagnosis | None) -> ServerPart:
    """A group member's part with the verdict of its diagnosis (None: these rules found
    nothing to judge, and say so)."""
    if found is None:
        return replace(part, verdict=None, evidence=(), details={"rules_version": RULES_VERSION})
    return replace(part, verdict=found.verdict, evidence=found.evidence, details=found.details)


def _by_the_rules(run: ObservedRun, evidence: Evidence) -> Diagnosis | None:
    telemetry = run.telemetry
    if telemetry is None or run.tps is None:
        return None
    method = telemetry.server_settings.get("wal_sync_method", "fdatasync")
    # pgbench's CPU total in the telemetry is already wait4's (`Capture.stop`).
    figures = telemetry_figures.figures(
        telemetry,
        list(run.seconds),
        fsync_per_s=evidence.fsync_ops_per_s.get(method),
        fsync_method=method,
        rate_limited=run.rate_limited,
        clients=run.clients,
        pgbench_host=evidence.pgbench_host,
    )
    return diagnosis.diagnose(figures)
