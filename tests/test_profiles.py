"""Profiles without a server: perf script output folded (golden files captured with real perf,
see tests/golden/perf/README.md), backend types from process titles, top functions and the
difference between two runs per transaction; pgbench's profiles stored, drawn and shown beside
the server's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab import plan
from pgbenchlab.builds.recipe import (
    PROFILING_CFLAGS,
    Compiler,
    SourceIdentity,
    cache_key,
    with_cflags,
)
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError
from pgbenchlab.profiles import PGBENCH, SERVER, Profile, diff, fold_perf_script, top_functions
from pgbenchlab.profiles.backends import CLIENT, POSTMASTER, backend_type
from pgbenchlab.profiles.folding import frame_name
from pgbenchlab.profiles.top import ALL, backend_samples
from pgbenchlab.report.views import build
from pgbenchlab.report.views.profiles import flame_tree, nodes_per_graph
from pgbenchlab.store import Store
from pgbenchlab.store.profiles import write_profile
from pgbenchlab.telemetry.profiler import complete_share

GOLDEN = Path(__file__).parent / "golden" / "perf"


def test_a_real_select_only_recording_folds_into_whole_stacks() -> None:
    script = fold_perf_script((GOLDEN / "pg15-select-only.script").read_text())
    assert script.samples == 150 and script.lost == 0
    assert set(script.comms.values()) == {"postgres"} and len(script.comms) == 7
    stacks = [stack.split(";") for _, stack in script.stacks]
    # Root first, offsets dropped, the unnamed static functions shown by their binary.
    assert {s[0] for s in stacks} == {"__libc_start_call_main", "[unknown]", "_Fork", "__munmap"}
    assert any(s[:3] == ["__libc_start_call_main", "main", "PostmasterMain"] for s in stacks)
    assert any("ExecInitIndexScan" in s and "standard_ExecutorStart" in s for s in stacks)
    assert not any("+0x" in f for s in stacks for f in s)
    assert complete_share(script.stacks) > 0.9  # Debian's 15 keeps frame pointers


def test_a_system_wide_recording_keeps_the_servers_process_tree() -> None:
    # perf on every CPU: the server's processes are the postmaster (3610) and what it forked,
    # -C's short-lived backends included; the shell loop's `date`s and the rest are dropped.
    script = fold_perf_script((GOLDEN / "system-wide-connect.script").read_text())
    server = script.descendants(3610)
    assert script.samples == 317 and len(server) > 100  # a backend per transaction
    kept = {script.comms[pid] for pid, _ in script.stacks if pid in server}
    assert kept == {"postgres"}
    dropped = {script.comms[pid] for pid, _ in script.stacks if pid not in server}
    assert {"date", "swapper"} <= dropped and "postgres" not in dropped
    assert sum(n for (pid, _), n in script.stacks.items() if pid in server) == 116


def test_a_real_pgbench_recording_folds_both_of_its_threads() -> None:
    script = fold_perf_script((GOLDEN / "pgbench-select-only.script").read_text())
    assert script.samples == 230 and script.lost == 0 and list(script.comms.values()) == ["pgbench"]
    roots = Counter(
        stack.split(";")[0] for (_, stack), n in script.stacks.items() for _ in range(n)
    )
    # The main thread (its client 0) and the thread it started (client 1), each about half.
    assert roots["__libc_start_call_main"] > 50 and roots["start_thread"] > 50
    functions = {f for _, stack in script.stacks for f in stack.split(";")}
    assert {"PQsendQueryPrepared", "PQconsumeInput", "[pgbench]"} <= functions  # stripped
    share = complete_share(script.stacks)
    assert share is not None and 0.6 < share < 0.8  # syscall stubs without frame pointers


def test_lost_samples_are_summed_from_perf_records() -> None:
    script = fold_perf_script((GOLDEN / "lost-events.script").read_text())
    assert script.lost == 21 and script.samples == 29


def test_frame_names() -> None:
    assert frame_name("ExecScan+0x4f", "/usr/lib/postgresql/15/bin/postgres") == "ExecScan"
    assert frame_name("[unknown]", "/usr/lib/postgresql/15/bin/postgres") == "[postgres]"
    assert frame_name("[unknown]", "[unknown]") == "[unknown]"
    assert frame_name("a;b", "x") == "a:b"


def test_backend_types_from_process_titles() -> None:
    # As /proc/PID/cmdline gives them (PostgreSQL 15, with a cluster name, before 11).
    assert backend_type("postgres: checkpointer \0") == "checkpointer"
    assert backend_type("postgres: background writer ") == "background writer"
    assert backend_type("postgres: walwriter ") == "walwriter"
    assert backend_type("postgres: wal writer process   ") == "walwriter"
    assert backend_type("postgres: main: autovacuum worker pgbench_s1") == "autovacuum worker"
    assert backend_type("postgres: pgbenchlab pgbench_s1 127.0.0.1(40112) SELECT") == CLIENT
    assert backend_type("postgres: pgbenchlab pgbench_s1 [local] idle") == CLIENT
    assert backend_type("/usr/lib/postgresql/15/bin/postgres\0-D\0/x") == POSTMASTER


def _profile(folded: str, frequency: int = 100) -> Profile:
    return Profile(frequency, 0, 0, "test", folded)


def test_top_functions_self_and_total_by_backend_type() -> None:
    profile = _profile(
        "client backend;main;ExecScan;_bt_compare 30\n"
        "client backend;main;ExecScan 10\n"
        "checkpointer;main;CheckpointerMain;pg_fsync 20\n"
    )
    assert backend_samples(profile) == {"client backend": 40, "checkpointer": 20}
    rows = {(r.backend_type, r.function): r for r in top_functions(profile)}
    scan = rows[("client backend", "ExecScan")]
    assert (scan.self_samples, scan.total_samples, scan.total_share) == (10, 40, 1.0)
    assert rows[(ALL, "_bt_compare")].self_share == 0.5
    assert rows[("checkpointer", "pg_fsync")].self_samples == 20


def test_diff_is_in_cpu_time_per_transaction() -> None:
    # B spends twice the samples in hot() but commits twice the transactions: no change;
    # spin() is new in B.
    a = _profile("client backend;main;hot 100\n")
    b = _profile("client backend;main;hot 200\nclient backend;main;spin 50\n")
    rows = {r.function: r for r in diff(a, 1000, b, 2000)}
    assert rows["hot"].self_a_us == rows["hot"].self_b_us == 1000.0  # 100/100 Hz/1000 tx
    assert rows["spin"].self_change_us == 250.0
    assert diff(a, 1000, b, 2000)[0].function == "spin"


def test_a_missing_perf_is_one_line_with_the_fix_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(
        '[campaign]\nname = "p"\n[defaults]\nduration = "1s"\nprofile = "on"\n'
        '[[server]]\nname = "a"\ninstall = "embedded"\n'
        '[matrix]\nscale = [1]\nworkload = ["select-only"]\nclients = [1]\n'
    )
    monkeypatch.setenv("PATH", str(tmp_path))  # no perf there
    results = tmp_path / "results"
    assert main(["run", str(plan_file), "--results", str(results), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "pgbenchlab: error: profile: perf is not installed: install Debian's linux-perf "
        "(apt-get install linux-perf)"
    ]
    assert not results.exists()


def test_flame_trees_are_pruned_to_their_budget_keeping_every_sample() -> None:
    folded = "".join(f"client backend;main;f{i};g{i} {i + 1}\n" for i in range(100))
    graph = flame_tree(_profile(folded), max_nodes=20)

    def nodes(node: list[Any]) -> int:
        return 1 + sum(nodes(child) for child in node[2:])

    assert nodes(graph["tree"]) <= 20
    assert graph["tree"][1] == sum(range(1, 101))  # the root keeps every sample
    root, kind = graph["tree"], graph["tree"][2]
    assert graph["names"][kind[0]] == "client backend" and kind[1] == root[1]
    assert nodes_per_graph(1) == 2_000 and nodes_per_graph(100) == 400


def test_a_profiled_build_is_another_build_with_frame_pointers() -> None:
    source = SourceIdentity("debian", "postgresql-13", "abc", "13.16")
    compiler = Compiler("/usr/bin/gcc", "gcc 12")
    plain = cache_key(source, (), ("--without-icu",), compiler)
    assert cache_key(source, (), ("--without-icu",), compiler, profiling=True) != plain
    assert with_cflags(("--without-icu",), PROFILING_CFLAGS) == (
        "--without-icu",
        "CFLAGS=-O2 -fno-omit-frame-pointer -g",
    )


PLAN = """
[campaign]
name = "p"
repeats = 2
[defaults]
duration = "1s"
{defaults}
[[server]]
name = "a"
install = "embedded"
{server}
[[server]]
name = "b"
install = "embedded"
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1, 2]
"""


def test_profile_modes_in_the_plan(tmp_path: Path) -> None:
    def specs(defaults: str = "", server: str = "") -> list[tuple[str, int, int, str]]:
        text = PLAN.format(defaults=defaults, server=server)
        parsed = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
        return [(s.server, s.clients, s.repeat, s.options.profile) for s in parsed.specs]

    assert {p for *_, p in specs()} == {"off"}
    # auto: a last round of one more repeat per cell, the only one profiled; same cells.
    auto = specs('profile = "auto"')
    extra = [(s, c, 3, "extra") for s in ("a", "b") for c in (1, 2)]
    assert auto[-4:] == extra
    assert {p for *_, p in auto[:-4]} == {"off"}
    # A server of its own: only its runs profiled.
    assert {(s, p) for s, _, _, p in specs(server='profile = "on"')} == {("a", "on"), ("b", "off")}
    with pytest.raises(PlanError, match="profile"):
        specs('profile = "sometimes"')


def test_pgbench_is_profiled_with_its_runs_unless_the_plan_says_not(tmp_path: Path) -> None:
    def parsed(pgbench: str, profile: str = "on") -> plan.Plan:
        text = (
            f'[campaign]\nname = "p"\n[defaults]\nprofile = "{profile}"\n[pgbench]\n{pgbench}\n'
            '[[server]]\nname = "a"\ninstall = "embedded"\n'
            '[matrix]\nscale = [1]\nworkload = ["select-only"]\nclients = [1]\n'
        )
        return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)

    assert parsed("").pgbench_profile and parsed("").profiles_pgbench
    assert not parsed("", profile="off").profiles_pgbench  # nothing profiled at all
    assert not parsed("profile = false").profiles_pgbench
    with pytest.raises(PlanError, match=r"pgbench\.profile"):
        parsed('profile = "yes"')


def _stored(tmp_path: Path) -> tuple[Path, list[int]]:
    """A synthetic campaign of two servers whose runs all carry both profiles but the last,
    which has the server's alone."""
    db = write_synthetic(
        tmp_path / "results",
        SyntheticPlan(workloads=("select-only",), clients=(1,), repeats=1),
    )
    server = Profile(100, 30, 0, "server", "client backend;main;ExecScan 30\n")
    client = Profile(100, 12, 0, "pgbench", "pgbench;main;PQgetResult 12\n", process=PGBENCH)
    with Store(db) as store:
        ids = [r.id for r in store.run_records(store.campaign_id(None))]
        with store.transaction():
            for run_id in ids:
                write_profile(store.db, run_id, server)
                if run_id != ids[-1]:
                    write_profile(store.db, run_id, client)
    return db, ids


