"""Counting mode without a server: callgrind's output read (golden files of a real callgrind
run, tests/golden/callgrind/forked.c under pgbenchlab's options), instructions per transaction
with the setup subtracted, counted profiles stored, read and compared per transaction, the
script that starts postgres under callgrind, and what a plan that cannot be counted is told."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab import plan
from pgbenchlab.campaign.counting import check_valgrind, read_counts
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError, ServerError
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.profiles import Profile, diff
from pgbenchlab.profiles.counting import ProcessCounts, counted_run, parse_callgrind
from pgbenchlab.report.views import answer, build
from pgbenchlab.server.counting import callgrind_wrapper
from pgbenchlab.store import MIGRATIONS, SCHEMA_VERSION, Store
from pgbenchlab.store.profiles import write_profile

GOLDEN = Path(__file__).parent / "golden" / "callgrind"


def test_a_forked_childs_counts_start_at_fork_process() -> None:
    child = parse_callgrind((GOLDEN / "child.out").read_text())
    parent = parse_callgrind((GOLDEN / "parent.out").read_text())
    assert child.pid == 15360 and child.client_backend
    # Self counts only: spin's 1,000 iterations are spin's, not PostgresMain's.
    assert child.functions["spin"] == 6004 and child.functions["PostgresMain"] == 3
    assert child.total == 7445  # callgrind's own summary of the file
    # The parent's 100,000 iterations before the fork are in neither file: zeroed at
    # fork_process, so a backend does not inherit what the postmaster executed.
    assert not parent.client_backend and parent.total == 2657
    assert "spin" not in parent.functions


def test_only_the_files_of_processes_started_since_the_mark_are_read(tmp_path: Path) -> None:
    # The telemetry's backend (alive at the mark) may be writing its file as the run's counts
    # are collected: half-written, it must not be read.
    child = (GOLDEN / "child.out").read_text()
    (tmp_path / "callgrind.15360").write_text(child)
    half = child[: child.index("pid:") + len("pid: ")]  # cut short as its number is written
    (tmp_path / "callgrind.77").write_text(half)
    paths = sorted(tmp_path.iterdir())
    with pytest.raises(ValueError):  # what reading it would do
        parse_callgrind(half)
    (counted,) = read_counts(LOCAL_HOST, paths, before={77})
    assert counted == parse_callgrind(child)


def _backend(pid: int, **functions: int) -> ProcessCounts:
    return ProcessCounts(pid, {"PostgresMain": 50, **functions})


def test_instructions_per_transaction_exclude_what_each_connection_does_once() -> None:
    setup = {"InitPostgres": 40_000, "proc_exit": 3_000}
    reference = [_backend(1, **setup, ExecScan=100), _backend(2, **setup, ExecScan=100)]
    measured = [
        _backend(3, **setup, ExecScan=100 * 100, spin=5 * 99),
        _backend(4, **setup, ExecScan=100 * 100, spin=5 * 99),
        ProcessCounts(5, {"AutoVacWorkerMain": 10**9}),  # no client backend: not counted
    ]
    counted = counted_run(measured, 200, reference, 2)
    assert counted is not None
    assert counted.instructions_per_tx == pytest.approx(105)  # ExecScan 100 + spin 5
    profile = counted.profile
    assert profile.counted and profile.transactions == 198 and profile.unit == "instructions"
    assert profile.folded == "client backend;ExecScan 19800\nclient backend;spin 990\n"
    assert profile.per_transaction(19800, 10**6) == 100  # over its own transactions
    assert counted_run(measured, 2, reference, 2) is None  # nothing beyond the reference


def test_a_counted_profile_diff_is_in_instructions_per_transaction() -> None:
    def counted(folded: str, transactions: int) -> Profile:
        return Profile(0, 0, 0, "", folded, counter="instructions (callgrind)", transactions=100)

    base = counted("client backend;ExecScan 10000\nclient backend;spin 0\n", 100)
    patched = counted("client backend;ExecScan 10000\nclient backend;spin 500\n", 100)
    rows = diff(base, 999, patched, 999)  # the runs' transactions do not count: the profiles'
    assert rows[0].function == "spin" and rows[0].self_change_us == 5
    timed = Profile(99, 10, 0, "", "client backend;spin 10\n")
    with pytest.raises(ValueError, match="counted"):
        diff(base, 1, timed, 1)


def test_postgres_starts_under_callgrind_zeroed_at_fork(tmp_path: Path) -> None:
    script = callgrind_wrapper(Path("/opt/pg 15/bin/postgres"), tmp_path / "counts")
    assert script.startswith("#!/bin/sh\nexec valgrind --tool=callgrind --trace-children=yes")
    assert "--zero-before=fork_process" in script and "--compress-strings=no" in script
    assert f"--callgrind-out-file={tmp_path}/counts/callgrind.%p" in script
    assert script.endswith("'/opt/pg 15/bin/postgres' \"$@\"\n")


def test_without_valgrind_counting_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_valgrind(LOCAL_HOST)  # installed here
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerError, match=r"valgrind is not installed on .*apt install valgrind"):
        check_valgrind(LOCAL_HOST)


PLAN = """
[campaign]
name = "counted"
[defaults]
transactions = 100
warmup = "0s"
{defaults}
[[server]]
name = "a"
install = "embedded"
count = "instructions"
{server}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""


