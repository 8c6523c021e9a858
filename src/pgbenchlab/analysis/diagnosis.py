"""What limited a run: a short verdict with its evidence, from the run's telemetry.

Pure functions over `Figures` (numbers taken from a `RunTelemetry`, pgbench's per-second TPS and
the storage's pg_test_fsync figure). Each rule answers on its own; the verdict is the first
match in this order, the others are kept as ``also``:

1. client_bound — pgbench's threads were on a CPU or waiting for one ≥ 90 % of the run
   (schedstat: CPU time + run-queue wait ÷ (duration × threads)): the load generator, not
   the server, set the pace. Pinned to fewer CPUs than the host has (its Cpus_allowed_list),
   the capacity is those CPUs when fewer than its threads (other load on them shows as
   run-queue wait, and counts: the generator's CPUs set the pace). pgbench on a load
   generator host is watched there, and named.
2. checkpoint_disturbed — a checkpoint ran during the run (server log, else the statistics
   views' counters) and the worst second inside its window (widened by 1 s each side) had
   ≤ 65 % of the median TPS of the other seconds (first and last seconds left out).
3. lock_bound, wal_flush_bound, io_bound — whichever matches with the largest share of
   benchmark-backend samples (pg_stat_activity, 5×/s) in its wait-event group (then the
   strongest, where those shares tie):
   lock_bound: heavyweight locks, LWLocks (other than WAL and buffer-I/O ones) and buffer pins
   ≥ 30 %; wal_flush_bound: WAL write/flush waits ≥ 30 %, or WAL flushes per second ≥ 70 % of
   what pg_test_fsync measured for the server's wal_sync_method, or WAL syncs busy ≥ 70 % of
   the run (where timed); io_bound: data-file I/O waits ≥ 30 %, or iowait ≥ 20 % of the host's
   CPU with the data directory's disk ≥ 80 % busy.
4. server_cpu_bound — the host's CPUs were ≥ 90 % busy and either server processes wanted at
   least half of them (CPU time + run-queue wait), or backends were running (no wait event) in
   ≥ 50 % of samples; or the server was pinned to fewer CPUs than the host has and its
   processes wanted ≥ 90 % of those.
5. unclear — none of the above.

A run through a pooler that used its one CPU is pooler_bound whatever the rules found
(`analysis.pooler_load`), as a saturated load generator makes a run client_bound.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pgbenchlab import cpusets
from pgbenchlab.findings import saturated

RULES_VERSION = 3
CHECKPOINT_DIP = 0.65
WAIT_SHARE = 0.30
FSYNC_RATIO = 0.70
WAL_SYNC_BUSY = 0.70
IOWAIT_PCT, DISK_UTIL_PCT = 20.0, 80.0
HOST_BUSY_PCT = 90.0
SERVER_DEMAND = 0.5  # of the host's CPUs
CPU_SHARE = 0.50
CHECKPOINT_MARGIN_S = 1.0
PINNED_SERVER_DEMAND = 0.90  # of the server's pinned CPUs


class Bottleneck(StrEnum):
    """What limited a run: the verdict of its diagnosis."""

    CLIENT_BOUND = "client_bound"
    POOLER_BOUND = "pooler_bound"
    CHECKPOINT_DISTURBED = "checkpoint_disturbed"
    LOCK_BOUND = "lock_bound"
    WAL_FLUSH_BOUND = "wal_flush_bound"
    IO_BOUND = "io_bound"
    SERVER_CPU_BOUND = "server_cpu_bound"
    UNCLEAR = "unclear"


@dataclass(frozen=True)
class Finding:
    verdict: Bottleneck
    strength: float  # the share or ratio that decided it (orders the wait-based rules)
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    verdict: Bottleneck
    evidence: tuple[str, ...]
    details: dict[str, Any] = field(default_factory=dict)


# -- wait-event groups ---------------------------------------------------------------------------

# Event names are compared in lower case: 17 renamed many (IO "WALSync" became "WalSync",
# IPC "BufferIO" became "BufferIo").
WAL_WAITS = frozenset(
    {
        ("IO", "walsync"),
        ("IO", "walwrite"),
        ("IO", "walinitsync"),
        ("IO", "walinitwrite"),
        ("LWLock", "walwrite"),
        ("LWLock", "walbufmapping"),
        ("LWLock", "walwritelock"),
        ("LWLock", "walbufmappinglock"),
    }
)
BUFFER_IO_WAITS = frozenset({("IPC", "bufferio"), ("LWLock", "bufferio"), ("LWLock", "buffer_io")})


def wait_group(kind: str, event: str) -> str:
    key = (kind, event.lower())
    if key in WAL_WAITS:
        return "wal"
    if kind == "IO" or key in BUFFER_IO_WAITS:
        return "io"
    if kind in ("Lock", "LWLock", "BufferPin"):
        return "lock"
    if kind == "CPU":
        return "cpu"
    if kind == "Client":
        return "client"
    return "other"


# -- the figures the rules read ------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    start: float
    end: float
    summary: str


@dataclass(frozen=True)
class Figures:
    duration_s: float
    tps: tuple[tuple[int, float], ...] = ()  # (t, tps): second t covers (t − 1, t]
    waits: dict[tuple[str, str], int] = field(default_factory=dict)
    pgbench_threads: int | None = None
    pgbench_cpu_s: float | None = None
    pgbench_wait_s: float | None = None
    server_cpu_s: float | None = None
    server_wait_s: float | None = None
    host_cpus: int | None = None
    cpu_pct: dict[str, float] = field(default_factory=dict)  # user, system, iowait, steal, idle
    disk_util_pct: float | None = None
    disk_await_ms: float | None = None
    commits: float | None = None
    blocks_read: float | None = None
    blocks_hit: float | None = None
    wal_syncs: float | None = None
    wal_sync_time_ms: float | None = None
    fsync_per_s: float | None = None
    fsync_method: str | None = None
    checkpoints: tuple[Checkpoint, ...] = ()
    rate_limited: bool = False
    clients: int | None = None
    pgbench_host: str | None = None  # the load generator host pgbench ran on (None: here)
    pgbench_cpus: str | None = None  # the CPU list the kernel allowed pgbench (read back)
    server_cpus: str | None = None  # ... and the server's processes

    def pinned(self, cpus: str | None) -> int | None:
        """How many CPUs a CPU list confines to, when fewer than the host's."""
        if not cpus or not self.host_cpus:
            return None
        count = cpusets.count(cpus)
        return count if count < self.host_cpus else None

    def share(self, group: str) -> float:
        total = sum(self.waits.values())
        if not total:
            return 0.0
        return sum(n for (k, e), n in self.waits.items() if wait_group(k, e) == group) / total

    def top_waits(self, group: str, n: int = 3) -> list[tuple[str, float]]:
        total = sum(self.waits.values()) or 1
        found = [
            (f"{k}:{e}", c / total) for (k, e), c in self.waits.items() if wait_group(k, e) == group
        ]
        return sorted(found, key=lambda x: -x[1])[:n]

    def per_s(self, value: float | None) -> float | None:
        return None if value is None or self.duration_s <= 0 else value / self.duration_s


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _waits_text(figures: Figures, group: str) -> str:
    return ", ".join(f"{name} {_pct(share)}" for name, share in figures.top_waits(group))


