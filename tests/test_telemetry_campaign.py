"""Telemetry and diagnosis on real servers: one campaign on PostgreSQL 15 (Debian) and 18
(embedded) whose runs are each built to cause one verdict, and the version-specific views as
they were stored.

Each run is made to exhibit its case:

- cpu: select-only, 8 clients on a 2-thread pgbench: the host's CPUs are all busy serving.
- client: a script of 300 ``\\set`` meta-commands and ``SELECT 1`` with one pgbench thread for
  8 clients: pgbench's thread is saturated while the backends wait for it.
- lock: tpcb-like while another session holds an ACCESS EXCLUSIVE lock on pgbench_accounts for
  about 2.5 s of the 4 s run. (The simple protocol: with -M prepared, pgbench prepares
  synchronously, so a blocked Parse stalls its thread and the thread's other client idles.)
- wal: single-row inserts from 4 clients: every commit waits for a WAL flush.
- checkpoint: transactions updating 20 random rows of a 600 MB table (scale 40), with
  wal_compression = pglz, and a CHECKPOINT issued 4.5 s into the 10 s run: after it every
  first touch of a page writes a compressed full-page image, and TPS drops for a second or two.
  (A checkpoint's writes alone are too quick to hurt on this machine's fast disk.) The 8 s
  warmup, after the hygiene checkpoint, touches nearly every page first, so before the
  mid-run checkpoint few updates write a full-page image and after it nearly all do: the dip
  stands out even when the host is slow or busy (with a 3 s warmup it sometimes did not).
- io: select-only with 128 kB of shared buffers while the table's and its index's pages are
  dropped from the OS page cache every 50 ms (as on a machine whose memory is smaller than the
  data), so most misses read the device.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgbenchlab import osuser, plan
from pgbenchlab.campaign import RESULTS_DB, remove_clusters, run_campaign
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.plan import RunSpec
from pgbenchlab.server import SUPERUSER, Endpoint
from pgbenchlab.telemetry.campaign import FSYNC_TEST_ENV
from support import QuietReporter, require_installs, run_errors

# alone: each verdict is caused by a run built to cause it
pytestmark = [pytest.mark.server, pytest.mark.alone]

CLIENT_SCRIPT = "".join(f"\\set x{i} random(1, 100000) * 3 + {i}\n" for i in range(300)) + (
    "SELECT 1;\n"
)
WAL_SCRIPT = (
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 1, now());\n"
)
MANY_SCRIPT = (
    "".join(f"\\set a{i} random(1, 100000 * :scale)\n" for i in range(20))
    + "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid IN ("
    + ", ".join(f":a{i}" for i in range(20))
    + ");\n"
)
WORKLOADS = """
workload = [
  { name = "cpu", builtin = "select-only", clients = 8 },
  { name = "client", script = "client.sql", clients = 8, threads = 1 },
  { name = "lock", builtin = "tpcb-like", clients = 4, protocol = "simple" },
  { name = "wal", script = "wal.sql", clients = 4 },
  { name = "checkpoint", script = "many.sql", clients = 4, warmup = "8s", duration = "10s" },
]
"""
PLAN = f"""
[campaign]
name = "verdicts"

[defaults]
duration = "4s"
warmup = "1s"
latency_log = "off"

[matrix]
scale = 5

[[server]]
name = "pg15"
install = "15"
scale = 40
settings = {{ shared_buffers = "1GB", wal_compression = "pglz" }}
{WORKLOADS}

[[server]]
name = "pg18"
install = "embedded"
scale = 40
{WORKLOADS}
[server.settings]
shared_buffers = "1GB"
wal_compression = "pglz"
shared_preload_libraries = "pg_stat_statements"
track_io_timing = "on"

[[server]]
name = "pg15io"
install = "15"
settings = {{ shared_buffers = "128kB" }}
workload = [{{ name = "io", builtin = "select-only", clients = 4 }}]

