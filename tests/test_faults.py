"""Fault injection on real clusters: interruption, kill -9 and resume, a killed postmaster,
refused connections, aborted clients, a full disk, two campaigns on one results database."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pgbenchlab import osuser, plan
from pgbenchlab.campaign import RESULTS_DB, Outcome, run_campaign
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.plan import RunSpec
from pgbenchlab.results import RunResult, RunStatus
from support import QuietReporter, require_installs

pytestmark = pytest.mark.server

CLI = [sys.executable, "-m", "pgbenchlab.cli"]


def three_runs(name: str, duration: str = "4s", extra: str = "") -> str:
    return f"""
[campaign]
name = "{name}"
[defaults]
duration = "{duration}"
warmup = "0s"
[[server]]
name = "pg"
install = "embedded"
settings = {{ shared_buffers = "32MB" }}
{extra}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1, 2, 3]
"""


def write_plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def db_rows(results: Path, sql: str) -> list[sqlite3.Row]:
    db = sqlite3.connect(results / RESULTS_DB)
    db.row_factory = sqlite3.Row
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def finished_runs(results: Path) -> int:
    if not (results / RESULTS_DB).exists():
        return 0
    try:
        return len(db_rows(results, "SELECT id FROM runs"))
    except sqlite3.OperationalError:
        return 0


def data_dir(results: Path, campaign: str, server: str = "pg") -> Path:
    root = cluster_root(results.resolve(), osuser.server_account())
    return root / campaign / server / "data"


def postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start_cli(plan_path: Path, results: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "run", str(plan_path), "--results", str(results), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_to_completion(plan_path: Path, results: Path) -> subprocess.CompletedProcess[str]:
    argv = [*CLI, "run", str(plan_path), "--results", str(results), "-q"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def wait_for(predicate: object, timeout: float = 120, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(every)
    raise AssertionError("timed out waiting")


def test_ctrl_c_records_the_run_as_interrupted_and_stops_the_server(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    plan_path = write_plan(tmp_path, three_runs("ctrlc", "4s"))
    proc = start_cli(plan_path, results_dir)
    wait_for(lambda: finished_runs(results_dir) >= 1)
    time.sleep(2)  # inside the second run's pgbench
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    statuses = [r["status"] for r in db_rows(results_dir, "SELECT status FROM runs ORDER BY id")]
    assert statuses == ["ok", "interrupted"]
    campaign = db_rows(results_dir, "SELECT status FROM campaigns")[0]
    assert campaign["status"] == "interrupted"
    data = data_dir(results_dir, "ctrlc")
    assert not (data / "postmaster.pid").exists(), "the managed server was stopped"
    # The same command continues: the finished run is kept, the interrupted one is rerun.
    done = run_to_completion(plan_path, results_dir)
    assert done.returncode == 0, done.stderr
    latest = db_rows(results_dir, "SELECT status, clients FROM latest_runs ORDER BY sequence")
    assert [(r["status"], r["clients"]) for r in latest] == [("ok", 1), ("ok", 2), ("ok", 3)]
    assert len(db_rows(results_dir, "SELECT id FROM runs WHERE clients = 1")) == 1


def test_kill_9_loses_no_finished_run_and_leftovers_are_cleaned(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    plan_path = write_plan(tmp_path, three_runs("kill9", "3s"))
    proc = start_cli(plan_path, results_dir)
    wait_for(lambda: finished_runs(results_dir) >= 1)
    time.sleep(1.5)
    proc.kill()
    proc.communicate(timeout=30)
    data = data_dir(results_dir, "kill9")
    leftover = postmaster_pid(data)
    assert alive(leftover), "a killed campaign leaves its server running"
    socket_dir = Path((data / "postmaster.pid").read_text().splitlines()[4])
    assert [r["status"] for r in db_rows(results_dir, "SELECT status FROM runs")] == ["ok"]
    done = run_to_completion(plan_path, results_dir)
    assert done.returncode == 0, done.stderr
    assert not alive(leftover)
    assert not socket_dir.exists()
    latest = db_rows(results_dir, "SELECT status FROM latest_runs")
    assert [r["status"] for r in latest] == ["ok", "ok", "ok"]
    assert not (data / "postmaster.pid").exists()


class KillPostmasterDuringRun(QuietReporter):
    """Kills the postmaster 1 s into the measured part of the second run."""

    def __init__(self, data: Path) -> None:
        super().__init__()
        self.data = data

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring" and spec.sequence == 1:
            pid = postmaster_pid(self.data)
            assert pid is not None
            time.sleep(1)
            os.kill(pid, signal.SIGKILL)


def test_killed_postmaster_fails_that_run_and_the_campaign_goes_on(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    the_plan = plan.parse(three_runs("crash", "3s"), "p.toml", base=tmp_path)
    reporter = KillPostmasterDuringRun(data_dir(results_dir, "crash"))
    outcome = run_campaign(the_plan, results_dir, reporter)
    statuses = [r.status for r in outcome.results]
    assert statuses[0] == "ok" and statuses[2] == "ok"
    assert statuses[1] in ("failed", "aborted")
    crashed: RunResult = outcome.results[1]
    assert crashed.error and "server pg was down" in crashed.error
    assert any(kind == "note" and "restarted server pg" in str(v) for kind, v in reporter.events)
    assert outcome.failed == 1  # a run that did not complete: exit code 1
    # Run again, the incomplete run alone is repeated and completes.
    again = run_campaign(the_plan, results_dir, QuietReporter())
    assert (again.ran, again.failed, again.skipped_done) == (1, 0, 2)
    latest = db_rows(results_dir, "SELECT status FROM latest_runs")
    assert [r["status"] for r in latest] == ["ok", "ok", "ok"]


def test_refused_connections_and_aborted_clients_are_recorded(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    (tmp_path / "boom.sql").write_text(
        "\\set r random(1, 200)\nSELECT CASE WHEN :r = 1 THEN 1/0 ELSE 1 END;\n"
    )
    text = """
