"""connection = "pgbouncer" on real servers: Debian's PgBouncer started in front of a managed 15
by a real campaign (the CLI), pgbench through it in transaction and session pools, with -C and
without; what was stored (the pooler's version and settings, its CPU and SHOW STATS / SHOW POOLS
per second), nothing left running; a pooler starved of its CPU named as the run's limit (and the
same pooler unstarved not); -M prepared through a transaction pool refused before anything
starts."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgbenchlab import osuser
from pgbenchlab.campaign import RESULTS_DB, remove_clusters
from pgbenchlab.cli import main
from pgbenchlab.errors import ServerError
from pgbenchlab.server.pooler import find_pgbouncer
from pgbenchlab.store import Store
from support import require_installs
from test_faults import start_cli, wait_for

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]

PLAN = """
[campaign]
name = "pooled-{mode}"
[defaults]
duration = "{duration}"
warmup = "0s"
protocol = "{protocol}"
vacuum = "none"
checkpoint = false
[matrix]
scale = 1
clients = [{clients}]
connect = [false, true]
connection = ["pgbouncer"]
[pooler]
pool_mode = "{mode}"
{pooler}
[[server]]
name = "pg15"
install = "15"
{server}
{pgbench}
"""


def plan_text(mode: str, **given: str) -> str:
    values = {"duration": "1s", "protocol": "simple", "clients": "4", "pooler": ""}
    values |= {"server": "", "pgbench": ""} | given
    return PLAN.format(mode=mode, **values)


def require_pgbouncer() -> None:
    try:
        find_pgbouncer(None)
    except ServerError as exc:
        pytest.skip(f"{exc}: real-pooler test NOT run")


def running(program: str, *, parent: int | None = None) -> dict[int, list[bytes]]:
    """The processes of that program running on this machine (zombies aside), with their
    arguments: those of the server account (another test's, on a test host, are another
    account's), or the children of parent."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            status = entry.name.isdigit() and (entry / "status").read_text()
            if not status or "\nState:\tZ" in status:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            ours = (
                int(fields["Uid"].split()[0]) == osuser.server_account().uid
                if parent is None
                else int(fields["PPid"]) == parent
            )
            if ours and (entry / "comm").read_text().strip() == program:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
    return found


def pgbouncers() -> set[int]:
    return set(running("pgbouncer"))


def measuring(cli: subprocess.Popen[str]) -> bool:
    """The campaign's measured pgbench runs (not pgbench -i): through the pooler last
    started, which no server restart stops before the run ends."""
    return any(b"-i" not in argv for argv in running("pgbench", parent=cli.pid).values())


def run_campaign(base: Path, text: str) -> tuple[int, Path, str]:
    """The plan run by the CLI: its exit code, results directory and what it printed."""
    plan, results = base / "plan.toml", base / "results"
    plan.write_text(text)
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
        code = main(["run", str(plan), "--results", str(results), "-q"])
    return code, results, printed.getvalue()


def stored_runs(results: Path) -> list[dict[str, object]]:
    with Store(results / RESULTS_DB) as store:
        rows = store.db.execute(
            "SELECT id, connect, status, transactions, verdict, evidence_json, warnings_json "
            "FROM runs LEFT JOIN run_diagnosis ON run_diagnosis.run_id = runs.id ORDER BY id"
        ).fetchall()
        runs = [dict(r) for r in rows]
        for run in runs:
            totals = store.db.execute(
                "SELECT source, metric, value FROM run_telemetry_totals WHERE run_id = ?",
                (run["id"],),
            ).fetchall()
            run["totals"] = {(str(s), str(m)): float(v) for s, m, v in totals}
            seconds = store.db.execute(
                "SELECT DISTINCT source FROM run_telemetry_seconds WHERE run_id = ?",
                (run["id"],),
            ).fetchall()
            run["series"] = {str(r[0]) for r in seconds}
    return runs


@pytest.fixture(scope="module", params=["transaction", "session"])
def pooled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, list[dict[str, object]], set[int]]]:
    """A campaign through the pooler in each pool mode, and the pgbouncers left after it."""
    require_installs("15")
    require_pgbouncer()
    mode = str(request.param)
    before = pgbouncers()
    code, results, printed = run_campaign(tmp_path_factory.mktemp(mode), plan_text(mode))
    try:
        assert code == 0, printed
        yield mode, results, stored_runs(results), pgbouncers() - before
    finally:
        remove_clusters(results)