def test_pgbench_profiles_are_stored_apart_and_drawn_after_the_servers(tmp_path: Path) -> None:
    db, ids = _stored(tmp_path)
    with Store(db) as store:
        assert store.profiles_by_run(ids)[ids[0]].process == SERVER
        pgbench = store.profiles_by_run(ids, PGBENCH)
        assert sorted(pgbench) == ids[:-1] and pgbench[ids[0]].folded.startswith("pgbench;")
        view = build.load_view(store, store.campaign_id(None), baseline="pg15")
    processes = [(p.cell_id, p.profile.process) for p in view.profiles]
    first, last = processes[0][0], processes[-1][0]
    assert processes == [(first, SERVER), (first, PGBENCH), (last, SERVER)]
    assert nodes_per_graph(len(view.profiles)) <= 2_000  # every graph shares one budget
    # Each candidate compared with its baseline per process: pg18's run has no pgbench profile.
    assert [c.candidate.profile.process for c in view.profile_changes] == [SERVER]


def test_the_profile_command_shows_pgbench_with_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, ids = _stored(tmp_path)
    results = str(db.parent)
    assert main(["profile", str(ids[0]), "--results", results]) == 0
    out = capsys.readouterr().out
    assert f"also profiled: pgbench (`pgbenchlab profile {ids[0]} --process pgbench`)" in out
    assert (
        main(["profile", str(ids[0]), "--process", "pgbench", "--json", "--results", results]) == 0
    )
    shown = json.loads(capsys.readouterr().out)
    assert shown["process"] == PGBENCH and shown["backend_types"] == {"pgbench": 12}
    assert [t["function"] for t in shown["top"]] == ["PQgetResult", "main"]
    diff_argv = ["profile", "--diff", str(ids[0]), str(ids[0]), "--process", "pgbench"]
    assert main([*diff_argv, "--results", results]) == 0
    assert "PQgetResult" in capsys.readouterr().out
    assert main(["profile", str(ids[-1]), "--process", "pgbench", "--results", results]) == 2
    assert "has no pgbench profile, only the server's" in capsys.readouterr().err
