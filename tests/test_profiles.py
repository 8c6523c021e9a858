"""Profiles without a server: perf script output folded (golden files captured with real perf,
see tests/golden/perf/README.md), backend types from process titles, top functions and the
difference between two runs per transaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
from pgbenchlab.profiles import Profile, diff, fold_perf_script, top_functions
from pgbenchlab.profiles.backends import CLIENT, POSTMASTER, backend_type
from pgbenchlab.profiles.folding import frame_name
from pgbenchlab.profiles.top import ALL, backend_samples
from pgbenchlab.report.views.profiles import flame_tree, nodes_per_graph
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
