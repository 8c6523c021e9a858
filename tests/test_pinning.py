"""CPU pinning and NUMA placement: CPU lists and NUMA policies in the plan, checked against the
machine, applied with taskset and numactl and verified on the kernel's view (/proc/PID/status,
numa_maps) during real runs on this 2-CPU, one-node machine: the server on CPU 0 bound to node
0, pgbench on CPU 1 interleaved; and the diagnosis naming the pinned CPUs that limited a run.

The real campaign (module fixture, about 25 s) also gives the client ladder the scalability
model is fitted to (`test_scalability.py` reads the same kind of data synthetically).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgbenchlab import cpusets, findings, plan
from pgbenchlab.campaign import RESULTS_DB, remove_clusters, run_campaign
from pgbenchlab.campaign.pinning import check_cpus, check_numa, numa_places
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import LOCAL_HOST, pinned
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.scalability import scalability_table
from pgbenchlab.store import Store
from pgbenchlab.telemetry.affinity import allowed_lists
from pgbenchlab.telemetry.osstats import child_pids
from support import QuietReporter, require_installs, run_errors

# alone: the diagnosis of pinned CPUs' saturation
pytestmark = pytest.mark.alone

BASE = """
[campaign]
name = "pin"
{pgbench}
[[server]]
name = "pg"
install = "embedded"
{server}
[matrix]
scale = [1]
clients = [4]
"""


def parse(pgbench: str = "", server: str = "") -> plan.Plan:
    text = BASE.format(pgbench=pgbench, server=server)
    return plan.parse(text, "pin.toml", base=Path("/tmp"), cpu_count=8)


def test_cpu_lists_read_and_written_as_the_kernel_does() -> None:
    assert cpusets.parse("0-3,8, 10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert cpusets.text((11, 10, 8, 3, 2, 1, 0, 2)) == "0-3,8,10-11"
    assert cpusets.text(cpusets.parse("1,0")) == "0-1"
    for bad in ("", "a", "3-1", "1-", "0-99999999"):
        with pytest.raises(cpusets.BadCpuList):
            cpusets.parse(bad)


def test_the_plan_takes_cpus_for_managed_servers_and_pgbench() -> None:
    pinned = parse('[pgbench]\ncpus = "3,2"', 'cpus = "0-1"')
    assert pinned.pgbench_cpus == "2-3" and pinned.servers[0].cpus == "0-1"
    # threads = "auto" is one per CPU pgbench may use: its pinned ones when pinned.
    assert [s.options.threads for s in pinned.specs] == [2]
    assert [s.options.threads for s in parse().specs] == [4]


@pytest.mark.parametrize(
    ("pgbench", "server", "message"),
    [
        ('[pgbench]\ncpus = "x"', "", '"x" is not a CPU list'),
        ("[pgbench]\ncpus = 3", "", "must be a CPU list"),
        ("", 'cpus = "2-1"', '"2-1" in "2-1" is not a range'),
    ],
)
def test_bad_cpu_lists_are_refused(pgbench: str, server: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse(pgbench, server)


def test_cpus_apply_to_managed_servers_only() -> None:
    text = BASE.format(pgbench="", server="").replace(
        'install = "embedded"', 'dsn = "host=x dbname=y"\ncpus = "0"'
    )
    with pytest.raises(PlanError, match="applies to managed servers only"):
        plan.parse(text, "pin.toml", base=Path("/tmp"))


def test_cpus_the_machine_lacks_are_refused_before_anything_starts() -> None:
    lacking = max(LOCAL_HOST.allowed_cpus()) + 1
    with pytest.raises(PlanError, match=f"names CPU {lacking}, which this machine lacks"):
        check_cpus(parse(f'[pgbench]\ncpus = "0,{lacking}"'), lambda _: LOCAL_HOST)
    check_cpus(parse('[pgbench]\ncpus = "0"', 'cpus = "0"'), lambda _: LOCAL_HOST)


def test_every_cpu_list_and_numa_policy_the_machine_lacks_is_told_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lacking = max(LOCAL_HOST.allowed_cpus()) + 1
    path = tmp_path / "pin.toml"
    path.write_text(
        BASE.format(pgbench=f'[pgbench]\ncpus = "{lacking}"', server='numa = { membind = "7" }')
    )
    results = tmp_path / "results"
    assert main(["run", str(path), "--check", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert f'[pgbench] cpus = "{lacking}" names CPU {lacking}, which this machine lacks' in err
    assert "server pg numa names node 7, which this machine lacks" in err
    assert not results.exists()


# -- real runs: server on CPU 0, pgbench on CPU 1 ----------------------------------------------

# Meta-commands make pgbench's side of a select-only transaction several times the server's:
# pinned to one CPU, pgbench is the limit however busy the machine is. Four threads share that
# CPU, so one is running or waiting for it whenever pgbench has work: connecting and
# disconnecting 16 clients (pgbench idle meanwhile, long on a loaded machine) cannot bring its
# demand on the CPU below 90 %, as it can for one thread.
HEAVY_CLIENT = "".join(f"\\set x{i} random(1, 100000) * 3 + {i}\n" for i in range(200)) + (
    "\\set aid random(1, 100000 * :scale)\n"
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
)
REAL = """
[campaign]
name = "pinned"
repeats = 2