def test_pgbench_runs_through_the_pooler_with_and_without_new_connections(
    pooled: tuple[str, Path, list[dict[str, object]], set[int]],
) -> None:
    mode, _results, runs, _left = pooled
    assert sorted(int(r["connect"]) for r in runs) == [0, 1]  # type: ignore[call-overload]
    for run in runs:
        assert run["status"] == "ok"
        assert json.loads(str(run["warnings_json"])) == []  # the server's commits agree
        totals: dict[tuple[str, str], float] = run["totals"]  # type: ignore[assignment]
        transactions = int(run["transactions"])  # type: ignore[call-overload]
        # every transaction pgbench counted passed through the pooler (and those in flight
        # when -T ended, which pgbench does not count)
        passed = totals[("pgbouncer_stats", "total_xact_count")]
        assert transactions <= passed <= transactions + 4, mode
        assert totals[("pooler", "cpu_s")] > 0
        assert {"pooler", "pgbouncer_stats", "pgbouncer_pools"} <= run["series"]  # type: ignore[operator]


def test_the_poolers_version_and_settings_are_stored_and_it_is_stopped(
    pooled: tuple[str, Path, list[dict[str, object]], set[int]],
) -> None:
    mode, results, _runs, left = pooled
    assert left == set()  # every pooler the campaign started has stopped
    with Store(results / RESULTS_DB) as store:
        campaign = store.find_campaign(f"pooled-{mode}")
        assert campaign is not None
        poolers = store.poolers(campaign.id)
    facts = poolers["pg15"]
    assert facts.kind == "pgbouncer" and facts.version.startswith("PgBouncer 1.")
    assert facts.settings["pool_mode"] == mode
    assert facts.settings["default_pool_size"] == "20"  # PgBouncer's own default
    assert facts.settings["auth_type"] == "trust"  # its private socket: no password anywhere
    assert facts.settings["listen_addr"] == ""  # and no TCP


def test_prepared_through_a_transaction_pool_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    require_installs("15")
    require_pgbouncer()
    before = pgbouncers()
    code, results, printed = run_campaign(tmp_path, plan_text("transaction", protocol="prepared"))
    assert code == 2
    lines = [line for line in printed.splitlines() if "error" in line]
    assert len(lines) == 1, printed
    assert 'protocol "prepared" through a transaction pool needs PgBouncer 1.21' in lines[0]
    assert not results.exists()
    assert pgbouncers() == before