# -- the rules -------------------------------------------------------------------------------------


def client_bound(f: Figures) -> Finding | None:
    if not f.pgbench_threads or f.pgbench_cpu_s is None or f.duration_s <= 0:
        return None
    busy = f.pgbench_cpu_s + (f.pgbench_wait_s or 0.0)
    pinned = f.pinned(f.pgbench_cpus)
    capacity = min(f.pgbench_threads, pinned) if pinned else f.pgbench_threads
    saturation = busy / (f.duration_s * capacity)
    if not saturated(saturation):
        return None
    where = "" if f.pgbench_host is None else f"on load generator {f.pgbench_host}, "
    evidence = [
        f"{where}pgbench's {f.pgbench_threads} thread(s) were on a CPU or waiting for one "
        f"{_pct(busy / (f.duration_s * f.pgbench_threads))} of the run "
        f"(CPU {f.pgbench_cpu_s / f.duration_s:.2f} cores)",
        f"benchmark backends waited for the client in {_pct(f.share('client'))} of samples",
    ]
    if pinned:
        evidence.insert(0, pinning_text("pgbench", f.pgbench_cpus, pinned, f, busy))
    return Finding(Bottleneck.CLIENT_BOUND, saturation, tuple(evidence))


def pinning_text(who: str, cpus: str | None, count: int, f: Figures, busy_s: float) -> str:
    return (
        f"{who} was pinned to CPU {cpus} ({count} of the host's {f.host_cpus}) and wanted "
        f"{busy_s / f.duration_s:.2f} CPUs there (CPU time + run-queue wait)"
    )


