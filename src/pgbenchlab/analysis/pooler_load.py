"""A saturated pooler as what limited a run (connection = "pgbouncer").

PgBouncer runs one thread: one CPU is all it can use, and every transaction of the run passes
through it. When it was on its CPU or waiting for one (schedstat: CPU time + run-queue wait)
nearly all the time, the pooler set the pace, whatever else looked busy: pgbench and the server
wait on it, which can make either look like the limit. Judged on the run's totals: the kernel
adds a wait to a process's figures only when it ends, so its per-second figures come in lumps.
The verdict the telemetry's rules gave stays among the others (``also``), as with a saturated
load generator.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.analysis.diagnosis import RULES_VERSION, Bottleneck, Diagnosis
from pgbenchlab.findings import saturated
from pgbenchlab.records.telemetry import RunTelemetry

POOLER = "pooler"  # its telemetry source and affinity role (`telemetry.pooler`)


@dataclass(frozen=True)
class PoolerLoad:
    """The pooler's process over the run: CPU and run-queue wait seconds, the seconds they
    cover and the CPU list the plan pinned it to (None: not pinned)."""

    cpu_s: float
    wait_s: float
    duration_s: float
    pinned: str | None = None

    @property
    def busy(self) -> float:
        """The share of the run it was on its CPU or waiting for one (of its one CPU)."""
        return (self.cpu_s + self.wait_s) / self.duration_s if self.duration_s > 0 else 0.0


def pooler_load(telemetry: RunTelemetry | None) -> PoolerLoad | None:
    """The pooler's load from a run's telemetry (None: the run went through no pooler)."""
    if telemetry is None:
        return None
    cpu = telemetry.total(POOLER, "cpu_s")
    if cpu is None:
        return None
    affinity = telemetry.affinity_of(POOLER)
    pinned = affinity.requested if affinity is not None else None
    wait = telemetry.total(POOLER, "wait_s") or 0.0
    seconds = telemetry.total(POOLER, "seconds") or telemetry.duration_s
    return PoolerLoad(cpu, wait, seconds, pinned)


def with_saturated_pooler(found: Diagnosis | None, load: PoolerLoad | None) -> Diagnosis | None:
    """The run's diagnosis, pooler_bound when its pooler used nearly all of its one CPU."""
    if load is None or not saturated(load.busy):
        return found
    where = f" (pinned to CPU {load.pinned})" if load.pinned else ""
    evidence = (
        f"the pooler{where} was on a CPU or waiting for one {load.busy:.0%} of the run (CPU "
        f"{load.cpu_s / load.duration_s:.2f} cores, run-queue wait "
        f"{load.wait_s / load.duration_s:.2f}): it runs one thread, so one CPU is its "
        "ceiling, and every transaction passed through it",
    )
    if found is None:
        return Diagnosis(Bottleneck.POOLER_BOUND, evidence, {"rules_version": RULES_VERSION})
    if found.verdict == Bottleneck.POOLER_BOUND:
        return found
    details = dict(found.details)
    details["also"] = [found.verdict.value, *details.get("also", [])]
    details["also_evidence"] = {
        found.verdict.value: list(found.evidence),
        **details.get("also_evidence", {}),
    }
    return Diagnosis(Bottleneck.POOLER_BOUND, evidence, details)
