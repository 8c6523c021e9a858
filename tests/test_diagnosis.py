"""The diagnosis rules on hand-made figures: each verdict, its thresholds, and the order that
picks one verdict when several rules match."""

from __future__ import annotations

from dataclasses import replace

from pgbenchlab.analysis.diagnosis import (
    Bottleneck,
    Checkpoint,
    Figures,
    diagnose,
    findings,
    other_load_share,
    wait_group,
)
from pgbenchlab.analysis.telemetry_figures import checkpoints, figures
from pgbenchlab.records.telemetry import (
    Affinity,
    LogEvent,
    Point,
    RunTelemetry,
    SourceStatus,
    Total,
    WaitCount,
)

STEADY = tuple((t, 1000.0) for t in range(1, 11))
# A healthy run: the host half idle, backends mostly waiting for their client.
BASE = Figures(
    duration_s=10.0,
    tps=STEADY,
    waits={("Client", "ClientRead"): 70, ("CPU", "CPU"): 30},
    pgbench_threads=2,
    pgbench_cpu_s=4.0,
    pgbench_wait_s=1.0,
    server_cpu_s=5.0,
    server_wait_s=0.5,
    host_cpus=4,
    cpu_pct={"user": 40.0, "system": 10.0, "iowait": 0.0, "steal": 0.0, "idle": 50.0},
    disk_util_pct=5.0,
    commits=10_000.0,
    blocks_read=0.0,
    blocks_hit=50_000.0,
    wal_syncs=0.0,
)


def verdict(f: Figures) -> Bottleneck:
    return diagnose(f).verdict


def test_a_healthy_run_is_unclear() -> None:
    result = diagnose(BASE)
    assert result.verdict == Bottleneck.UNCLEAR
    assert result.details["wait_shares"]["client"] == 0.7


def test_rate_limited_runs_say_so_when_unclear() -> None:
    assert "rate-limited" in diagnose(replace(BASE, rate_limited=True)).evidence[0]


def test_client_bound_counts_run_queue_wait_as_wanting_cpu() -> None:
    # 1 thread, 6 s on a CPU + 3.5 s waiting for one over 10 s: 95 % saturated.
    f = replace(BASE, pgbench_threads=1, pgbench_cpu_s=6.0, pgbench_wait_s=3.5)
    result = diagnose(f)
    assert result.verdict == Bottleneck.CLIENT_BOUND
    assert "95 %" in result.evidence[0]
    assert verdict(replace(f, pgbench_wait_s=2.5)) != Bottleneck.CLIENT_BOUND  # 85 %


def test_client_bound_names_the_load_generator_pgbench_ran_on() -> None:
    f = replace(BASE, pgbench_threads=1, pgbench_cpu_s=9.5, pgbench_host="lg1")
    assert diagnose(f).evidence[0].startswith("on load generator lg1, pgbench's 1 thread(s)")


def test_lock_bound_names_the_dominant_events() -> None:
    waits = {("Lock", "transactionid"): 50, ("Lock", "tuple"): 10, ("Client", "ClientRead"): 40}
    result = diagnose(replace(BASE, waits=waits))
    assert result.verdict == Bottleneck.LOCK_BOUND
    assert "60 %" in result.evidence[0]
    assert "Lock:transactionid 50 %" in result.evidence[1]


def test_lwlock_contention_is_lock_bound_but_wal_and_buffer_io_waits_are_not() -> None:
    assert wait_group("LWLock", "BufferMapping") == "lock"
    assert wait_group("LWLock", "WALWrite") == "wal"
    assert wait_group("IO", "WALSync") == "wal"
    assert wait_group("IO", "WalSync") == "wal"  # the name from 17 on
    assert wait_group("IPC", "BufferIo") == "io"
    assert wait_group("IPC", "BufferIO") == "io"
    assert wait_group("IO", "DataFileRead") == "io"
    assert wait_group("IPC", "ProcArrayGroupUpdate") == "other"


