"""Telemetry parsers without a server: server-log events (golden logs captured from real 15,
16 and 18 servers by tests/golden/serverlog/capture_serverlog.py), pg_test_fsync's report
(captured from 15 and 18), mountinfo, /proc counters (a fake /proc) and the version-aware
statistics queries."""

from __future__ import annotations

import re
from pathlib import Path, PurePath

import pytest

from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.hosts.local import LocalHost
from pgbenchlab.telemetry import osstats, pgstats
from pgbenchlab.telemetry.affinity import PGBENCH, AffinityWatch
from pgbenchlab.telemetry.fsync import parse_one_write
from pgbenchlab.telemetry.machine import parse_mountinfo, parse_pg_config
from pgbenchlab.telemetry.serverlog import parse_events, records

GOLDEN = Path(__file__).parent / "golden"


def golden_events(major: str) -> list:  # type: ignore[type-arg]
    text = (GOLDEN / "serverlog" / f"pg{major}.log").read_text()
    t0 = next(records(text)).at
    return parse_events(text, t0)


@pytest.mark.parametrize("major", ["15", "16", "18"])
def test_checkpoints_from_real_logs(major: str) -> None:
    events = golden_events(major)
    starts = [e for e in events if e.kind == "checkpoint_start"]
    ends = [e for e in events if e.kind == "checkpoint_end"]
    assert [e.detail["flags"] for e in starts] == [["immediate", "force", "wait"], ["wal"], ["wal"]]
    assert len(ends) == 2  # the last WAL-requested checkpoint was still spreading its writes
    first = ends[0].detail
    assert first["sync_files"] == 37 and first["what"] == "checkpoint"
    for key in ("buffers", "buffers_pct", "write_s", "sync_s", "total_s", "distance_kb"):
        assert isinstance(first[key], int | float), key
    assert starts[0].t == 0.0 and 0 < ends[0].t < 1
    assert len([e for e in events if e.kind == "checkpoint_warning"]) == 2


def test_checkpoint_figures_of_15_exactly() -> None:
    end = next(e for e in golden_events("15") if e.kind == "checkpoint_end")
    assert end.detail == {
        "pid": 14551,
        "what": "checkpoint",
        "buffers": 704,
        "buffers_pct": 4.3,
        "wal_added": 0,
        "wal_removed": 0,
        "wal_recycled": 0,
        "write_s": 0.007,
        "sync_s": 0.006,
        "total_s": 0.015,
        "sync_files": 37,
        "sync_longest_s": 0.001,
        "sync_average_s": 0.001,
        "distance_kb": 6767,
        "estimate_kb": 6767,
    }
    assert end.t == 0.014
    assert end.summary == "checkpoint done: 704 buffers, write 0.007 s, sync 0.006 s"


@pytest.mark.parametrize(("major", "requested"), [("9.6", "xlog"), ("12", "wal")])
def test_checkpoints_of_older_majors_have_every_figure(major: str, requested: str) -> None:
    """9.6 says "transaction log file(s)" (WAL from 10) and "xlog" for a WAL-requested one."""
    events = golden_events(major)
    starts = [e.detail["flags"] for e in events if e.kind == "checkpoint_start"]
    assert starts[:2] == [["immediate", "force", "wait"], [requested]]
    ends = [e.detail for e in events if e.kind == "checkpoint_end"]
    assert len(ends) >= 2 and sum(e["wal_removed"] for e in ends) >= 1
    for end in ends:
        for key in ("buffers", "wal_added", "wal_recycled", "write_s", "sync_files", "distance_kb"):
            assert isinstance(end[key], int | float), (key, end)
    assert len([e for e in events if e.kind == "checkpoint_warning"]) >= 2
    errors = [e.summary for e in events if e.kind == "error"]
    assert errors == [
        "ERROR: division by zero",
        "ERROR: deadlock detected",
        'FATAL: database "no_such_database" does not exist',
    ]
    assert len([e for e in events if e.kind == "lock_wait"]) == 2