[campaign]
name = "faults"
[defaults]
duration = "3s"
warmup = "0s"
[[server]]
name = "pg"
install = "embedded"
settings = { max_connections = "6", superuser_reserved_connections = "0" }
[matrix]
scale = [1]
workload = ["select-only", { script = "boom.sql", clients = [2] }]
clients = [12, 1]
"""
    the_plan = plan.parse(text, "p.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    by_cell = {(r.spec.workload, r.spec.clients): r for r in outcome.results}
    refused = by_cell[("select-only", 12)]
    assert refused.status == "failed"
    assert refused.error and "too many clients" in refused.error
    assert by_cell[("select-only", 1)].status == "ok"
    aborted = by_cell[("boom", 2)]
    assert aborted.status == "aborted"
    assert aborted.error and "division by zero" in aborted.error
    # Aborted runs keep their (incomplete) numbers but never count as complete results.
    rows = db_rows(results_dir, "SELECT status, tps FROM latest_runs WHERE workload = 'boom'")
    assert rows[0]["status"] == "aborted"


def disk_full_plan(data_dir: str, *, small: str, roomy: str, hosts: str = "") -> str:
    """Two servers (small and roomy: their other keys): small's data directory on a volume
    that scale 4's tpcb-like run fills (its WAL kept to 32 MB), roomy's where there is room."""
    return f"""
[campaign]
name = "diskfull"
[defaults]
duration = "2s"
warmup = "0s"
{hosts}
[[server]]
name = "small"
{small}
data_dir = "{data_dir}"
settings = {{ max_wal_size = "32MB", min_wal_size = "32MB" }}
[[server]]
name = "roomy"
{roomy}
[matrix]
scale = [4]
workload = ["tpcb-like"]
clients = [1]
"""


def assert_only_small_failed(outcome: Outcome) -> None:
    by_server = {r.spec.server: r for r in outcome.results}
    assert by_server["small"].status == RunStatus.FAILED
    assert "No space left" in (by_server["small"].error or ""), by_server["small"].error
    assert by_server["roomy"].status == RunStatus.OK, by_server["roomy"].error


def test_full_disk_fails_runs_without_losing_others(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded", "15")
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root: disk-full test NOT run")
    # The server account must reach the mount point: not under pytest's private tmp_path.
    mount = Path(tempfile.mkdtemp(prefix="pgbl-small-", dir="/var/tmp"))
    mount.chmod(0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=56m", "tmpfs", str(mount)], check=True)
    try:
        mount.chmod(0o777)
        text = disk_full_plan(f"{mount}/data", small='install = "embedded"', roomy='install = "15"')
        the_plan = plan.parse(text, "p.toml", base=tmp_path)
        assert_only_small_failed(run_campaign(the_plan, results_dir, QuietReporter()))
        assert len(db_rows(results_dir, "SELECT id FROM runs")) == 2
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def test_second_campaign_on_the_same_results_is_refused(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    # Runs far longer than the test: the first campaign still holds its results when the
    # second starts, however slow a loaded host makes that start (it is stopped below).
    plan_path = write_plan(tmp_path, three_runs("first", "120s"))
    first = start_cli(plan_path, results_dir)
    try:
        wait_for(lambda: (results_dir / RESULTS_DB).exists())
        (tmp_path / "other").mkdir()
        other = write_plan(tmp_path / "other", three_runs("second"))
        second = subprocess.run(
            [*CLI, "run", str(other), "--results", str(results_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert lines[-1].startswith("pgbenchlab: error:") and "another campaign" in lines[-1]
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    names = {r["name"] for r in db_rows(results_dir, "SELECT name FROM campaigns")}
    assert names == {"first"}