[[server]]
name = "pg18io"
install = "embedded"
settings = {{ shared_buffers = "128kB" }}
workload = [{{ name = "io", builtin = "select-only", clients = 4 }}]
"""


def server_endpoint(results: Path, server: str, dbname: str) -> Endpoint:
    """Reach a campaign's managed server from outside the runner (port and socket from
    postmaster.pid)."""
    root = cluster_root(results, osuser.server_account())
    lines = (root / "verdicts" / server / "data" / "postmaster.pid").read_text().splitlines()
    return Endpoint(lines[4], int(lines[3]), SUPERUSER, dbname)


def hold_lock(endpoint: Endpoint) -> None:
    with endpoint.connect(autocommit=False) as conn:
        conn.execute("LOCK TABLE pgbench_accounts IN ACCESS EXCLUSIVE MODE")
        time.sleep(3.0)  # pgbench starts ~0.5 s after the "measuring" phase
        conn.commit()


def checkpoint_midway(endpoint: Endpoint) -> None:
    time.sleep(4.5)
    with endpoint.connect() as conn:
        conn.execute("CHECKPOINT")


def evict_from_page_cache(endpoint: Endpoint, data_dir: Path, seconds: float = 6.0) -> None:
    """Keep pgbench_accounts and its index out of the OS page cache during the run."""
    with endpoint.connect() as conn:
        rows = conn.execute(
            "SELECT pg_relation_filepath(c) FROM unnest(ARRAY["
            "'pgbench_accounts'::regclass, 'pgbench_accounts_pkey'::regclass]) c"
        ).fetchall()
    files = [p for (rel,) in rows for p in data_dir.glob(f"{rel}*")]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        time.sleep(0.05)


class Saboteur(QuietReporter):
    """Starts each run's disturbance when the runner reports the measured phase."""

    def __init__(self, results: Path) -> None:
        super().__init__()
        self.results = results
        self.threads: list[threading.Thread] = []

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text != "measuring":
            return
        endpoint = server_endpoint(self.results, spec.server, f"pgbench_s{spec.scale}")
        data_dir = endpoint_data_dir(self.results, spec.server)
        actions: dict[tuple[str, str], Callable[[], None]] = {
            ("pg15", "lock"): lambda: hold_lock(endpoint),
            ("pg18", "lock"): lambda: hold_lock(endpoint),
            ("pg15", "checkpoint"): lambda: checkpoint_midway(endpoint),
            ("pg18", "checkpoint"): lambda: checkpoint_midway(endpoint),
            ("pg15io", "io"): lambda: evict_from_page_cache(endpoint, data_dir),
            ("pg18io", "io"): lambda: evict_from_page_cache(endpoint, data_dir),
        }
        action = actions.get((spec.server, spec.workload.name))
        if action is not None:
            thread = threading.Thread(target=action, daemon=True)
            thread.start()
            self.threads.append(thread)


def endpoint_data_dir(results: Path, server: str) -> Path:
    return cluster_root(results, osuser.server_account()) / "verdicts" / server / "data"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    require_installs("15", "embedded")
    base = tmp_path_factory.mktemp("verdicts")
    for name, text in (("client", CLIENT_SCRIPT), ("wal", WAL_SCRIPT), ("many", MANY_SCRIPT)):
        (base / f"{name}.sql").write_text(text)
    the_plan = plan.parse(PLAN, str(base / "verdicts.toml"), base=base)
    results = base / "results"
    reporter = Saboteur(results)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(FSYNC_TEST_ENV, "on")  # the WAL-flush rule's evidence needs it
            outcome = run_campaign(the_plan, results, reporter)
        for thread in reporter.threads:
            thread.join()
        assert outcome.failed == 0, run_errors(outcome)
        db = sqlite3.connect(results / RESULTS_DB)
        db.row_factory = sqlite3.Row
        yield db
        db.close()
    finally:
        remove_clusters(results)


def runs(db: sqlite3.Connection) -> dict[tuple[str, str], sqlite3.Row]:
    rows = db.execute(
        "SELECT r.id, r.server, r.workload, r.status, r.tps, d.verdict, d.evidence_json, "
        "d.details_json FROM latest_runs r LEFT JOIN run_diagnosis d ON d.run_id = r.id"
    ).fetchall()
    return {(r["server"], r["workload"]): r for r in rows}