[defaults]
duration = "2s"
warmup = "0s"
latency_log = "off"

[pgbench]
cpus = "1"
numa = "interleave"

[[server]]
name = "pg18"
install = "embedded"
cpus = "0"
numa = { cpunodebind = "0", membind = "0" }
workload = [
  "select-only",
  { name = "heavy-client", script = "heavy.sql", clients = 16, threads = 4, duration = "4s" },
]

[matrix]
scale = 1
clients = [1, 2, 4, 16]
"""


@pytest.fixture(scope="module")
def pinned_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require_installs("embedded")
    if len(LOCAL_HOST.allowed_cpus() & {0, 1}) < 2:
        pytest.fail("these tests pin to CPUs 0 and 1, which this machine must have")
    base = tmp_path_factory.mktemp("pinned")
    (base / "heavy.sql").write_text(HEAVY_CLIENT)
    the_plan = plan.parse(REAL, str(base / "pinned.toml"), base=base)
    results = base / "results"
    try:
        outcome = run_campaign(the_plan, results, QuietReporter())
        assert outcome.failed == 0, run_errors(outcome)
        yield results
    finally:
        remove_clusters(results)


@pytest.fixture(scope="module")
def pinned_campaign(pinned_results: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(pinned_results / RESULTS_DB)
    db.row_factory = sqlite3.Row
    yield db
    db.close()


@pytest.mark.server
def test_the_kernel_ran_the_server_on_cpu_0_and_pgbench_on_cpu_1(
    pinned_campaign: sqlite3.Connection,
) -> None:
    rows = pinned_campaign.execute(
        "SELECT r.clients, a.* FROM latest_runs r JOIN run_affinity a ON a.run_id = r.id"
    ).fetchall()
    assert len(rows) == 2 * 10  # both roles of every run
    for row in rows:
        expected = "0" if row["role"] == "server" else "1"
        assert (row["requested"], row["observed"], row["verified"]) == (expected, expected, 1)
    servers = [r for r in rows if r["role"] == "server"]
    # The postmaster, its auxiliary processes and one backend per client, all on CPU 0.
    assert all(r["processes"] >= r["clients"] + 3 for r in servers)
    assert {r["processes"] for r in rows if r["role"] == "pgbench"} == {1}
    threads = pinned_campaign.execute(
        "SELECT DISTINCT threads FROM runs WHERE workload = 'select-only'"
    ).fetchall()
    assert [t[0] for t in threads] == [1]  # auto: one per pinned CPU


@pytest.mark.server
def test_the_kernel_placed_the_server_on_node_0_and_interleaved_pgbench(
    pinned_results: Path,
) -> None:
    with Store(pinned_results / RESULTS_DB) as store:
        found = store.affinity_by_run([r.id for r in store.run_records(1)])
        view = load_view(store, 1)
    placed = {
        (a.role, a.numa_requested, a.memory_nodes, a.numa_policies)
        for run in found.values()
        for a in run
    }
    assert placed == {
        ("server", "cpunodebind=0 membind=0", ("0",), ("bind:0",)),
        ("pgbench", "interleave=all", ("0",), ("interleave:0",)),
    }
    shown = {line for run in view.runs for line in run.cpu_affinity}
    assert any("memory node 0 (numa cpunodebind=0 membind=0: policy bind:0)" in s for s in shown)


def test_numa_policies_are_read_and_checked_before_anything_starts() -> None:
    the_plan = parse(
        pgbench='[pgbench]\nnuma = { preferred = "0" }',
        server='numa = { cpunodebind = "0-1", interleave = "all" }',
    )
    assert the_plan.pgbench_numa == cpusets.NumaPolicy(preferred="0")
    numa = the_plan.servers[0].numa
    assert numa is not None and numa.options() == ["--cpunodebind=0-1", "--interleave=all"]
    for server, said in (
        ('numa = { membind = "0", interleave = "all" }', "a memory policy is one of them"),
        ('numa = { nodes = "0" }', "is not one of cpunodebind, membind"),
        ('numa = "spread"', 'must be "interleave" or a table'),
        ('numa = { membind = "x" }', "is not a CPU list"),
    ):
        with pytest.raises(PlanError, match=said):
            parse(server=server)
    lacking = parse(server='numa = { membind = "7" }')
    with pytest.raises(PlanError, match="names node 7, which this machine lacks: it has node"):
        check_numa(lacking, numa_places(lacking)[0], LOCAL_HOST)
    assert pinned(["true"], "1", LOCAL_HOST, cpusets.NumaPolicy(membind="0"))[1:] == [
        "--membind=0",
        "--",
        *(LOCAL_HOST.pin_prefix("1") or []),
        "true",
    ]


@pytest.mark.server
def test_a_generator_pinned_to_one_cpu_is_named_the_limit(
    pinned_campaign: sqlite3.Connection,
) -> None:
    for row in diagnoses(pinned_campaign, "heavy-client"):
        evidence = json.loads(row["evidence_json"])
        assert row["verdict"] == "client_bound", (evidence, json.loads(row["details_json"]))
        assert evidence[0].startswith("pgbench was pinned to CPU 1 (1 of the host's 2)")


@pytest.mark.server
def test_a_server_pinned_to_one_cpu_for_16_clients_is_stated(
    pinned_campaign: sqlite3.Connection,
) -> None:
    for row in diagnoses(pinned_campaign, "select-only", clients=16):
        details = json.loads(row["details_json"])
        assert "pinned to CPU 0 (1 of the host's 2) for 16 clients" in details["pinning"]
        # Whichever pinned CPU filled first, the verdict names it.
        if row["verdict"] in ("server_cpu_bound", "client_bound"):
            assert "was pinned to CPU" in json.loads(row["evidence_json"])[0]


def diagnoses(db: sqlite3.Connection, workload: str, clients: int = 16) -> list[sqlite3.Row]:
    rows = db.execute(
        "SELECT d.* FROM latest_runs r JOIN run_diagnosis d ON d.run_id = r.id "
        "WHERE r.workload = ? AND r.clients = ?",
        (workload, clients),
    ).fetchall()
    assert len(rows) == 2
    return rows


@pytest.mark.server
def test_the_scalability_model_on_the_real_client_ladder(pinned_results: Path) -> None:
    with Store(pinned_results / RESULTS_DB) as store:
        view = load_view(store, 1)
    (found,) = view.scalability  # select-only; the heavy client ran at 16 clients only
    fit = found.fit
    assert (fit.clients, fit.runs) == ((1, 2, 4, 16), 8)
    if fit.refused is None:  # a fit: σ within its interval, the curve over the points
        assert fit.sigma is not None and fit.sigma.low <= fit.sigma.value <= fit.sigma.high
        assert found.curve and found.curve[0][0] == 1 and found.curve[-1][0] == 16
    else:  # or the reason the data cannot support one, and no numbers
        assert fit.sigma is None and not found.curve
    table = scalability_table(view)
    assert table is not None and table.rows[0][1] == "1, 2, 4, 16 (8)"


def test_a_pinning_the_kernel_did_not_hold_is_a_warning() -> None:
    assert findings.pinning_not_applied("server", "0", ("0",)) is None
    assert findings.pinning_not_applied("pgbench", None, ("0-1",)) is None
    found = findings.pinning_not_applied("server", "0", ("0", "0-1"))
    assert found is not None and found.text == (
        "server was to be pinned to CPU 0, but the kernel allowed its processes CPU 0 | 0-1 "
        "(/proc/PID/status): the pinning did not hold"
    )


def test_a_process_started_pinned_runs_where_the_kernel_says() -> None:
    # Through the Host: taskset execs the command (same pid), its children inherit the list.
    assert pinned(["true"], None, LOCAL_HOST) == ["true"]
    proc = LOCAL_HOST.start(
        pinned(["sh", "-c", "sleep 5 & wait"], "0", LOCAL_HOST),
        env={},
        cwd="/",
        new_session=True,  # kill() ends the sleeping child too
    )
    try:
        deadline = time.monotonic() + 5
        while not (children := child_pids(Path("/proc"), proc.pid, LOCAL_HOST)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for pid in (proc.pid, *children):
            assert allowed_lists(Path("/proc"), pid, LOCAL_HOST) == ("0", "0")
    finally:
        proc.kill()
        proc.wait()
    cpus, _ = allowed_lists(Path("/proc"), os.getpid(), LOCAL_HOST) or ("", "")
    assert cpus == cpusets.text(LOCAL_HOST.allowed_cpus())