def test_checkpoint_figures_of_18_include_slru_buffers() -> None:
    end = next(e for e in golden_events("18") if e.kind == "checkpoint_end")
    assert (end.detail["buffers"], end.detail["slru_buffers"]) == (701, 3)
    assert (end.detail["write_s"], end.detail["sync_s"], end.detail["total_s"]) == (
        0.008,
        0.019,
        0.052,
    )


@pytest.mark.parametrize("major", ["15", "18"])
def test_autovacuum_lock_waits_and_errors_from_real_logs(major: str) -> None:
    events = golden_events(major)
    vacuum = [
        e for e in events if e.kind == "autovacuum" and e.detail["table"] == "postgres.public.t"
    ]
    assert len(vacuum) == 1
    assert isinstance(vacuum[0].detail["elapsed_s"], float)
    assert "tuples: 9997 removed" in str(vacuum[0].detail["text"]) or major != "15"
    assert any(e.kind == "autoanalyze" and e.detail["table"] == "postgres.public.t" for e in events)
    errors = [e for e in events if e.kind == "error"]
    assert [e.summary for e in errors] == [
        "ERROR: division by zero",
        "ERROR: deadlock detected",
        'FATAL: database "no_such_database" does not exist',
    ]
    assert errors[0].detail["statement"] == "SELECT 1 / 0"
    assert "blocked by process" in str(errors[1].detail["detail"])
    waits = [e for e in events if e.kind == "lock_wait"]
    assert len(waits) == 2 and "still waiting for ShareLock" in waits[0].summary
    assert [e.t for e in events] == sorted(e.t for e in events)


def test_multi_line_detail_keeps_its_continuation_lines() -> None:
    deadlock = next(e for e in golden_events("15") if e.summary == "ERROR: deadlock detected")
    detail = str(deadlock.detail["detail"]).splitlines()
    assert len(detail) == 4 and detail[3].strip().startswith("Process")


@pytest.mark.parametrize("major", ["15", "16", "18"])
def test_debians_log_line_prefix_gives_the_same_events(major: str) -> None:
    """Debian's '%m [%p] %q%u@%d ' adds "user@database " to a session's lines (an external
    server's log): the real log with it added to the lines that name an error gives the same
    events."""
    text = (GOLDEN / "serverlog" / f"pg{major}.log").read_text()
    session = re.compile(r"^(\S+ \S+ UTC \[\d+\] )(ERROR|FATAL|STATEMENT|DETAIL|HINT|CONTEXT):")
    debian = "\n".join(session.sub(r"\1bench@bench \2:", line) for line in text.splitlines())
    assert debian.count("bench@bench ERROR:") >= 2
    t0 = next(records(text)).at
    assert parse_events(debian + "\n", t0) == parse_events(text, t0)


def test_log_tail_reads_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("2026-01-01 00:00:00.000 UTC [1] LOG:  old line\n")
    tail = LOCAL_HOST.follow(log)
    with log.open("a") as f:
        f.write("2026-01-01 00:00:01.500 UTC [1] LOG:  checkpoint starting: time\n")
        f.write("2026-01-01 00:00:02.000 UTC [1] LOG:  checkpoint comp")  # still being written
    text = tail.read()
    assert "old line" not in text and "comp" not in text
    (event,) = parse_events(text, t0=records(text).__next__().at - 1.5)
    assert (event.kind, event.t) == ("checkpoint_start", 1.5)


def test_pg_test_fsync_one_write_section() -> None:
    found = parse_one_write((GOLDEN / "telemetry" / "pg_test_fsync-15.txt").read_text())
    assert set(found) == {"open_datasync", "fdatasync", "fsync", "open_sync"}  # not n/a
    assert found["fdatasync"] == 4843.218
    on_18 = parse_one_write((GOLDEN / "telemetry" / "pg_test_fsync-18.txt").read_text())
    assert on_18["fdatasync"] == 3513.638
    assert parse_one_write("pg_test_fsync: could not open output file") == {}