def _dip(f: Figures) -> tuple[float, int, float, Checkpoint] | None:
    """(ratio, second, baseline TPS, checkpoint) of the worst second inside a checkpoint."""
    seconds = list(f.tps[1:-1])  # the first and last seconds are partial
    if not f.checkpoints or len(seconds) < 3:
        return None

    def near(t: int, c: Checkpoint) -> bool:
        return t - 1 < c.end + CHECKPOINT_MARGIN_S and t > c.start - CHECKPOINT_MARGIN_S

    inside = [(t, v, c) for t, v in seconds for c in f.checkpoints if near(t, c)]
    outside = [v for t, v in seconds if not any(near(t, c) for c in f.checkpoints)]
    if not inside:
        return None
    baseline = statistics.median(outside if len(outside) >= 2 else [v for _, v in seconds])
    if baseline <= 0:
        return None
    t, worst, checkpoint = min(inside, key=lambda x: x[1])
    return worst / baseline, t, baseline, checkpoint


def checkpoint_disturbed(f: Figures) -> Finding | None:
    found = _dip(f)
    if found is None or found[0] > CHECKPOINT_DIP:
        return None
    ratio, t, baseline, checkpoint = found
    worst = ratio * baseline
    return Finding(
        Bottleneck.CHECKPOINT_DISTURBED,
        1 - ratio,
        (
            f"TPS fell to {worst:.0f}/s in second {t} during a checkpoint "
            f"({checkpoint.start:.1f}–{checkpoint.end:.1f} s: {checkpoint.summary}), "
            f"{_pct(1 - ratio)} below the median {baseline:.0f}/s of the other seconds",
        ),
    )


def lock_bound(f: Figures) -> Finding | None:
    share = f.share("lock")
    if share < WAIT_SHARE:
        return None
    return Finding(
        Bottleneck.LOCK_BOUND,
        share,
        (
            f"benchmark backends waited for locks in {_pct(share)} of samples",
            f"dominant: {_waits_text(f, 'lock')}",
        ),
    )


def wal_flush_bound(f: Figures) -> Finding | None:
    share = f.share("wal")
    syncs = f.per_s(f.wal_syncs)
    ratio = syncs / f.fsync_per_s if syncs is not None and f.fsync_per_s else None
    busy = f.wal_sync_time_ms / 1000 / f.duration_s if f.wal_sync_time_ms and f.duration_s else None
    if share < WAIT_SHARE and (ratio or 0) < FSYNC_RATIO and (busy or 0) < WAL_SYNC_BUSY:
        return None
    evidence = [f"benchmark backends waited on WAL writes/flushes in {_pct(share)} of samples"]
    if share:
        evidence.append(f"dominant: {_waits_text(f, 'wal')}")
    if syncs is not None:
        commits = f.per_s(f.commits)
        fsync = (
            f" = {_pct(ratio)} of pg_test_fsync's {f.fsync_per_s:.0f} {f.fsync_method}/s"
            if ratio is not None and f.fsync_per_s
            else ""
        )
        commit_text = f" for {commits:.0f} commits/s" if commits is not None else ""
        evidence.append(f"WAL flushes {syncs:.0f}/s{commit_text}{fsync}")
    if busy is not None:
        evidence.append(f"WAL syncs took {_pct(busy)} of the run's time")
    return Finding(Bottleneck.WAL_FLUSH_BOUND, max(share, ratio or 0, busy or 0), tuple(evidence))