EXPECTED = {
    "cpu": "server_cpu_bound",
    "client": "client_bound",
    "lock": "lock_bound",
    "wal": "wal_flush_bound",
    "checkpoint": "checkpoint_disturbed",
    "io": "io_bound",
}


@pytest.mark.parametrize("server", ["pg15", "pg18"])
@pytest.mark.parametrize("case", list(EXPECTED))
def test_each_verdict_on_a_run_built_to_cause_it(
    campaign: sqlite3.Connection, server: str, case: str
) -> None:
    run = runs(campaign)[(server + ("io" if case == "io" else ""), case)]
    assert run["status"] == "ok"
    evidence = json.loads(run["evidence_json"])
    assert run["verdict"] == EXPECTED[case], (evidence, json.loads(run["details_json"]))
    assert evidence and all(isinstance(e, str) and e for e in evidence)


def test_every_run_has_telemetry_and_a_verdict(campaign: sqlite3.Connection) -> None:
    counts = campaign.execute(
        "SELECT count(*), count(t.run_id), count(d.run_id) FROM latest_runs r "
        "LEFT JOIN run_telemetry t ON t.run_id = r.id LEFT JOIN run_diagnosis d ON d.run_id = r.id"
    ).fetchone()
    assert tuple(counts) == (12, 12, 12)
    errors = campaign.execute("SELECT errors_json FROM run_telemetry").fetchall()
    assert {e[0] for e in errors} == {"[]"}
    # 5 pg_stat_activity samples a second, the cumulative views once a second.
    for row in campaign.execute("SELECT * FROM run_telemetry"):
        assert row["activity_rounds"] >= 4 * row["duration_s"] - 2
        assert row["counter_rounds"] >= row["duration_s"]


