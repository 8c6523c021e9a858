"""Faults on other hosts while a run measures (network namespaces with their own sshd): a load
generator's sshd gone, a generator's pgbench killed, the server host's disk full. Each fails
that run with the reason, the campaign goes on, no other run is lost, nothing is left running."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import time
from pathlib import Path

import pytest

from netns_hosts import TestHosts
from pgbenchlab import plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.hosts.remote import RETRY_AFTER_S
from pgbenchlab.results import RunStatus
from support import QuietReporter, require_installs
from test_faults import assert_only_small_failed, disk_full_plan
from test_remote_campaign import OnFirstMeasure, hosts_toml

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def hosts(test_hosts: TestHosts) -> TestHosts:
    require_installs("15")
    for name in ("db1", "lg1", "lg2"):
        test_hosts.add(name)
    return test_hosts


def generators_plan(hosts: TestHosts, tmp_path: Path, clients: str) -> plan.Plan:
    text = f"""
[campaign]
name = "faults"
[defaults]
duration = "3s"
warmup = "0s"
{hosts_toml(hosts, "db1", "lg1", "lg2")}
[pgbench]
hosts = ["lg1", "lg2"]
[[server]]
name = "pg"
host = "db1"
install = "15"
[matrix]
clients = {clients}
"""
    return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_a_load_generators_lost_sshd_fails_its_run_and_the_campaign_goes_on(
    hosts: TestHosts, tmp_path: Path
) -> None:
    the_plan = generators_plan(hosts, tmp_path, "[2, 4]")

    def back() -> None:
        hosts.start_sshd("lg1")
        time.sleep(RETRY_AFTER_S)  # lg1 is tried again once that long has passed

    reporter = OnFirstMeasure(lambda: hosts.kill_sshd("lg1"), back)
    try:
        outcome = run_campaign(the_plan, tmp_path / "results", reporter)
    finally:
        hosts.start_sshd("lg1")
    lost, after = outcome.results
    assert lost.status == RunStatus.FAILED, (lost.status, lost.error)
    assert "host lg1" in (lost.error or ""), lost.error
    assert after.status == RunStatus.OK, after.error
    assert hosts.leftovers() == []


def test_a_load_generators_pgbench_killed_fails_its_run_and_the_campaign_goes_on(
    hosts: TestHosts, tmp_path: Path
) -> None:
    the_plan = generators_plan(hosts, tmp_path, "[2, 4]")

    def kill_pgbench_on_lg2() -> None:
        """SIGKILL to the pgbench in lg2's namespace (lg1's runs as the same account)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for pid in hosts.hosts["lg2"].pids():
                if Path(f"/proc/{pid}/comm").read_text().strip() == "pgbench":
                    os.kill(pid, signal.SIGKILL)
                    return
            time.sleep(0.1)
        raise AssertionError("no pgbench ran on lg2")

    outcome = run_campaign(the_plan, tmp_path / "results", OnFirstMeasure(kill_pgbench_on_lg2))
    killed, after = outcome.results
    assert killed.status == RunStatus.FAILED, (killed.status, killed.error)
    assert (killed.error or "").startswith("pgbench on lg2 exited -9 without a report"), (
        killed.error
    )
    assert after.status == RunStatus.OK, after.error
    assert hosts.leftovers() == []


def test_a_full_disk_on_the_server_host_fails_its_runs_without_losing_others(
    hosts: TestHosts, tmp_path: Path
) -> None:
    # A 56 MB volume of the login's own in db1's private /tmp.
    small = "/tmp/pgbl-small"
    holder = hosts.hosts["db1"].holder
    assert holder is not None
    owner = pwd.getpwnam(hosts.user)
    options = f"size=56m,mode=0700,uid={owner.pw_uid},gid={owner.pw_gid}"
    subprocess.run(
        ["nsenter", f"--mount=/proc/{holder.pid}/ns/mnt", "sh", "-c",
         f"mkdir -p {small} && mount -t tmpfs -o {options} tmpfs {small}"],
        check=True,
    )  # fmt: skip
    on_db1 = 'host = "db1"\ninstall = "15"'
    text = disk_full_plan(
        f"{small}/data", small=on_db1, roomy=on_db1, hosts=hosts_toml(hosts, "db1")
    )
    try:
        the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
        outcome = run_campaign(the_plan, tmp_path / "results", QuietReporter())
    finally:
        subprocess.run(
            ["nsenter", f"--mount=/proc/{holder.pid}/ns/mnt", "umount", "-l", small], check=False
        )
    assert_only_small_failed(outcome)
    assert hosts.leftovers() == []
