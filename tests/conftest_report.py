"""Synthetic results databases for the report's unit tests and its size benchmark.

They are written through the real `Store` from `RunResult` records, as the runner writes them,
with pgbench-shaped numbers (a model of TPS against clients, log-normal latencies, per-second
series, log-spaced histograms, kept raw pgbench output). Tests that must see real pgbench use
the `real_campaign` fixture of conftest.py instead.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import zstandard

from pgbenchlab.analysis.diagnosis import RULES_VERSION
from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.telemetry import (
    LogEvent,
    Point,
    RunTelemetry,
    SourceStatus,
    Total,
    WaitCount,
)
from pgbenchlab.results import LatencySummary, RunResult, RunStatus, Second
from pgbenchlab.server import ServerFacts
from pgbenchlab.store import Store

RESULTS_DB = "results.db"
PEAK_TPS = {"select-only": 60_000.0, "tpcb-like": 3_000.0, "simple-update": 4_000.0}


@dataclass(frozen=True)
class FakeServer:
    name: str
    version: str
    speed: float = 1.0  # throughput factor of this server
    settings: dict[str, str] = field(default_factory=dict)
    description: str = ""  # the plan's words for it


@dataclass(frozen=True)
class SyntheticPlan:
    name: str = "synthetic"
    servers: tuple[FakeServer, ...] = (
        FakeServer("pg15", "15.18", 1.0, {"shared_buffers": "64MB", "max_wal_size": "1GB"}),
        FakeServer("pg18", "18.1", 1.1, {"shared_buffers": "96MB", "max_wal_size": "1GB"}),
    )
    scales: tuple[int, ...] = (1,)
    workloads: tuple[str, ...] = ("select-only", "tpcb-like")
    clients: tuple[int, ...] = (1, 2, 4)
    repeats: int = 3
    duration_s: int = 60
    rates: tuple[float | None, ...] = (None,)  # -R values (None: not rate-limited)
    latency_limit_ms: float | None = None
    failures: tuple[int, ...] = ()  # sequence numbers of runs that fail
    aborted: tuple[int, ...] = ()
    seed: int = 7
    telemetry: bool = False  # sampled series of every source, as a real run stores them
    plan_text: str = "[campaign]\nname = 'synthetic'\n"  # the stored plan (its verdict rules)


def spec_for(
    plan: SyntheticPlan,
    server: FakeServer,
    scale: int,
    workload: str,
    clients: int,
    rate: float | None = None,
) -> dict[str, Any]:
    return {
        "server": server.name,
        "server_settings": {},
        "scale": scale,
        "workload": workload,
        "clients": clients,
        "duration_s": plan.duration_s,
        "transactions": None,
        "warmup_s": 5,
        "protocol": "prepared",
        "threads": min(clients, 2),
        "rate": rate,
        "latency_limit_ms": plan.latency_limit_ms,
        "connect": False,
        "vacuum": "pgbench",
        "checkpoint": True,
        "latency_log": "auto",
    }


def model_tps(server: FakeServer, workload: str, clients: int, rng: random.Random) -> float:
    """Saturating throughput with about 6 % run-to-run noise, as measured on this machine."""
    peak = PEAK_TPS[workload] * server.speed
    return peak * clients / (clients + 3) * rng.gauss(1.0, 0.06)


def latency_sample(median_ms: float, count: int, seed: int) -> LatencyHistogram:
    """Log-normal latencies in integer µs with a few slow outliers, as a stored histogram."""
    rng = np.random.default_rng(seed)
    values = rng.lognormal(math.log(median_ms * 1000), 0.45, count)
    outliers = rng.lognormal(math.log(median_ms * 30_000), 0.3, max(1, count // 2000))
    return LatencyHistogram.from_values(np.concatenate([values, outliers]).astype(np.int64))


def pgbench_stdout(spec: dict[str, Any], tps: float, transactions: int, lat: float) -> str:
    return (
        f"pgbench (18.1)\ntransaction type: <builtin: {spec['workload']}>\n"
        f"scaling factor: {spec['scale']}\nquery mode: {spec['protocol']}\n"
        f"number of clients: {spec['clients']}\nnumber of threads: {spec['threads']}\n"
        f"maximum number of tries: 1\nduration: {spec['duration_s']} s\n"
        f"number of transactions actually processed: {transactions}\n"
        "number of failed transactions: 0 (0.000%)\n"
        f"latency average = {lat:.3f} ms\nlatency stddev = {lat * 0.4:.3f} ms\n"
        "initial connection time = 3.112 ms\n"
        f"tps = {tps:.6f} (without initial connection time)\n"
    )


def make_result(
    plan: SyntheticPlan,
    server: FakeServer,
    spec: dict[str, Any],
    sequence: int,
    repeat: int,
    rng: random.Random,
) -> RunResult:
    key = f"{server.name}-{spec['scale']}-{spec['workload']}-{spec['clients']}-{spec['rate']}"
    cell_id = key.replace(" ", "")[:60]
    started = 1_700_000_000.0 + sequence * (plan.duration_s + 8)
    failed = sequence in plan.failures
    result = RunResult(
        run_key=f"{cell_id}-r{repeat}",
        cell_id=cell_id,
        sequence=sequence,
        repeat=repeat,
        status=RunStatus.FAILED if failed else RunStatus.OK,
        spec=RunCell.from_stored(spec),
        argv=("pgbench", "-c", str(spec["clients"]), "-T", str(plan.duration_s), "bench"),
        started_at=started,
        finished_at=started + plan.duration_s + 6,
        pgbench_version="pgbench (PostgreSQL) 18.1",
        error="could not connect to server" if failed else None,
    )
    return result if failed else measured(plan, server, spec, result, rng)


def measured(
    plan: SyntheticPlan,
    server: FakeServer,
    spec: dict[str, Any],
    result: RunResult,
    rng: random.Random,
) -> RunResult:
    capacity = model_tps(server, spec["workload"], spec["clients"], rng)
    tps = min(capacity, spec["rate"]) if spec["rate"] else capacity
    transactions = int(tps * plan.duration_s)
    lat = spec["clients"] / tps * 1000
    hist = latency_sample(lat * 0.8, min(transactions, 20_000), rng.randrange(1 << 30))
    pct = {p: hist.percentile(p) / 1000 for p in ("50", "90", "95", "99", "99.9")}
    seconds = tuple(
        Second(
            t=t,
            tps=round(tps * rng.gauss(1.0, 0.05)),
            latency_mean_ms=lat * rng.gauss(1.0, 0.05),
            latency_stddev_ms=lat * 0.4,
            latency_min_ms=lat * 0.2,
            latency_max_ms=lat * 6 * rng.uniform(0.5, 2),
            lag_ms=lat * 0.1 if spec["rate"] else None,
        )
        for t in range(1, plan.duration_s + 1)  # second t covers (t - 1, t], as the runner stores
    )
    # Under -R -L, the late share grows as the rate nears the server's capacity.
    load = min(1.0, spec["rate"] / capacity) if spec["rate"] else 0.0
    late_pct = round(100 * load**4 * 0.3, 3) if plan.latency_limit_ms else None
    skipped_pct = round(100 * load**6 * 0.1, 3) if plan.latency_limit_ms else None
    assert hist.minimum is not None and hist.maximum is not None
    latency = LatencySummary(
        source="full log",
        samples=hist.count,
        percentiles_ms=pct,
        min_ms=hist.minimum / 1000,
        max_ms=hist.maximum / 1000,
        mean_ms=hist.mean / 1000,
        stddev_ms=lat * 0.4,
        histogram_json=hist.to_json(),
    )
    aborted = result.sequence in plan.aborted
    if plan.telemetry:
        version = int(server.version.split(".")[0]) * 10000
        result = replace(result, telemetry=synthetic_telemetry(spec, version, tps, plan, rng))
    return replace(
        result,
        status=RunStatus.ABORTED if aborted else RunStatus.OK,
        error="client 1 aborted in command 4: ERROR: deadlock detected" if aborted else None,
        tps=tps,
        transactions=transactions,
        failed=0,
        skipped=None if skipped_pct is None else int(transactions * skipped_pct / 100),
        late=None if late_pct is None else int(transactions * late_pct / 100),
        latency_avg_ms=lat,
        latency_stddev_ms=lat * 0.4,
        connection_time_ms=3.1,
        warmup_tps=tps * 0.97,
        client_cpu_s=plan.duration_s * 0.3,
        latency=latency,
        seconds=seconds,
        report=replace(
            parse_report(pgbench_stdout(spec, tps, transactions, lat)),
            late_pct=late_pct,
            skipped_pct=skipped_pct,
        ),
        artifacts=("stdout.txt.zst",),
    )


def synthetic_telemetry(
    spec: dict[str, Any], version: int, tps: float, plan: SyntheticPlan, rng: random.Random
) -> RunTelemetry:
    """Telemetry shaped like a real run's on a 2-CPU host: every source its server version
    has, per second with noise, wait events sampled 5 times a second, and the server-log
    events of a read-write run (autovacuum; a checkpoint in every fifth run)."""
    levels = _telemetry_levels(spec, version, tps)
    series = [
        Point(source, metric, t, max(0.0, level * rng.gauss(1.0, 0.1)))
        for (source, metric), level in levels.items()
        for t in range(1, plan.duration_s + 1)
    ]
    waits = _wait_levels(spec)
    series += [
        Point("pg_stat_activity", event, t, round(level * rng.gauss(1.0, 0.3) * 5) / 5)
        for event, level in waits.items()
        for t in range(1, plan.duration_s + 1)
        if rng.random() < min(1.0, level * 4)  # a rare event is seen in some seconds only
    ]
    series = [p for p in series if p.value > 0 or p.source in ("cpu", "memory")]
    totals: dict[tuple[str, str], float] = {}
    for p in series:
        totals[(p.source, p.metric)] = totals.get((p.source, p.metric), 0.0) + p.value
    events = []
    if spec["workload"] != "select-only":
        events.append(LogEvent(rng.uniform(5, 50), "autovacuum", "autovacuum pgbench_tellers", {}))
        events.append(
            LogEvent(rng.uniform(5, 50), "autoanalyze", "autoanalyze pgbench_tellers", {})
        )
        if rng.random() < 0.2:
            start = rng.uniform(0, plan.duration_s / 2)
            events.append(LogEvent(start, "checkpoint_start", "checkpoint starting: time", {}))
            write_s = 0.45 * plan.duration_s
            done = f"checkpoint complete: wrote 1843 buffers (11.2%); write={write_s:.1f} s"
            events.append(LogEvent(start + write_s, "checkpoint_end", done, {}))
    return RunTelemetry(
        started_at=1_700_000_000.0,
        duration_s=plan.duration_s + 0.01,
        server_version_num=version,
        activity_rounds=5 * plan.duration_s,
        counter_rounds=plan.duration_s + 1,
        sources=tuple(SourceStatus(source, True) for source in sorted({p.source for p in series})),
        series=tuple(series),
        totals=tuple(Total(source, metric, v) for (source, metric), v in totals.items()),
        waits=tuple(
            WaitCount(*_kind_and_name(event), round(level * 5 * plan.duration_s))
            for event, level in waits.items()
        ),
        events=tuple(events),
        statements=(),
        pgbench_threads=spec["threads"],
        host_cpus=2,
    )


def _kind_and_name(event: str) -> tuple[str, str]:
    kind, name = event.split(":", 1)
    return kind, name


def _telemetry_levels(
    spec: dict[str, Any], version: int, tps: float
) -> dict[tuple[str, str], float]:
    """Each (source, metric)'s typical per-second value for this run."""
    writes = spec["workload"] != "select-only"
    busy = min(1.9, 0.3 + 0.3 * spec["clients"])  # cores in use
    levels = {
        ("cpu", "user_pct"): 22 * busy,
        ("cpu", "system_pct"): 20 * busy,
        ("cpu", "iowait_pct"): 6.0 if writes else 0.4,
        ("cpu", "steal_pct"): 1.5,
        ("cpu", "idle_pct"): 100 - 45 * busy,
        ("processes", "server_cpu_s"): 0.6 * busy,
        ("processes", "server_wait_s"): 0.15 * busy,
        ("processes", "pgbench_cpu_s"): 0.35 * busy,
        ("processes", "pgbench_wait_s"): 0.08 * busy,
        ("memory", "dirty_mb"): 60.0 if writes else 2.0,
        ("memory", "writeback_mb"): 0.5,
        ("memory", "cached_mb"): 900.0,
        ("memory", "available_mb"): 23_000.0,
        ("disk", "reads_per_s"): 12.0,
        ("disk", "read_mb_per_s"): 0.4,
        ("disk", "writes_per_s"): 2 * tps if writes else 5.0,
        ("disk", "write_mb_per_s"): 0.012 * tps if writes else 0.1,
        ("disk", "util_pct"): 30.0 if writes else 2.0,
        ("disk", "await_ms"): 0.3,
        ("pg_stat_database", "xact_commit"): tps,
        ("pg_stat_database", "blks_hit"): 6 * tps,
        ("pg_stat_database", "blks_read"): 3.0,
        ("pg_stat_database", "tup_returned"): 2 * tps,
        ("pg_stat_database", "tup_fetched"): tps,
        ("pg_stat_bgwriter", "buffers_alloc"): 4.0,
    }
    if writes:
        levels |= {
            ("pg_stat_database", "tup_updated"): 3 * tps,
            ("pg_stat_database", "tup_inserted"): tps,
        }
    if writes and version >= 140000:
        levels |= {
            ("pg_stat_wal", "wal_records"): 6 * tps,
            ("pg_stat_wal", "wal_fpi"): 0.1 * tps,
            ("pg_stat_wal", "wal_bytes"): 900 * tps,
        }
    if writes and 140000 <= version < 180000:
        levels |= {("pg_stat_wal", "wal_write"): tps, ("pg_stat_wal", "wal_sync"): tps}
    if version >= 160000:
        levels |= {("pg_stat_io", "relation.hits"): 6 * tps, ("pg_stat_io", "relation.reads"): 3.0}
    if writes and version >= 180000:
        levels |= {
            ("pg_stat_io", "wal.writes"): tps,
            ("pg_stat_io", "wal.fsyncs"): tps,
            ("pg_stat_io", "wal.write_bytes"): 900 * tps,
        }
    return levels


