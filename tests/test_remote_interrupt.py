"""A campaign whose pgbench runs on two load generator hosts, cut short from outside: pgbenchlab
killed (kill -9) in the middle of a measured run split across both, and Ctrl-C in the middle of
a server group's run driven from both. Real runs through the command line in a process of its
own, hosts as network namespaces with their own sshd (`netns_hosts`).

What must hold (README, "Reliability and safety"): no finished run is lost; the interrupted run
is never stored as a completed figure; the next start stops what a killed campaign left on
every host and redoes that run; nothing is left running anywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from netns_hosts import TestHosts
from support import require_installs
from test_faults import CLI, db_rows, run_to_completion, wait_for, write_plan
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


def fleet_plan(hosts: TestHosts, servers: str, matrix: str) -> str:
    """A plan with its servers on db1 and pgbench on lg1 and lg2. Its campaign's name is the
    same in every test: a cluster on db1 is per campaign and server name, so one test reuses
    the cluster and dataset another made (no initdb, no pgbench -i)."""
    base = one_server_plan(hosts, "db1")
    base = base.replace(hosts_toml(hosts, "db1"), hosts_toml(hosts, "db1", "lg1", "lg2"))
    return f"{base}{servers}\n{GENERATORS}\n[matrix]\n{matrix}"


def signal_while_measuring(
    plan_path: Path,
    results: Path,
    run_index: int,
    how: int,
    when: Callable[[], bool],
    around: tuple[Callable[[], None], Callable[[], None]] = (lambda: None, lambda: None),
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Start the campaign, and signal it once `when` holds in the measured part of its run
    number `run_index` (its JSON events tell when that begins; `around`: what to do then,
    and once signalled). Returns how it ended and how long after the signal."""
    argv = [*CLI, "run", str(plan_path), "--results", str(results), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        index = 0
        for line in proc.stdout:
            event = json.loads(line)
            index = event["index"] if event["event"] == "run_started" else index
            if index == run_index and event.get("phase") == "measuring":
                around[0]()
                wait_for(when, timeout=60, every=0.02)
                proc.send_signal(how)
                around[1]()
                break
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ended = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    return ended, time.monotonic() - signalled


def shares_on(hosts: TestHosts, generator: str, *, measuring: bool = True) -> list[int]:
    """The pids of the account's pgbench processes running for one load generator (each
    one's log prefix ends with its name); with measuring=False, also the wrappers still
    waiting to start theirs."""
    found = []
    for row in hosts.account_processes():
        args = command_line(int(row.split()[0]))
        prefix = next((a for a in args if a.startswith("--log-prefix=")), "")
        if prefix.endswith((f".{generator}", f"@{generator}")) and (
            args[0].endswith("/pgbench") or not measuring
        ):
            found.append(int(row.split()[0]))
    return found


def command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


def scratch_dirs(hosts: TestHosts, name: str) -> list[str]:
    """The runs' scratch directories on that host (pgbench's working directory and logs)."""
    holder = hosts.hosts[name].holder
    assert holder is not None
    found = subprocess.run(
        ["nsenter", f"--mount=/proc/{holder.pid}/ns/mnt",
         "find", str(hosts.home), "-maxdepth", "4", "-type", "d", "-name", "pgbench-*"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return found.stdout.split()


def test_a_killed_campaign_split_across_two_generators_is_stopped_and_redone(
    fleet: TestHosts, tmp_path: Path
) -> None:
    # Two cells: the first finishes and is stored, the second is killed while measuring.
    matrix = 'scale = [1]\nworkload = ["select-only", "simple-update"]\nclients = [2]\n'
    plan_path = write_plan(tmp_path, fleet_plan(fleet, "", matrix))
    results = tmp_path / "results"
    left: list[int] = []

    def hold_both() -> bool:
        """pgbench measuring on both generators: held stopped from now on (as hung ones,
        they cannot end by themselves before the next start)."""
        on_lg1, on_lg2 = shares_on(fleet, "lg1"), shares_on(fleet, "lg2")
        if not (on_lg1 and on_lg2):
            return False
        left[:] = on_lg1 + on_lg2
        for pid in left:
            os.kill(pid, signal.SIGSTOP)
        return True

    killed, _ = signal_while_measuring(plan_path, results, 2, signal.SIGKILL, hold_both)
    assert killed.returncode == -signal.SIGKILL
    # What the killed campaign left: its pgbench on both generators and its server on db1.
    assert len(left) == 2 and set(left) <= {int(p.split()[0]) for p in fleet.account_processes()}
    assert any("postgres" in p for p in fleet.account_processes())
    stored = db_rows(results, "SELECT workload, status FROM runs")
    assert [(r["workload"], r["status"]) for r in stored] == [("select-only", "ok")]
    assert scratch_dirs(fleet, "lg1") and scratch_dirs(fleet, "lg2")  # its runs' logs there
    done = run_to_completion(plan_path, results)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert scratch_dirs(fleet, "lg1") == scratch_dirs(fleet, "lg2") == []  # removed with them
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
    text = fleet_plan(fleet, servers, "scale = [1]\nclients = [2]\n")
    plan_path = write_plan(tmp_path, text.replace('name = "pg"', 'name = "a"'))
    results = tmp_path / "results"
    # each member's pgbench on each generator: four measuring
    all_four = lambda: len(shares_on(fleet, "lg1") + shares_on(fleet, "lg2")) == 4  # noqa: E731
    interrupted, _ = signal_while_measuring(plan_path, results, 1, signal.SIGINT, all_four)
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


def test_ctrl_c_while_a_generator_is_still_starting_stops_its_pgbench_too(
    fleet: TestHosts, tmp_path: Path
) -> None:
    """A Ctrl-C that comes while lg2's pgbench is being started (its SSH session slow to
    begin) reaches that pgbench once it runs: the campaign ends long before its duration."""
    text = fleet_plan(fleet, "", "scale = [1]\nclients = [2]\n")
    plan_path = write_plan(tmp_path, text.replace('"2s"', '"60s"'))
    only_lg1 = lambda: bool(  # noqa: E731
        shares_on(fleet, "lg1", measuring=False) and not shares_on(fleet, "lg2", measuring=False)
    )
    # lg2's sessions slow while its pgbench is started; Ctrl-C once lg1's runs and lg2's pid is
    # not known yet; its sessions on time again from then on (the start stays late).
    slow = (lambda: fleet.slow_sessions("lg2", 1), lambda: fleet.slow_sessions("lg2", None))
    try:
        interrupted, after_s = signal_while_measuring(
            plan_path, tmp_path / "results", 1, signal.SIGINT, only_lg1, around=slow
        )
    finally:
        fleet.slow_sessions("lg2", None)
    assert interrupted.returncode == 130, interrupted.stderr
    print(f"Ctrl-C to the end: {after_s:.1f} s")
    assert after_s < 30  # lg2's pgbench, unasked, ran its 60 s
    assert fleet.leftovers() == []