def test_wal_flush_bound_by_waits_or_by_the_fsync_figure() -> None:
    by_waits = replace(
        BASE, waits={("LWLock", "WALWrite"): 40, ("IO", "WALSync"): 20, ("CPU", "CPU"): 40}
    )
    assert verdict(by_waits) == Bottleneck.WAL_FLUSH_BOUND
    # 8 000 flushes in 10 s against a device that syncs 1 000 times a second: 80 %.
    by_rate = replace(BASE, wal_syncs=8000.0, fsync_per_s=1000.0, fsync_method="fdatasync")
    result = diagnose(by_rate)
    assert result.verdict == Bottleneck.WAL_FLUSH_BOUND
    assert any("80 % of pg_test_fsync's 1000 fdatasync/s" in e for e in result.evidence)
    assert verdict(replace(by_rate, fsync_per_s=20_000.0)) == Bottleneck.UNCLEAR
    busy = replace(BASE, wal_syncs=3000.0, wal_sync_time_ms=7500.0)  # syncing 75 % of the time
    assert verdict(busy) == Bottleneck.WAL_FLUSH_BOUND


def test_io_bound_by_data_file_waits_or_a_busy_device() -> None:
    waits = {("IO", "DataFileRead"): 45, ("Client", "ClientRead"): 55}
    result = diagnose(replace(BASE, waits=waits, blocks_read=30_000.0, blocks_hit=10_000.0))
    assert result.verdict == Bottleneck.IO_BOUND
    assert any("hit ratio 25 %" in e for e in result.evidence)
    device = replace(
        BASE, disk_util_pct=95.0, cpu_pct={**BASE.cpu_pct, "iowait": 30.0, "idle": 20.0}
    )
    assert verdict(device) == Bottleneck.IO_BOUND


def test_server_cpu_bound_needs_a_busy_host_and_a_hungry_server() -> None:
    busy = {"user": 80.0, "system": 17.0, "iowait": 0.0, "steal": 0.0, "idle": 3.0}
    hungry = replace(BASE, cpu_pct=busy, server_cpu_s=25.0, server_wait_s=5.0)
    result = diagnose(hungry)
    assert result.verdict == Bottleneck.SERVER_CPU_BOUND
    assert "server processes used 2.50 of 4 CPUs and wanted 3.00" in result.evidence[1]
    # The host is busy with something else: the server neither wants nor runs much.
    starved_by_others = replace(hungry, server_cpu_s=5.0, server_wait_s=0.0)
    assert verdict(starved_by_others) == Bottleneck.UNCLEAR
    # Backends running in most samples is enough on a busy host.
    running = replace(starved_by_others, waits={("CPU", "CPU"): 60, ("Client", "ClientRead"): 40})
    assert verdict(running) == Bottleneck.SERVER_CPU_BOUND


def test_checkpoint_disturbed_when_a_second_inside_the_window_dips() -> None:
    tps = tuple((t, 500.0 if t == 6 else 1000.0) for t in range(1, 11))
    ckpt = Checkpoint(5.2, 5.6, "checkpoint done")
    result = diagnose(replace(BASE, tps=tps, checkpoints=(ckpt,)))
    assert result.verdict == Bottleneck.CHECKPOINT_DISTURBED
    assert "second 6" in result.evidence[0] and "50 %" in result.evidence[0]
    # A dip of 30 % is within the noise threshold; a dip far from the checkpoint is not its.
    shallow = tuple((t, 700.0 if t == 6 else 1000.0) for t in range(1, 11))
    assert verdict(replace(BASE, tps=shallow, checkpoints=(ckpt,))) == Bottleneck.UNCLEAR
    far = replace(BASE, tps=tps, checkpoints=(Checkpoint(1.5, 2.0, "early"),))
    assert verdict(far) == Bottleneck.UNCLEAR
    # Without a checkpoint, a dip is not attributed to one.
    assert verdict(replace(BASE, tps=tps)) == Bottleneck.UNCLEAR


def test_the_first_and_last_seconds_never_count_as_a_dip() -> None:
    tps = ((1, 100.0), *((t, 1000.0) for t in range(2, 10)), (10, 50.0))
    ends = (Checkpoint(0.0, 1.0, "at start"), Checkpoint(9.5, 10.0, "at end"))
    assert verdict(replace(BASE, tps=tps, checkpoints=ends)) == Bottleneck.UNCLEAR


