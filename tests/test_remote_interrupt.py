"""A campaign whose pgbench runs on two load generator hosts, cut short from outside: pgbenchlab
killed (kill -9) in the middle of a measured run split across both, and Ctrl-C in the middle of
a server group's run driven from both. Real runs through the command line in a process of its
own, hosts as network namespaces with their own sshd (`netns_hosts`).

What must hold (README, "Reliability and safety"): no finished run is lost; the interrupted run
is never stored as a completed figure; the next start stops what a killed campaign left on
every host and redoes that run; nothing is left running anywhere."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from netns_hosts import TestHosts
from support import require_installs
from test_faults import CLI, db_rows, run_to_completion, write_plan
from test_remote_campaign import hosts_toml, one_server_plan

pytestmark = pytest.mark.server

GENERATORS = '[pgbench]\nhosts = ["lg1", "lg2"]\n'


@pytest.fixture(scope="module")
def fleet(test_hosts: TestHosts) -> TestHosts:
    """A database host and two load generator hosts."""
    require_installs("15")
    for name in ("db1", "lg1", "lg2"):
        test_hosts.add(name)
    return test_hosts


def fleet_plan(hosts: TestHosts, name: str, servers: str, matrix: str) -> str:
    """A plan with its servers on db1 and pgbench on lg1 and lg2."""
    base = one_server_plan(hosts, "db1").replace('name = "remote"', f'name = "{name}"')
    base = base.replace(hosts_toml(hosts, "db1"), hosts_toml(hosts, "db1", "lg1", "lg2"))
    return f"{base}{servers}\n{GENERATORS}\n[matrix]\n{matrix}"


def signal_while_measuring(
    plan_path: Path, results: Path, run_index: int, how: int, after_s: float
) -> subprocess.CompletedProcess[str]:
    """Start the campaign, and signal it `after_s` into the measured part of its run number
    `run_index` (its JSON events tell when). Returns how it ended."""
    argv = [*CLI, "run", str(plan_path), "--results", str(results), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        index = 0
        for line in proc.stdout:
            event = json.loads(line)
            index = event["index"] if event["event"] == "run_started" else index
            if index == run_index and event.get("phase") == "measuring":
                time.sleep(after_s)
                proc.send_signal(how)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def pgbench_on(hosts: TestHosts, generator: str) -> list[int]:
    """The pids of the account's pgbench processes started for one load generator (each
    one's log prefix names it)."""
    pids = [int(row.split()[0]) for row in hosts.account_processes()]
    return [p for p in pids if f"/pgbench_log.{generator}\0".encode() in command_line(p)]


def command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_killed_campaign_split_across_two_generators_is_stopped_and_redone(
    fleet: TestHosts, tmp_path: Path
) -> None:
    # Two cells: the first finishes and is stored, the second is killed while measuring.
    matrix = 'scale = [1]\nworkload = ["select-only", "simple-update"]\nclients = [2]\n'
    text = fleet_plan(fleet, "killed", "", matrix).replace('"2s"', '"3s"')
    plan_path = write_plan(tmp_path, text)
    results = tmp_path / "results"
    killed = signal_while_measuring(plan_path, results, 2, signal.SIGKILL, 2.0)
    assert killed.returncode == -signal.SIGKILL
    stored = db_rows(results, "SELECT workload, status FROM runs")
    assert [(r["workload"], r["status"]) for r in stored] == [("select-only", "ok")]
    # What the killed campaign left: its pgbench on both generators (held stopped here, so
    # they cannot end by themselves before the next start) and its server on db1.
    left = {g: pgbench_on(fleet, g) for g in ("lg1", "lg2")}
    assert left["lg1"] and left["lg2"], fleet.account_processes()
    for pid in left["lg1"] + left["lg2"]:
        subprocess.run(["kill", "-STOP", str(pid)], check=True)
    assert any("postgres" in p for p in fleet.account_processes())
    done = run_to_completion(plan_path, results)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    latest = db_rows(results, "SELECT workload, status FROM latest_runs ORDER BY sequence")
    assert [(r["workload"], r["status"]) for r in latest] == [
        ("select-only", "ok"),
        ("simple-update", "ok"),
    ]
    assert len(db_rows(results, "SELECT id FROM runs")) == 2  # every run once
    assert fleet.leftovers() == []


def test_ctrl_c_in_a_group_run_from_two_generators_stops_everything_and_resumes(
    fleet: TestHosts, tmp_path: Path
) -> None:
    servers = (
        '[[server]]\nname = "b"\nhost = "db1"\n'
        '[[server_group]]\nname = "ab"\nservers = ["a", "b"]\nsolo = false\n'
    )
    text = fleet_plan(fleet, "group", servers, "scale = [1]\nclients = [2]\n")
    text = text.replace('name = "pg"', 'name = "a"').replace('"2s"', '"3s"')
    plan_path = write_plan(tmp_path, text)
    results = tmp_path / "results"
    interrupted = signal_while_measuring(plan_path, results, 1, signal.SIGINT, 2.0)
    assert interrupted.returncode == 130, interrupted.stderr
    assert "Traceback" not in interrupted.stderr
    # Stored as interrupted (no figures), the campaign too; nothing left on any host.
    [run] = db_rows(results, "SELECT server, status, tps FROM runs")
    assert (run["server"], run["status"], run["tps"]) == ("ab", "interrupted", None)
    [campaign] = db_rows(results, "SELECT status FROM campaigns")
    assert campaign["status"] == "interrupted"
    assert fleet.leftovers() == []
    done = run_to_completion(plan_path, results)
    assert done.returncode == 0, done.stderr
    [latest] = db_rows(results, "SELECT server, status, tps FROM latest_runs")
    assert (latest["server"], latest["status"]) == ("ab", "ok") and latest["tps"] > 0
    assert len(db_rows(results, "SELECT id FROM runs")) == 2  # the interrupted one, then ok
    assert fleet.leftovers() == []