def _parsed(tmp_path: Path, defaults: str = "", server: str = "") -> plan.Plan:
    text = PLAN.format(defaults=defaults, server=server)
    return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_run_refuses_to_count_without_valgrind_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(PLAN.format(defaults="", server=""))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to run there: no valgrind
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "pgbenchlab: error: server a: count: valgrind is not installed on local: "
        "install valgrind (apt install valgrind), or remove count\n"
    )
    assert not results.exists()


def test_a_counted_server_runs_fixed_transactions_as_a_cell_of_its_own(tmp_path: Path) -> None:
    counted = _parsed(tmp_path)
    (spec,) = counted.specs
    assert spec.counted and counted.counts("a") and spec.cell.stored()["count"] == "instructions"
    timed = plan.parse(
        PLAN.format(defaults="", server="").replace('count = "instructions"\n', ""),
        str(tmp_path / "t.toml"),
        base=tmp_path,
    )
    assert "count" not in timed.specs[0].cell.stored()  # timed cells keep their identity
    assert timed.specs[0].cell_id != spec.cell_id


@pytest.mark.parametrize(
    ("defaults", "server", "refusal"),
    [
        ('duration = "10s"', "", r"give `transactions` \(per client, -t\), not a duration"),
        ("", "rate = [100]", "counted runs take no rate or latency_limit"),
        ('profile = "on"', "", "not profiled by perf as well"),
    ],
)
def test_what_cannot_be_counted_is_refused(
    tmp_path: Path, defaults: str, server: str, refusal: str
) -> None:
    text = PLAN.format(defaults=defaults, server=server)
    if "duration" in defaults:
        text = text.replace("transactions = 100\n", "")
    with pytest.raises(PlanError, match=refusal):
        plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_external_and_half_counted_servers_are_refused(tmp_path: Path) -> None:
    external = PLAN.format(defaults="", server="").replace(
        'install = "embedded"', 'dsn = "host=/tmp dbname=x"'
    )
    with pytest.raises(PlanError, match=r"external \(dsn\): only a managed server"):
        plan.parse(external, str(tmp_path / "p.toml"), base=tmp_path)
    mixed = PLAN.format(defaults="", server="").replace('count = "instructions"\n', "")
    counted_workload = '{ name = "w", builtin = "select-only", count = "instructions" }'
    mixed = mixed.replace('"select-only"]', f'"select-only", {counted_workload}]')
    with pytest.raises(PlanError, match="server a has counted and timed runs"):
        plan.parse(mixed, str(tmp_path / "m.toml"), base=tmp_path)


def test_counted_profiles_and_instructions_are_stored(tmp_path: Path) -> None:
    db = write_synthetic(
        tmp_path / "results", SyntheticPlan(workloads=("select-only",), clients=(1,), repeats=1)
    )
    counted = Profile(
        0, 990, 0, "client backends", "client backend;spin 990\n",
        counter="instructions (callgrind)", transactions=198,
    )  # fmt: skip
    with Store(db) as store:
        run_id = store.run_records(store.campaign_id(None))[0].id
        with store.transaction():
            write_profile(store.db, run_id, counted)
        assert store.profiles_by_run([run_id])[run_id] == counted
        columns = {r["name"] for r in store.db.execute("PRAGMA table_info(runs)")}
    assert {"instructions_per_tx", "instructions_tool"} <= columns