@contextlib.contextmanager
def burning(cpu: int) -> Iterator[None]:
    """A real-time CPU burner pinned to cpu: a normal process there (the pooler) runs only in
    the share the kernel keeps for them (5 % of each second), and three normal burners share
    that with it. Normal burners alone would hardly delay it: the scheduler lets a task that
    sleeps between bursts, as a pooler does, run first when it wakes."""
    burn = [sys.executable, "-c", "while True: pass"]
    pin = ["taskset", "-c", str(cpu)]
    burners = [subprocess.Popen([*pin, "chrt", "-f", "1", *burn])]
    burners += [subprocess.Popen([*pin, *burn]) for _ in range(3)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


STARVED = {
    "duration": "8s",
    "clients": "64",
    "pooler": 'cpus = "1"',
    "server": 'cpus = "0"',
    "pgbench": '[pgbench]\ncpus = "0"',
}


@pytest.mark.parametrize("starved", [True, False], ids=["starved", "alone"])
@pytest.mark.alone
def test_a_pooler_starved_of_its_cpu_is_named_as_the_limit(tmp_path: Path, starved: bool) -> None:
    """The pooler pinned to CPU 1 with a real-time burner there (pgbench and the server on CPU
    0): on a CPU or waiting for one in ~95 % of each second, every run pooler_bound, with the
    pinning in its evidence; the same campaign without the burner: none is."""
    require_installs("15")
    require_pgbouncer()
    if os.geteuid() != 0 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs root (a real-time burner) and two CPUs: real-pooler test NOT run")
    with burning(1) if starved else contextlib.nullcontext():
        code, results, printed = run_campaign(tmp_path, plan_text("transaction", **STARVED))
    try:
        assert code == 0, printed
        runs = stored_runs(results)
    finally:
        remove_clusters(results)
    verdicts = [run["verdict"] for run in runs]
    if starved:
        assert verdicts == ["pooler_bound", "pooler_bound"], runs
        for run in runs:
            assert "pooler (pinned to CPU 1)" in str(run["evidence_json"])
    else:
        assert "pooler_bound" not in verdicts, runs


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_campaign_leaves_no_pooler_running(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """The signal arrives while pgbench runs through the pooler: the campaign ends
    interrupted (130), its pooler stopped with its server, its directory removed."""
    require_installs("15")
    require_pgbouncer()
    before = pgbouncers()
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text("transaction", duration="30s"))
    results = tmp_path / "results"
    cli = start_cli(plan, results)
    try:
        wait_for(lambda: pgbouncers() - before, timeout=120, every=0.05)
        started = pgbouncers() - before
        time.sleep(2)  # pgbench is running through it
        cli.send_signal(signum)
        _, stderr = cli.communicate(timeout=120)
        assert cli.returncode == 130, stderr
        assert pgbouncers() & started == set()  # gone (or a zombie left for init to reap)
    finally:
        if cli.poll() is None:
            cli.kill()
        remove_clusters(results)


def test_a_pooler_a_killed_campaign_left_is_stopped_by_clean(tmp_path: Path) -> None:
    """kill -9 while pgbench runs through the pooler leaves it running (it is a daemon of the
    server's account); `clean` stops it with the cluster it was in front of."""
    require_installs("15")
    require_pgbouncer()
    before = pgbouncers()
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text("transaction", duration="5s"))
    results = tmp_path / "results"
    cli = start_cli(plan, results)
    try:
        wait_for(lambda: measuring(cli), timeout=120, every=0.05)
        cli.kill()
        cli.communicate(timeout=60)
        left = pgbouncers() - before
        assert left, "the killed campaign's pooler is still running"
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["clean", "--results", str(results)]) == 0
        wait_for(lambda: not pgbouncers() & left, timeout=15, every=0.05)
    finally:
        if cli.poll() is None:
            cli.kill()
        remove_clusters(results)


def test_each_member_of_a_group_runs_through_a_pooler_of_its_own(tmp_path: Path) -> None:
    """Two servers driven together, each behind its own pooler: both parts ran through it
    (each server's commits agree with its own pgbench's count), both poolers are recorded, and
    none is left running."""
    require_installs("15")
    require_pgbouncer()
    before = pgbouncers()
    text = plan_text("transaction", clients="2").replace("connect = [false, true]\n", "")
    text += '[[server]]\nname = "b"\ninstall = "15"\n'
    text += '[[server_group]]\nname = "pair"\nservers = ["pg15", "b"]\nsolo = false\n'
    code, results, printed = run_campaign(tmp_path, text)
    try:
        assert code == 0, printed
        with Store(results / RESULTS_DB) as store:
            campaign = store.find_campaign("pooled-transaction")
            assert campaign is not None
            poolers = store.poolers(campaign.id)
            parts = store.db.execute(
                "SELECT server, transactions, commits_unexplained, verdict FROM run_servers"
            ).fetchall()
            (warnings,) = [r[0] for r in store.db.execute("SELECT warnings_json FROM runs")]
    finally:
        remove_clusters(results)
    assert sorted(poolers) == ["b", "pg15"]
    assert sorted(p[0] for p in parts) == ["b", "pg15"]
    for _server, transactions, unexplained, verdict in parts:
        # each member's commits checked against its own pgbench (through its pooler) ...
        assert transactions and unexplained is not None and verdict
    # ... and none disagrees beyond the check's tolerance
    assert "commits_disagree" not in [w["code"] for w in json.loads(warnings)], warnings
    assert pgbouncers() - before == set()
