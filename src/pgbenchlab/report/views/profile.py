"""A run's CPU profile as the outputs show it (the server's, or pgbench's): top functions,
self and total, by backend type; and what changed between two runs, in CPU time per committed
transaction."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from pgbenchlab.errors import UserError
from pgbenchlab.profiles import (
    PGBENCH,
    PROCESSES,
    SERVER,
    FunctionTime,
    Profile,
    ProfileDiff,
    diff,
    top_functions,
)
from pgbenchlab.profiles.top import backend_samples
from pgbenchlab.store import Store
from pgbenchlab.store.records import RunRecord


@dataclass(frozen=True)
class RunProfile:
    run_id: int
    label: str  # server, workload, clients, repeat
    transactions: int | None
    tps: float | None
    profile: Profile
    top: tuple[FunctionTime, ...]
    backends: dict[str, int]  # samples per backend type
    also: tuple[str, ...] = ()  # the run's other profiles (PGBENCH beside SERVER, or SERVER)
    instructions_per_tx: float | None = None  # a counted run's, as stored with the run

    @property
    def cpu_ms_per_tx(self) -> float | None:
        """The profiled processes' CPU time per committed transaction."""
        if not self.transactions or self.profile.counted:
            return None
        return self.profile.cpu_seconds(self.profile.samples) / self.transactions * 1e3


@dataclass(frozen=True)
class ProfileComparison:
    a: RunProfile
    b: RunProfile
    rows: tuple[ProfileDiff, ...]  # the largest change in self time first


def run_label(run: RunRecord) -> str:
    return (
        f"run {run.id}: {run.spec.server} s={run.spec.scale} {run.spec.workload} "
        f"c={run.spec.clients} #{run.repeat}"
    )


def profiled_run(run: RunRecord, profile: Profile, limit: int = 15) -> RunProfile:
    return RunProfile(
        run.id,
        run_label(run),
        run.transactions,
        run.tps,
        profile,
        tuple(top_functions(profile, limit)),
        backend_samples(profile),
        instructions_per_tx=run.instructions_per_tx,
    )


def run_profile(store: Store, run_id: int, limit: int = 15, process: str = SERVER) -> RunProfile:
    """The run's profile of the server's processes (or of pgbench: process PGBENCH)."""
    run = store.run_record(run_id)
    if run is None:
        raise UserError(f"no run with id {run_id}; see `pgbenchlab runs`")
    found = {p: store.profiles_by_run([run_id], p).get(run_id) for p in PROCESSES}
    profile = found[process]
    if profile is None and process == PGBENCH and found[SERVER] is not None:
        raise UserError(
            f"run {run_id} has no pgbench profile, only the server's: its campaign had "
            "`profile = false` in [pgbench], or perf recorded nothing of pgbench"
        )
    if profile is None:
        raise UserError(
            f'run {run_id} has no profile: profile it with `profile = "on"` (or "auto") in '
            "the plan's [defaults]"
        )
    also = tuple(p for p, other in found.items() if p != process and other is not None)
    return replace(profiled_run(run, profile, limit), also=also)


def compare_profiles(a: RunProfile, b: RunProfile, limit: int = 25) -> ProfileComparison:
    if not a.transactions or not b.transactions:
        raise UserError("both runs need committed transactions to compare per transaction")
    if a.profile.counted != b.profile.counted:
        raise UserError(
            f"run {a.run_id if a.profile.counted else b.run_id} has a counted profile "
            "(instructions) and the other perf's samples: compare counted runs with counted ones"
        )
    rows = diff(a.profile, a.transactions, b.profile, b.transactions)
    return ProfileComparison(a, b, tuple(rows[:limit]))


def profile_json(found: RunProfile) -> dict[str, Any]:
    profile = found.profile
    return {
        "run_id": found.run_id,
        "run": found.label,
        "transactions": found.transactions,
        "tps": found.tps,
        "process": profile.process,
        "frequency_hz": profile.frequency_hz,
        "samples": profile.samples,
        "lost": profile.lost,
        "target": profile.target,
        "symbols": profile.symbols,
        "complete_share": profile.complete_share,
        "seconds": profile.seconds,
        "cpu_ms_per_tx": found.cpu_ms_per_tx,
        "counter": profile.counter or None,
        "instructions_per_tx": found.instructions_per_tx,
        "backend_types": found.backends,
        "top": [asdict(t) for t in found.top],
    }


def comparison_json(found: ProfileComparison) -> dict[str, Any]:
    return {
        "a": {k: v for k, v in profile_json(found.a).items() if k != "top"},
        "b": {k: v for k, v in profile_json(found.b).items() if k != "top"},
        "unit": f"{found.a.profile.unit} per committed transaction",
        "functions": [asdict(r) | {"self_change_us": r.self_change_us} for r in found.rows],
    }