def test_priority_client_then_checkpoint_then_largest_wait_share_then_cpu() -> None:
    waits = {("Lock", "tuple"): 35, ("LWLock", "WALWrite"): 45, ("CPU", "CPU"): 20}
    busy = {"user": 90.0, "system": 8.0, "iowait": 0.0, "steal": 0.0, "idle": 2.0}
    f = replace(BASE, waits=waits, cpu_pct=busy, server_cpu_s=30.0, server_wait_s=5.0)
    assert [x.verdict for x in findings(f)] == [
        Bottleneck.WAL_FLUSH_BOUND,
        Bottleneck.LOCK_BOUND,
        Bottleneck.SERVER_CPU_BOUND,
    ]
    assert diagnose(f).details["also"] == ["lock_bound", "server_cpu_bound"]
    client = replace(f, pgbench_threads=1, pgbench_cpu_s=9.5, pgbench_wait_s=0.3)
    assert verdict(client) == Bottleneck.CLIENT_BOUND


def test_where_the_backends_waited_outranks_a_busy_wal_disk() -> None:
    # Locks held the backends most of the run; the WAL syncs of the rest kept the disk busy 90 %
    # of the time. The run is lock-bound, the WAL finding kept as "also".
    waits = {("Lock", "relation"): 72, ("LWLock", "WALWrite"): 10, ("CPU", "CPU"): 18}
    f = replace(BASE, waits=waits, wal_syncs=3000.0, wal_sync_time_ms=9000.0)
    assert [x.verdict for x in findings(f)][:2] == [
        Bottleneck.LOCK_BOUND,
        Bottleneck.WAL_FLUSH_BOUND,
    ]
    assert diagnose(f).details["also"][0] == "wal_flush_bound"


