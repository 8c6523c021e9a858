"""A campaign with its managed server on another host (a network namespace with its own sshd):
initdb, settings, start and stop there, the dataset made and pgbench run from this machine over
TCP, telemetry read there; results stored as for a local run, nothing left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from netns_hosts import TestHosts
from pgbenchlab import plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.results import RunHost, RunStatus
from pgbenchlab.store import Store
from support import QuietReporter, require_installs

pytestmark = pytest.mark.server


def hosts_toml(hosts: TestHosts, *names: str) -> str:
    return "".join(
        f'[[host]]\nname = "{name}"\nssh = "{hosts.ssh_target(name)}"\n'
        f'identity = "{hosts.identity}"\nknown_hosts = "{hosts.known_hosts}"\n'
        for name in names
    )


@pytest.fixture(scope="module")
def db_host(test_hosts: TestHosts) -> TestHosts:
    require_installs("15")
    test_hosts.add("db1")
    return test_hosts


def test_a_managed_server_on_another_host(db_host: TestHosts, tmp_path: Path) -> None:
    text = f"""
[campaign]
name = "remote"

[defaults]
duration = "2s"
warmup = "0s"

{hosts_toml(db_host, "db1")}
[[server]]
name = "pg15"
host = "db1"
install = "15"
settings = {{ shared_buffers = "32MB" }}

[matrix]
clients = [1, 2]
"""
    the_plan = plan.parse(text, str(tmp_path / "remote.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, tmp_path / "results", QuietReporter())
    assert (outcome.ran, outcome.failed) == (2, 0), [(r.status, r.error) for r in outcome.results]
    assert all(r.status == RunStatus.OK and r.tps and r.tps > 0 for r in outcome.results)
    store = Store(tmp_path / "results" / "results.db")
    try:
        servers = store.server_records(outcome.campaign_id)
        run_ids = [row["id"] for row in store.runs(outcome.campaign_id)]
        hosts = {store.run_hosts(run_id) for run_id in run_ids}
    finally:
        store.close()
    address = db_host.hosts["db1"].address
    assert hosts == {(RunHost("pgbench", "local"), RunHost("server", "db1", address))}
    # The cluster is in db1's own home (private to it: not on this machine).
    assert servers[0].data_dir.startswith(str(db_host.home) + "/.pgbenchlab/clusters/")
    assert not Path(servers[0].data_dir).exists()
    assert not [p for p in db_host.account_processes() if "postgres" in p]
