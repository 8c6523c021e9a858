"""A run's `Figures` for the diagnosis, taken from its telemetry: totals, wait samples,
checkpoint windows (server log, else the statistics views' counters) and the CPUs the server's
processes and pgbench were allowed."""

from __future__ import annotations

from collections.abc import Sequence

from pgbenchlab.analysis.diagnosis import Checkpoint, Figures
from pgbenchlab.records.telemetry import RunTelemetry

CHECKPOINT_COUNTERS = (
    ("pg_stat_checkpointer", "num_timed"),
    ("pg_stat_checkpointer", "num_requested"),
    ("pg_stat_bgwriter", "checkpoints_timed"),
    ("pg_stat_bgwriter", "checkpoints_req"),
)


def checkpoints(telemetry: RunTelemetry) -> tuple[Checkpoint, ...]:
    """Checkpoint windows from the server log (a start without an end lasts to the run's end);
    without the log (an external server), the seconds in which a checkpoint was counted."""
    if not telemetry.available("server_log"):
        return counted_checkpoints(telemetry)
    found, open_start = [], None
    for event in telemetry.events:
        if event.kind == "checkpoint_start":
            open_start = event.t
        elif event.kind == "checkpoint_end":
            total = event.detail.get("total_s")
            start = open_start if open_start is not None else event.t - float(total or 0)  # type: ignore[arg-type]
            found.append(Checkpoint(max(start, 0.0), event.t, event.summary))
            open_start = None
    if open_start is not None:
        found.append(Checkpoint(open_start, telemetry.duration_s, "still running at the end"))
    return tuple(found)


def counted_checkpoints(telemetry: RunTelemetry) -> tuple[Checkpoint, ...]:
    seconds = sorted(
        {
            t
            for source, metric in CHECKPOINT_COUNTERS
            for t, v in telemetry.points(source, metric)
            if v > 0
        }
    )
    return tuple(Checkpoint(t - 1.0, float(t), "counted by the statistics views") for t in seconds)


def figures(
    telemetry: RunTelemetry,
    tps: Sequence[tuple[int, float]],
    *,
    fsync_per_s: float | None = None,
    fsync_method: str | None = None,
    rate_limited: bool = False,
    clients: int | None = None,
    pgbench_host: str | None = None,
) -> Figures:
    total = telemetry.total
    wal_syncs = total("pg_stat_wal", "wal_sync")
    if wal_syncs is None:  # 18: WAL syncs are in pg_stat_io
        wal_syncs = total("pg_stat_io", "wal.fsyncs")
    sync_time = total("pg_stat_wal", "wal_sync_time") or total("pg_stat_io", "wal.fsync_time")
    cpu = {
        k: v
        for k in ("user", "system", "iowait", "steal", "idle")
        if (v := total("cpu", f"{k}_pct")) is not None
    }
    return Figures(
        duration_s=telemetry.duration_s,
        tps=tuple(tps),
        waits={(w.wait_event_type, w.wait_event): w.samples for w in telemetry.waits},
        pgbench_threads=telemetry.pgbench_threads,
        pgbench_cpu_s=total("processes", "pgbench_cpu_s"),
        pgbench_wait_s=total("processes", "pgbench_wait_s"),
        server_cpu_s=total("processes", "server_cpu_s"),
        server_wait_s=total("processes", "server_wait_s"),
        host_cpus=telemetry.host_cpus,
        cpu_pct=cpu,
        disk_util_pct=total("disk", "util_pct"),
        disk_await_ms=total("disk", "await_ms"),
        commits=total("pg_stat_database", "xact_commit"),
        blocks_read=total("pg_stat_database", "blks_read"),
        blocks_hit=total("pg_stat_database", "blks_hit"),
        wal_syncs=wal_syncs,
        wal_sync_time_ms=sync_time,
        fsync_per_s=fsync_per_s,
        fsync_method=fsync_method,
        checkpoints=checkpoints(telemetry),
        rate_limited=rate_limited,
        clients=clients,
        pgbench_host=pgbench_host,
        pgbench_cpus=allowed(telemetry, "pgbench"),
        server_cpus=allowed(telemetry, "server"),
    )


def allowed(telemetry: RunTelemetry, role: str) -> str | None:
    """The CPU list the kernel allowed all of a role's processes, when they agreed."""
    found = telemetry.affinity_of(role)
    return found.cpus if found is not None else None