def telemetry(**changes: object) -> RunTelemetry:
    base = RunTelemetry(
        started_at=0.0,
        duration_s=6.0,
        server_version_num=180000,
        activity_rounds=30,
        counter_rounds=8,
        sources=(),
        series=(),
        totals=(),
        waits=(),
        events=(),
        statements=(),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


LOG = (SourceStatus("server_log", True),)


def test_checkpoint_windows_from_log_events() -> None:
    events = (
        LogEvent(-3.0, "checkpoint_start", "before the run", {}),
        LogEvent(0.5, "checkpoint_end", "done", {"total_s": 3.5}),
        LogEvent(2.0, "checkpoint_start", "starts", {}),
        LogEvent(2.7, "checkpoint_end", "done", {"total_s": 0.7}),
        LogEvent(4.0, "checkpoint_start", "starts", {}),
    )
    found = checkpoints(telemetry(events=events, sources=LOG))
    assert [(c.start, c.end) for c in found] == [(0.0, 0.5), (2.0, 2.7), (4.0, 6.0)]
    # Started before the capture: only the end line is in the run's log; total_s dates it.
    end = LogEvent(1.0, "checkpoint_end", "x", {"total_s": 0.4})
    only_end = checkpoints(telemetry(events=(end,), sources=LOG))
    assert [(c.start, c.end) for c in only_end] == [(0.6, 1.0)]


def test_checkpoint_windows_from_counters_without_a_server_log() -> None:
    points = (Point("pg_stat_checkpointer", "num_requested", 4, 1.0),)
    found = checkpoints(telemetry(series=points))
    assert [(c.start, c.end) for c in found] == [(3.0, 4.0)]
    with_log = telemetry(series=points, sources=(SourceStatus("server_log", True),))
    assert checkpoints(with_log) == ()  # the log, when read, is the authority


def test_figures_read_wal_syncs_from_pg_stat_io_on_18_and_pg_stat_wal_before() -> None:
    on_18 = telemetry(totals=(Total("pg_stat_io", "wal.fsyncs", 600.0),))
    on_15 = telemetry(totals=(Total("pg_stat_wal", "wal_sync", 700.0),))
    assert figures(on_18, ()).wal_syncs == 600.0
    assert figures(on_15, ()).wal_syncs == 700.0
    assert figures(telemetry(), ()).wal_syncs is None  # absent, not zero
    waits = (WaitCount("Lock", "relation", 20), WaitCount("CPU", "CPU", 10))
    assert figures(telemetry(waits=waits), ()).share("lock") == 20 / 30


def test_other_load_is_the_hosts_busy_share_left_after_server_and_pgbench() -> None:
    # 2 CPUs for 10 s: 70 % busy (iowait counts as idle) = 14 CPU-s; server 6 + pgbench 2 = 8.
    cpu = {"user": 50.0, "system": 15.0, "steal": 5.0, "iowait": 10.0, "idle": 20.0}
    f = Figures(duration_s=10, host_cpus=2, cpu_pct=cpu, server_cpu_s=6.0, pgbench_cpu_s=2.0)
    assert other_load_share(f) == 0.3
    assert diagnose(f).details["other_load_share"] == 0.3
    assert other_load_share(replace(f, server_cpu_s=20.0)) == 0.0  # never negative
    assert other_load_share(replace(f, server_cpu_s=None)) is None  # an external server
    assert "other_load_share" not in diagnose(replace(f, cpu_pct={})).details


# -- pinning: the CPUs the kernel allowed (read back) set the capacity -----------------------------

PINNED = replace(
    BASE, host_cpus=2, clients=16, cpu_pct={"user": 60.0, "system": 20.0, "idle": 20.0}
)


def test_a_pgbench_pinned_to_fewer_cpus_than_its_threads_is_named_the_limit() -> None:
    # 4 threads on 1 CPU for 10 s: 9.5 s on it + 14 s waiting for it. Per thread that is only
    # 59 % (the unpinned rule would not call it), but the one CPU it may use was saturated.
    f = replace(PINNED, pgbench_threads=4, pgbench_cpu_s=9.5, pgbench_wait_s=14.0)
    assert verdict(f) != Bottleneck.CLIENT_BOUND
    result = diagnose(replace(f, pgbench_cpus="1"))
    assert result.verdict == Bottleneck.CLIENT_BOUND
    assert result.evidence[0].startswith("pgbench was pinned to CPU 1 (1 of the host's 2)")
    # Pinned to every CPU is no pinning; on one CPU but idle half the time, not the limit.
    assert verdict(replace(f, pgbench_cpus="0-1")) != Bottleneck.CLIENT_BOUND
    idle = replace(f, pgbench_cpus="1", pgbench_cpu_s=4.0, pgbench_wait_s=1.0)
    assert verdict(idle) != Bottleneck.CLIENT_BOUND


def test_a_server_pinned_to_one_cpu_that_it_fills_is_cpu_bound_and_says_so() -> None:
    # The host is only 80 % busy (the unpinned rule wants 90 %), but the server's one CPU is full.
    f = replace(PINNED, server_cpu_s=9.4, server_wait_s=0.3)
    assert verdict(f) != Bottleneck.SERVER_CPU_BOUND
    result = diagnose(replace(f, server_cpus="0"))
    assert result.verdict == Bottleneck.SERVER_CPU_BOUND
    assert (
        "the server was pinned to CPU 0 (1 of the host's 2) and wanted 0.97 CPUs there"
        in result.evidence[0]
    )
    note = "pinned to CPU 0 (1 of the host's 2) for 16 clients: at most 1 of their backends"
    assert note in result.evidence[-1] and note in result.details["pinning"]


def test_a_server_pinned_to_fewer_cpus_than_clients_is_stated_whatever_the_verdict() -> None:
    result = diagnose(replace(PINNED, server_cpus="0", server_cpu_s=2.0, server_wait_s=0.0))
    assert result.verdict == Bottleneck.UNCLEAR
    assert "for 16 clients" in result.details["pinning"]
    assert "pinning" not in diagnose(replace(PINNED, server_cpus="0", clients=1)).details


def test_figures_take_the_cpus_all_of_a_roles_processes_agreed_on() -> None:
    agreed = Affinity("server", "0", ("0",), 12)
    mixed = Affinity("pgbench", None, ("0", "0-1"), 2)
    found = figures(telemetry(affinity=(agreed, mixed)), ())
    assert (found.server_cpus, found.pgbench_cpus) == ("0", None)
    assert agreed.verified and not replace(agreed, observed=("0-1",)).verified
    assert mixed.verified is None
