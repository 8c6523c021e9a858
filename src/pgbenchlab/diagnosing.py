"""What limited a run, decided in one place from its evidence.

The evidence is the run's own record (its figures, per-second series, telemetry and load
generators) and two facts about where it ran: the sync rates pg_test_fsync measured on its
server's storage, and the load generator host its samplers watched. The campaign diagnoses each
run here as it assembles it, and each group member's part the same way (the part seen as the
member's own run); the rules themselves are `analysis.diagnosis`, the figures they read
`analysis.telemetry_figures`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pgbenchlab.analysis import diagnosis, telemetry_figures
from pgbenchlab.analysis.diagnosis import Diagnosis, with_saturated_generators
from pgbenchlab.results import RunResult


@dataclass(frozen=True)
class Evidence:
    """What a diagnosis reads besides the run: its server's measured syncs per second (one
    8 kB write, per wal_sync_method; empty when pg_test_fsync did not run) and the load
    generator host whose pgbench the samplers watched (None: this machine's, or several
    generators' each judged on its own)."""

    fsync_ops_per_s: Mapping[str, float] = field(default_factory=dict)
    pgbench_host: str | None = None


def diagnose_run(result: RunResult, evidence: Evidence) -> Diagnosis | None:
    """The run's diagnosis: the rules over its telemetry, naming a load generator that wanted
    nearly all its usable CPUs (None: nothing to judge)."""
    used = [(g.host, g.busy, min(g.threads, g.cpus or g.threads)) for g in result.generators]
    return with_saturated_generators(_by_the_rules(result, evidence), used)


def _by_the_rules(result: RunResult, evidence: Evidence) -> Diagnosis | None:
    telemetry = result.telemetry
    if telemetry is None or result.tps is None:
        return None
    method = telemetry.server_settings.get("wal_sync_method", "fdatasync")
    # pgbench's CPU total in the telemetry is already wait4's (`Capture.stop`).
    figures = telemetry_figures.figures(
        telemetry,
        [(s.t, s.tps) for s in result.seconds],  # second t covers (t − 1, t]
        fsync_per_s=evidence.fsync_ops_per_s.get(method),
        fsync_method=method,
        rate_limited=result.spec.get("rate") is not None,
        clients=result.spec.get("clients"),
        pgbench_host=evidence.pgbench_host,
    )
    return diagnosis.diagnose(figures)