def test_schema_25_adds_counting_to_a_database_of_24(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, 25)))
    db.execute("PRAGMA user_version = 24")
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        profile_columns = [r["name"] for r in store.db.execute("PRAGMA table_info(run_profiles)")]
    assert profile_columns[-2:] == ["counter", "transactions"]


def test_a_counted_profile_is_not_compared_with_perfs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = write_synthetic(
        tmp_path / "results", SyntheticPlan(workloads=("select-only",), clients=(1,), repeats=1)
    )
    counted = Profile(0, 9, 0, "c", "client backend;spin 9\n", counter="instructions (callgrind)")
    timed = Profile(99, 9, 0, "s", "client backend;spin 9\n")
    with Store(db) as store:
        a, b = (r.id for r in store.run_records(store.campaign_id(None))[:2])
        with store.transaction():
            write_profile(store.db, a, counted)
            write_profile(store.db, b, timed)
    assert main(["profile", "--diff", str(a), str(b), "--results", str(db.parent)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("compare counted runs with counted ones") and "\n" not in err


def _counted_campaign(tmp_path: Path, repeats: int = 1) -> Path:
    """Synthetic runs marked as counted: pg18's 5 % more instructions per transaction, a spin."""
    db = write_synthetic(
        tmp_path / "results",
        SyntheticPlan(workloads=("select-only",), clients=(1,), repeats=repeats),
    )
    with Store(db) as store:
        runs = store.run_records(store.campaign_id(None))
        per_tx = {"pg15": 40_000.0, "pg18": 42_000.0}
        with store.transaction():
            for run in runs:
                spin = 2_000 * 300 if run["server"] == "pg18" else 0
                folded = f"client backend;ExecScan {40_000 * 300}\nclient backend;spin {spin}\n"
                counted = Profile(
                    0, 1, 0, "c", folded, counter="instructions (callgrind)", transactions=300
                )
                write_profile(store.db, run.id, counted)
                store.db.execute(
                    "UPDATE runs SET instructions_per_tx = ?, instructions_tool = 'callgrind' "
                    "WHERE id = ?",
                    (per_tx[run["server"]], run.id),
                )
    return db


def test_the_report_opens_with_the_counted_change_and_the_function_behind_it(
    tmp_path: Path,
) -> None:
    with Store(_counted_campaign(tmp_path)) as store:
        view = build.load_view(store, store.campaign_id(None), baseline="pg15")
    (said,) = [f.text for f in answer.findings(view) if "instructions per transaction" in f.text]
    assert said.endswith(
        "instructions per transaction (counted by callgrind): 40,000 → 42,000 (+5.0%); "
        "most changed: spin (+2,000 per transaction)"
    )


def test_counted_runs_time_is_the_simulators_and_is_not_compared(tmp_path: Path) -> None:
    # The synthetic servers' TPS differ far beyond noise; under callgrind that difference is
    # the simulator's, so only the instructions are compared.
    with Store(_counted_campaign(tmp_path, repeats=3)) as store:
        view = build.load_view(store, store.campaign_id(None), baseline="pg15")
    assert view.changes == ()
    kinds = [(f.kind, f.text) for f in answer.findings(view)]
    assert [t for k, t in kinds if k == "comparison"] == [
        t for _, t in kinds if "instructions per transaction" in t
    ]


def test_compare_on_counted_runs_takes_their_counts_and_refuses_their_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _counted_campaign(tmp_path, repeats=3)
    results = str(db.parent)
    assert (
        main(
            [
                "compare",
                "--results",
                results,
                "--baseline",
                "pg15",
                "--candidate",
                "pg18",
                "--metric",
                "tps,p99",
            ]
        )
        == 2
    )
    said = capsys.readouterr().err
    assert "counted under a CPU simulator" in said and "their p99, tps are the simulator's" in said
    asked = ["compare", "--results", results, "--baseline", "pg15", "--candidate", "pg18", "--json"]
    assert main([*asked, "--metric", "tps,instructions_per_tx"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert {c["metric"] for c in changes} == {"instructions_per_tx"}
    assert changes[0]["verdict"] == "regressed"  # 5 % more instructions