def sources(db: sqlite3.Connection, server: str) -> dict[str, tuple[int, str]]:
    rows = db.execute(
        "SELECT s.source, s.available, s.note FROM run_telemetry_sources s "
        "JOIN runs r ON r.id = s.run_id WHERE r.server = ? AND r.workload = 'wal'",
        (server,),
    ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def totals(db: sqlite3.Connection, server: str, workload: str) -> dict[tuple[str, str], float]:
    rows = db.execute(
        "SELECT t.source, t.metric, t.value FROM run_telemetry_totals t "
        "JOIN runs r ON r.id = t.run_id WHERE r.server = ? AND r.workload = ?",
        (server, workload),
    ).fetchall()
    return {(r[0], r[1]): r[2] for r in rows}


def test_version_specific_views_on_15(campaign: sqlite3.Connection) -> None:
    found = sources(campaign, "pg15")
    assert found["pg_stat_bgwriter"][0] == 1
    assert found["pg_stat_checkpointer"] == (
        0,
        "PostgreSQL 15 has no pg_stat_checkpointer (it came in 17)",
    )
    assert found["pg_stat_io"] == (0, "PostgreSQL 15 has no pg_stat_io (it came in 16)")
    assert "track_wal_io_timing" in found["pg_stat_wal"][1]
    assert found["pg_stat_statements"][0] == 0
    values = totals(campaign, "pg15", "wal")
    assert not [
        k for k in values if k[0] in ("pg_stat_io", "pg_stat_checkpointer")
    ]  # absent, not 0
    assert ("pg_stat_wal", "wal_sync_time") not in values  # timing off: absent, not 0
    assert values[("pg_stat_wal", "wal_sync")] > 100
    assert values[("pg_stat_bgwriter", "checkpoints_req")] == 0
    assert values[("pg_stat_database", "tup_inserted")] > 100


def test_version_specific_views_on_18(campaign: sqlite3.Connection) -> None:
    found = sources(campaign, "pg18")
    for view in ("pg_stat_bgwriter", "pg_stat_checkpointer", "pg_stat_wal", "pg_stat_io"):
        assert found[view][0] == 1, view
    assert found["pg_stat_statements"] == (1, "")
    values = totals(campaign, "pg18", "wal")
    assert values[("pg_stat_io", "wal.fsyncs")] > 100  # 18 counts WAL syncs in pg_stat_io
    assert ("pg_stat_wal", "wal_sync") not in values
    assert ("pg_stat_bgwriter", "checkpoints_timed") not in values
    assert ("pg_stat_checkpointer", "num_done") in values
    ckpt = totals(campaign, "pg18", "checkpoint")
    assert ckpt[("pg_stat_checkpointer", "num_requested")] >= 1
    assert ckpt[("pg_stat_checkpointer", "buffers_written")] > 1000


def test_statements_on_18(campaign: sqlite3.Connection) -> None:
    rows = campaign.execute(
        "SELECT s.* FROM run_statements s JOIN runs r ON r.id = s.run_id "
        "WHERE r.server = 'pg18' AND r.workload = 'wal' ORDER BY rank"
    ).fetchall()
    assert rows[0]["query"].startswith("INSERT INTO pgbench_history")
    assert rows[0]["calls"] > 100 and rows[0]["total_time_ms"] > 0


@pytest.mark.parametrize("server", ["pg15", "pg18"])
def test_checkpoint_events_on_the_run_time_axis(campaign: sqlite3.Connection, server: str) -> None:
    events = campaign.execute(
        "SELECT e.t, e.kind, e.detail_json FROM run_events e JOIN runs r ON r.id = e.run_id "
        "WHERE r.server = ? AND r.workload = 'checkpoint' AND e.kind LIKE 'checkpoint%' "
        "ORDER BY e.t",
        (server,),
    ).fetchall()
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["checkpoint_start", "checkpoint_end"]
    start, end = events[0]["t"], events[1]["t"]
    assert 3.0 < start < 5.5 and start <= end < 10.5  # issued 4.5 s after "measuring"
    assert json.loads(events[1]["detail_json"])["buffers"] > 1000


def test_os_and_wait_series_per_second(campaign: sqlite3.Connection) -> None:
    run_id = runs(campaign)[("pg18", "lock")]["id"]
    series = campaign.execute(
        "SELECT source, metric, t, value FROM run_telemetry_seconds WHERE run_id = ?", (run_id,)
    ).fetchall()
    metrics = {(r[0], r[1]) for r in series}
    for needed in (
        ("cpu", "user_pct"),
        ("memory", "dirty_mb"),
        ("processes", "server_cpu_s"),
        ("processes", "pgbench_cpu_s"),
        ("pg_stat_activity", "Lock:relation"),
    ):
        assert needed in metrics, needed
    seconds = sorted({r[2] for r in series if r[0] == "cpu"})
    assert seconds[0] == 1 and seconds == list(range(1, len(seconds) + 1))
    facts = campaign.execute("SELECT * FROM server_facts WHERE server = 'pg15'").fetchone()
    assert facts["fs_type"] and facts["fsync_ops_per_s"] > 0
    assert "fdatasync" in json.loads(facts["fsync_json"])["ops_per_s"]
    assert "CONFIGURE" in json.loads(facts["pg_config_json"])


def test_only_pgbench_backends_are_sampled(campaign: sqlite3.Connection) -> None:
    # The sampler's own backend and the lock holder's session are in the same database but
    # are not pgbench's: in every second, at most 4 backends (the run's clients) were seen.
    run_id = runs(campaign)[("pg15", "lock")]["id"]
    per_second = campaign.execute(
        "SELECT t, sum(value) FROM run_telemetry_seconds "
        "WHERE run_id = ? AND source = 'pg_stat_activity' GROUP BY t",
        (run_id,),
    ).fetchall()
    assert per_second and max(total for _, total in per_second) <= 4.0 + 1e-9
    waits = dict(
        campaign.execute(
            "SELECT wait_event_type || ':' || wait_event, samples FROM run_wait_events "
            "WHERE run_id = ?",
            (run_id,),
        ).fetchall()
    )
    assert waits["Lock:relation"] > 0