def io_bound(f: Figures) -> Finding | None:
    share = f.share("io")
    iowait = f.cpu_pct.get("iowait", 0.0)
    device_busy = (f.disk_util_pct or 0.0) >= DISK_UTIL_PCT and iowait >= IOWAIT_PCT
    if share < WAIT_SHARE and not device_busy:
        return None
    evidence = [f"benchmark backends waited on data-file I/O in {_pct(share)} of samples"]
    if share:
        evidence.append(f"dominant: {_waits_text(f, 'io')}")
    read, hit = f.blocks_read, f.blocks_hit
    if read is not None and hit is not None and read + hit > 0:
        ratio = _pct(hit / (read + hit))
        evidence.append(f"{read / f.duration_s:.0f} blocks read/s; shared-buffer hit ratio {ratio}")
    if f.disk_util_pct is not None:
        wait = f", await {f.disk_await_ms:.2f} ms" if f.disk_await_ms is not None else ""
        evidence.append(f"data disk {f.disk_util_pct:.0f} % busy{wait}; iowait {iowait:.0f} %")
    return Finding(Bottleneck.IO_BOUND, max(share, 0.5 if device_busy else 0.0), tuple(evidence))


def server_cpu_bound(f: Figures) -> Finding | None:
    if not f.cpu_pct or not f.host_cpus or f.duration_s <= 0:
        return None
    busy = 100.0 - f.cpu_pct.get("idle", 0.0) - f.cpu_pct.get("iowait", 0.0)
    server = (f.server_cpu_s or 0.0) / f.duration_s
    demand = server + (f.server_wait_s or 0.0) / f.duration_s
    running = f.share("cpu")
    wants = f.server_cpu_s is not None and demand >= SERVER_DEMAND * f.host_cpus
    pinned = f.pinned(f.server_cpus)
    held = pinned and f.server_cpu_s is not None and demand >= PINNED_SERVER_DEMAND * pinned
    if not held and (busy < HOST_BUSY_PCT or not (wants or running >= CPU_SHARE)):
        return None
    pgbench = (f.pgbench_cpu_s or 0.0) / f.duration_s
    others = max(0.0, busy / 100 * f.host_cpus - server - pgbench)
    evidence = [
        f"host CPUs {busy:.0f} % busy (user {f.cpu_pct.get('user', 0):.0f} %, "
        f"system {f.cpu_pct.get('system', 0):.0f} %, steal {f.cpu_pct.get('steal', 0):.0f} %)",
        f"server processes used {server:.2f} of {f.host_cpus} CPUs and wanted {demand:.2f}; "
        f"pgbench {pgbench:.2f}; other processes {others:.2f}",
        f"backends running on a CPU in {_pct(running)} of samples",
    ]
    if pinned:
        evidence.insert(
            0, pinning_text("the server", f.server_cpus, pinned, f, demand * f.duration_s)
        )
    strength = demand / pinned if held and pinned else busy / 100
    return Finding(Bottleneck.SERVER_CPU_BOUND, strength, tuple(evidence))


def server_pinning_note(f: Figures) -> str | None:
    """A server pinned to fewer CPUs than it has clients: at most that many backends run."""
    pinned = f.pinned(f.server_cpus)
    if not pinned or not f.clients or f.clients <= pinned:
        return None
    return (
        f"the server was pinned to CPU {f.server_cpus} ({pinned} of the host's "
        f"{f.host_cpus}) for {f.clients} clients: at most {pinned} of their backends run at once"
    )


FIRST: tuple[Callable[[Figures], Finding | None], ...] = (client_bound, checkpoint_disturbed)
BY_SHARE: tuple[Callable[[Figures], Finding | None], ...] = (lock_bound, wal_flush_bound, io_bound)
LAST: tuple[Callable[[Figures], Finding | None], ...] = (server_cpu_bound,)


