"""connection = "pgbouncer" without a server: the [pooler] table as the plan parser reads and
refuses it, and a saturated pooler named by the diagnosis."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.analysis.diagnosis import Bottleneck, Diagnosis
from pgbenchlab.analysis.pooler_load import pooler_load, with_saturated_pooler
from pgbenchlab.errors import PlanError
from pgbenchlab.records.telemetry import Affinity, RunTelemetry, Total
from pgbenchlab.server.pooler import PoolerFacts, prepared_problem
from pgbenchlab.store import MIGRATIONS, SCHEMA_VERSION, Store

BASE = """
[campaign]
name = "pooled"
[defaults]
duration = "10s"
protocol = "simple"
[matrix]
scale = 10
clients = [8]
connection = ["socket", "pgbouncer"]
[[server]]
name = "pg15"
install = "15"
"""


def parse(text: str) -> plan.Plan:
    return plan.parse(text, "plan.toml", base=Path("/nonexistent"), cpu_count=2)


def refusal(text: str) -> str:
    with pytest.raises(PlanError) as caught:
        parse(text)
    return str(caught.value)


def test_pooler_defaults_are_pgbouncers_own_with_room_for_the_clients() -> None:
    found = parse(BASE)
    assert found.pooler == plan.PoolerPlan("transaction", 20, 100, None, None)
    many = parse(BASE.replace("clients = [8]", "clients = [8, 150]"))
    assert many.pooler.max_client_conn == 152  # the clients and pgbenchlab's admin connections
    assert {s.options.connection for s in found.specs} == {"socket", "pgbouncer"}


def test_the_pooler_table_is_read() -> None:
    text = BASE + '[pooler]\npool_mode = "session"\npool_size = 4\ncpus = "1"\n'
    text += "max_client_conn = 50\ninstall = '/opt/pgbouncer/bin'\n"
    assert parse(text).pooler == plan.PoolerPlan("session", 4, 50, "1", "/opt/pgbouncer/bin")


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('pool_mode = "sesion"', 'did you mean "session"'),
        ("pool_size = 0", "positive whole number"),
        ("max_client_conn = 9", "fewer than the 10 client connections"),
        ('cpus = "x"', "pooler.cpus"),
        ("size = 3", 'did you mean "pool_size"'),
    ],
)
def test_a_bad_pooler_table_is_refused_with_what_to_fix(table: str, said: str) -> None:
    assert said in refusal(BASE + "[pooler]\n" + table + "\n")


def test_a_statement_pool_refuses_workloads_with_transaction_blocks() -> None:
    text = BASE + '[pooler]\npool_mode = "statement"\n'
    assert "select-only" in parse(text).specs[0].workload.name  # single statements: fine
    said = refusal(text.replace("scale = 10", 'scale = 10\nworkload = "tpcb-like"'))
    assert 'runs transaction blocks (BEGIN … END), which a "statement" pool refuses' in said


def test_pgbouncer_needs_a_managed_server_here_or_on_a_host() -> None:
    external = BASE.replace('install = "15"', 'dsn = "host=/tmp dbname=bench"')
    assert '"pgbouncer" needs a managed server' in refusal(external)
    remote = BASE.replace('install = "15"', 'install = "15"\nhost = "db1"')
    remote += '[[host]]\nname = "db1"\nssh = "db1"\n'
    assert {s.options.connection for s in parse(remote).specs} == {"socket", "pgbouncer"}
    group = BASE.replace('connection = ["socket", "pgbouncer"]', "")
    group += '[[server]]\nname = "pg16"\ninstall = "16"\n'
    group += '[[server_group]]\nname = "both"\nservers = ["pg15", "pg16"]\n'
    group += 'connection = "tls"\n'
    assert '"tls" is not available for a group\'s runs' in refusal(group)


def test_prepared_needs_a_session_pool_or_pgbouncer_1_21() -> None:
    assert prepared_problem("session", (1, 18, 0), "PgBouncer 1.18.0") is None
    assert prepared_problem("transaction", (1, 21, 0), "PgBouncer 1.21.0") is None
    said = prepared_problem("statement", (1, 18, 0), "PgBouncer 1.18.0")
    assert said is not None and "needs PgBouncer 1.21 or later" in said


def telemetry(cpu_s: float, wait_s: float, pinned: str | None = None) -> RunTelemetry:
    totals = (
        Total("pooler", "cpu_s", cpu_s),
        Total("pooler", "wait_s", wait_s),
        Total("pooler", "seconds", 10.0),
    )
    affinity = () if pinned is None else (Affinity("pooler", pinned, (pinned,), 1),)
    return RunTelemetry(0.0, 10.2, 150000, 50, 12, (), (), totals, (), (), (), affinity=affinity)


SERVER_BOUND = Diagnosis(Bottleneck.SERVER_CPU_BOUND, ("host CPUs 100 % busy",), {"also": []})


def test_a_pooler_on_its_cpu_or_waiting_for_it_nearly_all_the_run_is_the_limit() -> None:
    load = pooler_load(telemetry(0.5, 9.0, pinned="1"))
    assert load is not None and load.busy == pytest.approx(0.95)
    found = with_saturated_pooler(SERVER_BOUND, load)
    assert found is not None and found.verdict == Bottleneck.POOLER_BOUND
    assert (
        "pooler (pinned to CPU 1) was on a CPU or waiting for one 95% of the run"
        in (found.evidence[0])
    )
    assert found.details["also"] == ["server_cpu_bound"]  # what the rules found stays
    assert found.details["also_evidence"]["server_cpu_bound"] == ["host CPUs 100 % busy"]


def test_a_pooler_with_idle_time_or_no_pooler_changes_nothing() -> None:
    assert with_saturated_pooler(SERVER_BOUND, pooler_load(telemetry(3.0, 2.0))) is SERVER_BOUND
    no_pooler = RunTelemetry(0.0, 1.0, None, 0, 0, (), (), (), (), (), ())
    assert pooler_load(no_pooler) is None
    assert pooler_load(None) is None
    alone = with_saturated_pooler(None, pooler_load(telemetry(9.5, 0.0)))
    assert alone is not None and alone.verdict == Bottleneck.POOLER_BOUND


def test_a_database_of_schema_28_gets_the_poolers_table_and_keeps_its_facts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, 29)))
    db.execute("PRAGMA user_version = 28")
    db.close()
    facts = PoolerFacts(
        "pg15",
        "pgbouncer",
        "PgBouncer 1.18.0",
        {"pool_mode": "transaction", "default_pool_size": "20"},
        "/usr/sbin/pgbouncer",
    )
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        campaign = store.start_campaign("c", "p.toml", "", "d", {"pgbenchlab": "x"}, {})
        store.record_pooler(campaign, facts)
        store.record_pooler(campaign, facts)  # a restarted server's: once per campaign
        assert store.poolers(campaign) == {"pg15": facts}
        assert store.poolers(campaign + 1) == {}
