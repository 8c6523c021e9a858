"""What is set up beside a managed server on another host (a network namespace with its own
sshd), by real campaigns:

- connection = "pgbouncer": Debian's PgBouncer started there beside the server, pgbench on a
  load generator reaching it over TCP with the server's password (SCRAM, checked by the pooler
  against the verifier in its auth_file), its admin console read over SSH; what was stored, no
  secret written here, nothing left running there.
- [dataset] tablespaces: made in directories of that host (its own /tmp), tables, indexes and
  temporary files in them as the server sees them; and the server's one-off preparation run
  through two load generators, as its runs are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from netns_hosts import TestHosts
from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.campaign import run_campaign as run_plan
from pgbenchlab.results import RunStatus
from pgbenchlab.store import Store
from pgbenchlab.store.server_setup import preparations
from support import QuietReporter, require_installs
from test_pooler_real import require_pgbouncer, run_campaign, stored_runs
from test_remote_campaign import hosts_toml
from test_tablespaces import in_tablespaces, plan_text

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]

CLIENTS = 4


@pytest.fixture(scope="module")
def hosts(test_hosts: TestHosts) -> TestHosts:
    require_installs("15")
    require_pgbouncer()
    test_hosts.add("db1")
    test_hosts.add("lg1")
    test_hosts.add("lg2")
    return test_hosts


def test_a_pooler_on_the_server_s_host_reached_from_a_load_generator(
    hosts: TestHosts, tmp_path: Path
) -> None:
    text = f"""
[campaign]
name = "pooled-remote"
[defaults]
duration = "2s"
warmup = "0s"
protocol = "simple"
[matrix]
scale = 1
clients = [{CLIENTS}]
connect = [false, true]
connection = ["pgbouncer"]
[pooler]
pool_mode = "transaction"
{hosts_toml(hosts, "db1", "lg1")}
[pgbench]
hosts = ["lg1"]
[[server]]
name = "pg15"
host = "db1"
install = "15"
"""
    code, results, printed = run_campaign(tmp_path, text)
    assert code == 0, printed
    runs = stored_runs(results)
    assert [r["status"] for r in runs] == ["ok", "ok"], printed
    for run in runs:
        assert run["warnings_json"] == "[]"  # the server's commits agree with pgbench's count
        totals: dict[tuple[str, str], float] = run["totals"]  # type: ignore[assignment]
        transactions = int(run["transactions"])  # type: ignore[call-overload]
        # every transaction pgbench on lg1 counted went through the pooler on db1
        passed = totals[("pgbouncer_stats", "total_xact_count")]
        assert transactions <= passed <= transactions + CLIENTS
        assert totals[("pooler", "cpu_s")] > 0  # its process, read on db1
    with Store(results / RESULTS_DB) as store:
        campaign = store.find_campaign("pooled-remote")
        assert campaign is not None
        facts = store.poolers(campaign.id)["pg15"]
        ids = [int(str(r["id"])) for r in runs]
        run_hosts = {(h.role, h.host) for run_id in ids for h in store.run_hosts(run_id)}
    assert run_hosts == {("pgbench", "lg1"), ("server", "db1")}
    assert facts.settings["auth_type"] == "scram-sha-256"
    assert facts.settings["listen_addr"] == hosts.hosts["db1"].address
    # The verifier stayed in the pooler's auth_file on db1 (removed with it); the password
    # reached pgbench in its environment only.
    written = [p for p in results.rglob("*") if p.is_file()]
    assert not [p for p in written if b"SCRAM-SHA-256$" in p.read_bytes()]
    assert hosts.leftovers() == []


def test_tablespaces_and_a_preparation_through_two_load_generators(
    hosts: TestHosts, tmp_path: Path
) -> None:
    places = {k: Path(f"/tmp/{hosts.tag}-ts") / k for k in ("tables", "indexes", "temp")}
    dataset = (
        in_tablespaces(places, tmp_path)
        + hosts_toml(hosts, "db1", "lg1", "lg2")
        + '[pgbench]\nhosts = ["lg1", "lg2"]\n'
    )
    server = 'install = "15"\nhost = "db1"\nprepare = { duration = "1s", clients = 2 }'
    # each cell's clients split between the two load generators
    text = plan_text(dataset, server).replace("clients = [1, 2]", "clients = [2, 4]")
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_plan(the_plan, tmp_path / "results", QuietReporter())
    # check.sql fails a run unless the tables, the index and a temporary table lie in their
    # tablespaces, under the plan's directories, as the server on db1 sees them
    assert [r.status for r in outcome.results] == [RunStatus.OK] * 2, [
        r.error for r in outcome.results
    ]
    assert not places["tables"].parent.exists()  # made on db1 (its own /tmp), not here
    with Store(tmp_path / "results" / RESULTS_DB) as store:
        (prepared,) = preparations(store, outcome.campaign_id)  # one start: prepared once
        run_ids = [r.id for r in store.run_records(outcome.campaign_id)]
        generators = {g.host for run_id in run_ids for g in store.run_generators(run_id)}
    assert prepared.clients == 2 and prepared.tps is not None and prepared.tps > 0
    assert generators == {"lg1", "lg2"}
    assert hosts.leftovers() == []