SHARE_GROUPS = {
    Bottleneck.LOCK_BOUND: "lock",
    Bottleneck.WAL_FLUSH_BOUND: "wal",
    Bottleneck.IO_BOUND: "io",
}


def findings(f: Figures) -> list[Finding]:
    """Every rule that matched, in the order that picks the verdict. Among the wait-share
    rules, where the backends' wait samples were decides first: a run whose backends waited
    on locks in 72 % of samples is lock-bound even when its few WAL flushes kept the disk
    busy (a strength of another kind); strength breaks ties."""
    first = [x for rule in FIRST if (x := rule(f))]
    by_share = sorted(
        (x for rule in BY_SHARE if (x := rule(f))),
        key=lambda x: (-f.share(SHARE_GROUPS[x.verdict]), -x.strength),
    )
    last = [x for rule in LAST if (x := rule(f))]
    return [*first, *by_share, *last]


def other_load_share(f: Figures) -> float | None:
    """The share of all the host's CPUs busy with neither the server nor pgbench: other
    processes, another tenant's steal, and the sampler's few ms/s. A repeat slower than its
    siblings with a large share here met a noisy neighbour, not a property of the server."""
    idle = f.cpu_pct.get("idle")
    if not f.host_cpus or f.duration_s <= 0 or idle is None:
        return None
    if f.server_cpu_s is None or f.pgbench_cpu_s is None:
        return None
    busy = (100.0 - idle - f.cpu_pct.get("iowait", 0.0)) / 100.0  # iowait is idle time
    ours = (f.server_cpu_s + f.pgbench_cpu_s) / (f.duration_s * f.host_cpus)
    return round(max(0.0, busy - ours), 3)


def diagnose(f: Figures) -> Diagnosis:
    found = findings(f)
    details: dict[str, Any] = {
        "rules_version": RULES_VERSION,
        "wait_shares": {
            g: round(f.share(g), 3) for g in ("cpu", "client", "lock", "wal", "io", "other")
        },
        "wait_samples": sum(f.waits.values()),
    }
    other = other_load_share(f)
    if other is not None:
        details["other_load_share"] = other
    note = server_pinning_note(f)
    if note is not None:
        details["pinning"] = note
    if not found:
        why = "no rule matched"
        if f.rate_limited:
            why += "; a rate-limited run (-R): the schedule, not a resource, sets its throughput"
        return Diagnosis(Bottleneck.UNCLEAR, (why,), details)
    details["also"] = [x.verdict.value for x in found[1:]]
    details["also_evidence"] = {x.verdict.value: list(x.evidence) for x in found[1:]}
    evidence = found[0].evidence
    if note is not None and not any(note in e for e in evidence):
        evidence = (*evidence, note)
    return Diagnosis(found[0].verdict, evidence, details)


def with_saturated_generators(
    found: Diagnosis | None, generators: Sequence[tuple[str, float | None, int]]
) -> Diagnosis | None:
    """A run split across load generators (host, share of its usable CPUs it was on or waiting
    for, those CPUs):
    one that used nearly all it could makes the run client-bound, named in the evidence (the
    verdict the telemetry gave stays among the others)."""
    named = tuple(
        f"load generator {host} wanted {busy:.0%} of its {cpus} usable CPU(s) (on a CPU or "
        "waiting for one)"
        for host, busy, cpus in generators
        if busy is not None and saturated(busy)
    )
    if not named:
        return found
    if found is None:
        return Diagnosis(Bottleneck.CLIENT_BOUND, named, {"rules_version": RULES_VERSION})
    if found.verdict == Bottleneck.CLIENT_BOUND:
        return replace(found, evidence=(*named, *found.evidence))
    details = dict(found.details)
    details["also"] = [found.verdict.value, *details.get("also", [])]
    details["also_evidence"] = {
        found.verdict.value: list(found.evidence),
        **details.get("also_evidence", {}),
    }
    return Diagnosis(Bottleneck.CLIENT_BOUND, named, details)