def test_mountinfo_and_pg_config() -> None:
    text = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
        "40 27 0:38 / /mnt/with\\040space rw,nosuid - tmpfs tmpfs rw,size=4k\n"
        "41 27 8:1 / /data rw,noatime shared:1 - xfs /dev/sda1 rw,attr2,inode64\n"
    )
    mounts = parse_mountinfo(text)
    assert mounts["254:0"][0].fs_type == "ext4"
    assert mounts["0:38"][0].mount_point == "/mnt/with space"
    data = mounts["8:1"][0]
    assert (data.mount_options, data.super_options, data.source) == (
        "rw,noatime",
        "rw,attr2,inode64",
        "/dev/sda1",
    )
    config = parse_pg_config("BINDIR = /usr/bin\nCONFIGURE =  '--with-lz4' '--with-zstd'\n")
    assert config == {"BINDIR": "/usr/bin", "CONFIGURE": "'--with-lz4' '--with-zstd'"}


# -- /proc ---------------------------------------------------------------------------------------


def fake_proc(root: Path, tick: int) -> Path:
    """A /proc with a postmaster (100) with two children and a two-thread pgbench (200)."""

    def write(path: str, text: str) -> None:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)

    n = tick
    write("stat", f"cpu  {100 + 60 * n} 0 {50 + 20 * n} {800 + 10 * n} {10 + 10 * n} 0 0 0 0 0\n")
    write("meminfo", f"MemTotal: 1000 kB\nDirty: {2048 * (n + 1)} kB\nWriteback: 0 kB\n")
    sectors, ios, ms, io_ms = 800 + 2048 * n, 100 + 50 * n, 50 + 25 * n, 120 + 500 * n
    vda = f"{ios} 0 {sectors} {ms} {ios} 0 {sectors} {ms} 0 {io_ms} 0"
    write("diskstats", f"   7  0 loop0 0 0 0 0 0 0 0 0 0 0 0\n 254  0 vda {vda}\n")
    # postmaster: utime 5, stime 5, cutime grows as children exit (ticks of 1/SC_CLK_TCK s).
    reaped = LOCAL_HOST.clock_ticks_per_s() * n
    write("100/stat", f"100 (postgres: main) S 1 100 100 0 -1 0 0 0 0 0 5 5 {reaped} 0 20 0\n")
    write("100/schedstat", f"{10**8} 0 5\n")
    write("100/task/100/children", "101 102")
    for pid in (101, 102):
        write(f"{pid}/schedstat", f"{n * 10**9} {n * 5 * 10**8} 9\n")
    for tid in (200, 201):
        write(f"200/task/{tid}/schedstat", f"{n * 4 * 10**8} {n * 10**8} 9\n")
    return root


def test_os_sampler_reads_and_derives(tmp_path: Path) -> None:
    sampler = osstats.OsSampler(fake_proc(tmp_path, 0), postmaster_pid=100, disk_device="254:0")
    first = sampler.sample()
    assert first["processes"]["pgbench_cpu_s"] == 0.0  # pgbench has not started
    sampler.pgbench_pid = 200
    fake_proc(tmp_path, 1)
    second = sampler.sample()
    cpu = osstats.derive_cpu(first["cpu"], second["cpu"])
    assert cpu == {
        "user_pct": 60.0,
        "system_pct": 20.0,
        "iowait_pct": 10.0,
        "steal_pct": 0.0,
        "idle_pct": 10.0,
    }
    assert second["memory"] == {"dirty_mb": 4.0, "writeback_mb": 0.0}
    disk = osstats.derive_disk(first["disk"], second["disk"], 0.5)
    assert disk["reads_per_s"] == 100.0 and disk["read_mb_per_s"] == 2.0
    assert disk["util_pct"] == 100.0 and disk["await_ms"] == 0.5
    processes = second["processes"]
    # Postmaster 0.1 s + reaped 1 s + two children 1 s each; children waited 0.5 s each.
    assert processes["server_cpu_s"] == pytest.approx(3.1)
    assert processes["server_wait_s"] == pytest.approx(1.0)
    assert processes["pgbench_cpu_s"] == pytest.approx(0.8)
    assert processes["pgbench_wait_s"] == pytest.approx(0.2)
    for tid in ("200", "201"):  # pgbench exits: its last figures stand
        (tmp_path / "200" / "task" / tid / "schedstat").unlink()
    assert sampler.sample()["processes"]["pgbench_cpu_s"] == pytest.approx(0.8)