def _wait_levels(spec: dict[str, Any]) -> dict[str, float]:
    """Average benchmark backends per wait event."""
    clients = spec["clients"]
    if spec["workload"] == "select-only":
        return {
            "CPU:CPU": 0.35 * clients,
            "Client:ClientRead": 0.6 * clients,
            "LWLock:BufferMapping": 0.01 * clients,
        }
    return {
        "CPU:CPU": 0.15 * clients,
        "Lock:transactionid": 0.3 * clients,
        "Lock:tuple": 0.05 * clients,
        "LWLock:WALWrite": 0.08 * clients,
        "LWLock:BufferContent": 0.02 * clients,
        "IO:WALSync": 0.1 * clients,
        "IO:DataFileRead": 0.01 * clients,
        "Client:ClientRead": 0.25 * clients,
    }


def write_synthetic(results_dir: Path, plan: SyntheticPlan = SyntheticPlan()) -> Path:
    """A results database (and kept raw outputs) for ``plan``; returns the database path."""
    rng = random.Random(plan.seed)
    path = results_dir / RESULTS_DB
    with Store(path) as store:
        campaign = store.start_campaign(
            plan.name,
            "plan.toml",
            plan.plan_text,
            "digest",
            {"pgbenchlab": "0.1.0", "pgbench": "pgbench (PostgreSQL) 18.1"},
            {"cpu_model": "Test CPU", "cpus": 2, "memory_bytes": 24 * 2**30, "os": "Debian 12"},
        )
        for server in plan.servers:
            facts = ServerFacts(
                server.name,
                "managed",
                server.version,
                int(server.version.split(".")[0]) * 10000,
                dict(server.settings),
                dict(server.settings),
                server.name,
                f"/data/{server.name}",
            )
            store.record_server(campaign, facts, {}, server.description)
        for result in results_of(plan, rng):
            store.record_run(campaign, result)
            _keep_output(results_dir, plan.name, campaign, result)
        store.finish_campaign(campaign, "finished")
    return path


