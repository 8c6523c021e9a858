"""threads on load generator hosts: "auto" counts the CPUs of each host where pgbench runs
(a host here says it has one CPU: its own /sys/devices/system/cpu/online), and more threads
than clients are left to pgbench to lower, the run keeping what it used."""

from __future__ import annotations

from pathlib import Path

import pytest

from netns_hosts import TestHosts
from pgbenchlab.cli import main
from pgbenchlab.findings import WarningCode
from pgbenchlab.store import Store
from support import require_installs
from test_remote_campaign import hosts_toml

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def hosts(test_hosts: TestHosts) -> TestHosts:
    require_installs("15")
    test_hosts.add("db1")
    test_hosts.add("lg1", cpus=1)
    test_hosts.add("lg2")  # this machine's CPUs
    return test_hosts


def test_threads_auto_counts_each_generators_cpus_and_extra_threads_are_lowered(
    hosts: TestHosts, tmp_path: Path
) -> None:
    cpus = int(hosts.hosts["lg2"].ns("getconf", "_NPROCESSORS_ONLN").stdout)
    assert cpus >= 2, "the test tells the hosts apart by lg1's single CPU"
    text = f"""
[campaign]
name = "threads"

[defaults]
duration = "1s"
warmup = "0s"

{hosts_toml(hosts, "db1", "lg1", "lg2")}
[pgbench]
hosts = ["lg1", "lg2"]

[[server]]
name = "pg"
host = "db1"

[matrix]
clients = [4]
workload = ["select-only", {{ builtin = "select-only", name = "many", threads = 8, clients = 2 }}]
"""
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(text)
    results = tmp_path / "results"
    assert main(["run", str(plan_file), "--results", str(results), "--quiet"]) == 0
    with Store(results / "results.db") as store:
        records = store.run_records(store.campaign_id(None))
        runs = {r["workload"]: (r, store.run_generators(r.id)) for r in records}
    warnings = {
        name: {w["code"]: w["evidence"] for w in r["warnings"]} for name, (r, _) in runs.items()
    }
    # auto: 2 clients on each; lg1 has 1 CPU, lg2 two: 1 + 2 threads (this machine's count
    # would have given 2 + 2).
    auto, auto_shares = runs["select-only"]
    assert [(g.host, g.clients, g.threads) for g in auto_shares] == [("lg1", 2, 1), ("lg2", 2, 2)]
    assert auto["threads"] == 3
    assert WarningCode.THREADS_REDUCED not in warnings["select-only"]
    # 8 threads for 2 clients: accepted, one client and one thread on each; the run says so.
    many, many_shares = runs["many"]
    assert many["threads"] == 8
    assert [(g.clients, g.threads) for g in many_shares] == [(1, 1), (1, 1)]
    assert warnings["many"][WarningCode.THREADS_REDUCED] == {"used": 2, "asked": 8}