class Elsewhere(LocalHost):
    """Another host: its /proc (`here` in the caller's paths) is this machine's `there`."""

    name = "lg1"

    def __init__(self, here: Path, there: Path) -> None:
        super().__init__()
        self.here, self.there = here, there

    def _moved(self, path: PurePath) -> PurePath:
        return self.there / PurePath(path).relative_to(self.here)

    def read_text(self, path: PurePath) -> str:
        return super().read_text(self._moved(path))

    def list_dir(self, path: PurePath) -> list[str]:
        return super().list_dir(self._moved(path))


def test_pgbench_on_a_load_generator_is_read_on_its_host(tmp_path: Path) -> None:
    server, generator = fake_proc(tmp_path / "db1", 1), fake_proc(tmp_path / "lg1", 1)
    for tid in ("200", "201"):  # pgbench's pid names nothing on the server's host
        (server / "200" / "task" / tid / "schedstat").unlink()
    (generator / "200" / "status").write_text("Name:\tpgbench\nCpus_allowed_list:\t0-3\n")
    lg1 = Elsewhere(server, generator)
    sampler = osstats.OsSampler(server, postmaster_pid=100, pgbench_host=lg1)
    sampler.pgbench_pid = 200
    processes = sampler.sample()["processes"]
    assert processes["server_cpu_s"] == pytest.approx(3.1)  # the server's, on its own host
    assert (processes["pgbench_cpu_s"], processes["pgbench_wait_s"]) == pytest.approx((0.8, 0.2))
    affinity = AffinityWatch(server, LOCAL_HOST, pgbench_host=lg1)
    affinity.check(None, 200)
    assert [(a.role, a.observed) for a in affinity.result()] == [(PGBENCH, ("0-3",))]


def test_a_device_missing_from_diskstats_is_absent(tmp_path: Path) -> None:
    sampler = osstats.OsSampler(fake_proc(tmp_path, 0), disk_device="8:16")
    assert "disk" not in sampler.sample()


# -- version-aware statistics queries -------------------------------------------------------------


def test_counter_query_per_version() -> None:
    on_15 = pgstats.CounterQuery.build(150004)
    assert set(on_15.columns) == {"pg_stat_database", "pg_stat_bgwriter", "pg_stat_wal"}
    assert "checkpoints_timed" in on_15.columns["pg_stat_bgwriter"]
    assert on_15.absent["pg_stat_io"] == "PostgreSQL 15 has no pg_stat_io (it came in 16)"
    assert "pg_stat_checkpointer" in on_15.absent
    on_16 = pgstats.CounterQuery.build(160002)
    assert "pg_stat_io" in on_16.columns and "read_bytes" not in on_16.columns["pg_stat_io"]
    on_18 = pgstats.CounterQuery.build(180001)
    assert on_18.columns["pg_stat_bgwriter"] == (
        "buffers_clean",
        "maxwritten_clean",
        "buffers_alloc",
    )
    assert "num_done" in on_18.columns["pg_stat_checkpointer"]
    assert "wal_sync" not in on_18.columns["pg_stat_wal"]
    assert "read_bytes" in on_18.columns["pg_stat_io"]
    assert not on_18.absent
    on_13 = pgstats.CounterQuery.build(130010)
    assert on_13.absent["pg_stat_wal"] == "PostgreSQL 13 has no pg_stat_wal (it came in 14)"
    assert pgstats.CounterQuery.build(90624).absent["pg_stat_wal"].startswith("PostgreSQL 9.6 ")


def test_timing_columns_need_their_settings() -> None:
    off = pgstats.ServerSettings(180000, {"track_io_timing": "off", "track_wal_io_timing": "on"})
    assert off.timing_setting("pg_stat_io", "read_time", "relation") == "track_io_timing"
    assert off.timing_setting("pg_stat_io", "fsync_time", "wal") == "track_wal_io_timing"
    assert off.timing_setting("pg_stat_wal", "wal_sync_time") == "track_wal_io_timing"
    assert off.timing_setting("pg_stat_checkpointer", "write_time") is None
    notes = pgstats.CounterQuery.build(180000).notes(off)
    assert "read_time (needs track_io_timing)" in notes["pg_stat_io"]
    assert "pg_stat_checkpointer" not in notes