def results_of(plan: SyntheticPlan, rng: random.Random) -> list[RunResult]:
    cells = [
        (server, spec_for(plan, server, scale, workload, clients, rate))
        for server in plan.servers
        for scale in plan.scales
        for workload in plan.workloads
        for clients in plan.clients
        for rate in plan.rates
    ]
    results: list[RunResult] = []
    for repeat in range(1, plan.repeats + 1):  # interleaved, as the runner orders them
        for server, spec in cells:
            results.append(make_result(plan, server, spec, len(results), repeat, rng))
    return results


def _keep_output(results_dir: Path, name: str, campaign: int, r: RunResult) -> None:
    if r.tps is None or r.transactions is None or r.latency_avg_ms is None:
        return
    folder = results_dir / "artifacts" / f"{name}-{campaign}" / f"{r.sequence:04d}-{r.run_key}"
    folder.mkdir(parents=True, exist_ok=True)
    text = pgbench_stdout(r.spec.stored(), r.tps, r.transactions, r.latency_avg_ms)
    (folder / "stdout.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode()))


def run_count(plan: SyntheticPlan) -> int:
    axes = (plan.servers, plan.scales, plan.workloads, plan.clients, plan.rates)
    return math.prod(len(a) for a in axes) * plan.repeats


def add_events(db: Path, events: list[tuple[int, float, str, str]]) -> None:
    """Server events as telemetry stores them: (run id, t, kind, detail)."""
    with sqlite3.connect(db) as connection:
        connection.executemany(
            "INSERT INTO run_events VALUES (?, ?, ?, ?, '{}')", [tuple(e) for e in events]
        )


def add_diagnosis(
    db: Path, run_id: int, verdict: str, evidence: list[str], details: dict[str, Any] | None = None
) -> None:
    """What limited a run, as telemetry's diagnosis stores it (with the version of the rules
    that made it: today's, so the store keeps it as it is)."""
    stored = {"rules_version": RULES_VERSION, **(details or {})}
    with sqlite3.connect(db) as connection:
        connection.execute(
            "INSERT INTO run_diagnosis VALUES (?, ?, ?, ?)",
            (run_id, verdict, json.dumps(evidence), json.dumps(stored)),
        )
