"""A campaign's orchestration without PostgreSQL: recorded pgbench runs (the golden captures)
replayed through the executor seam, stand-in servers (tests/replay.py), the real store.

What is checked here is the sequence around the runs: stored in order, resumed, failures kept
apart, aborted and interrupted runs repeated next time, warnings recorded. The real-server
tests (test_campaign, test_statuses, test_signals) check the same against real clusters.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pgbenchlab import findings, plan
from pgbenchlab.campaign import RESULTS_DB, Outcome
from pgbenchlab.campaign.runner import conduct
from pgbenchlab.findings import WarningCode
from replay import Replay, ReplayExecutor, StandInServers, client, golden_log, recorded
from support import QuietReporter

PLAN = """
[campaign]
name = "replayed"
order = "sequential"

[defaults]
duration = "2s"
warmup = "0s"
threads = 1

[[server]]
name = "ext"
dsn = "host=/nonexistent port=5432 user=bench dbname=bench"
init = true

[matrix]
scale = [{scale}]
workload = ["tpcb-like"]
clients = [1, 2, 4]
"""


def the_plan(tmp_path: Path, *, scale: int) -> plan.Plan:
    text = PLAN.format(scale=scale)
    return plan.parse(text, str(tmp_path / "replayed.toml"), base=tmp_path)


def ok(cpu_s: float = 0.2, wall_s: float = 2.0) -> Replay:
    return Replay(
        recorded("16", "tpcb-progress", cpu_s=cpu_s, wall_s=wall_s), tuple(golden_log("16", "tpcb"))
    )


def campaign(
    tmp_path: Path,
    replays: list[Replay],
    *,
    scale: int = 8,
    refuse_checkpoint: bool = False,
    fail_dataset: frozenset[int] = frozenset(),
) -> tuple[Outcome, ReplayExecutor, QuietReporter]:
    """Conduct the plan's campaign in tmp_path/results, pgbench replayed from `replays`."""
    the_plan_ = the_plan(tmp_path, scale=scale)
    replayer = ReplayExecutor(replays, refuse_checkpoint, set(fail_dataset))
    reporter = QuietReporter()
    servers = StandInServers(the_plan_)
    outcome = conduct(the_plan_, tmp_path / "results", reporter, client("16"), servers, replayer)
    return outcome, replayer, reporter


def stored(tmp_path: Path, sql: str = "SELECT * FROM runs ORDER BY id") -> list[sqlite3.Row]:
    db = sqlite3.connect(tmp_path / "results" / RESULTS_DB)
    db.row_factory = sqlite3.Row
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def clients_of(argv: list[str]) -> int:
    return int(argv[argv.index("-c") + 1])


def test_a_campaigns_runs_are_run_and_stored_in_plan_order(tmp_path: Path) -> None:
    outcome, replayer, reporter = campaign(tmp_path, [ok(), ok(), ok()])

    assert (outcome.ran, outcome.failed, outcome.interrupted) == (3, 0, False)
    assert [clients_of(a) for a in replayer.argvs] == [1, 2, 4]
    assert "--log-prefix=" + str(tmp_path / "results" / "artifacts") in " ".join(replayer.argvs[0])
    runs = stored(tmp_path)
    assert [(r["sequence"], r["clients"], r["status"]) for r in runs] == [
        (0, 1, "ok"),
        (1, 2, "ok"),
        (2, 4, "ok"),
    ]
    assert all(r["tps"] == pytest.approx(2939.525184) for r in runs)
    assert {r["latency_source"] for r in runs} == {"full log"}
    assert runs[0]["argv_json"].startswith('["pgbench", "-n", "-c", "1"')
    phases = [text for kind, text in reporter.events if kind == "phase"]
    assert phases[:6] == ["server", "dataset", "vacuum", "checkpoint", "measuring", "analysing"]
    assert [e for e in reporter.events if e[0] == "finished"] == [("finished", "ok")] * 3
    campaigns = stored(tmp_path, "SELECT status FROM campaigns")
    assert [c["status"] for c in campaigns] == ["finished"]


def test_running_the_same_plan_again_skips_the_runs_done(tmp_path: Path) -> None:
    campaign(tmp_path, [ok(), ok(), ok()])
    again, replayer, _ = campaign(tmp_path, [])

    assert (again.ran, again.skipped_done) == (0, 3)
    assert replayer.argvs == []
    assert len(stored(tmp_path)) == 3


def test_a_failed_run_does_not_lose_the_others(tmp_path: Path) -> None:
    no_report = Replay(recorded("15", "missing-tables"))
    outcome, _, _ = campaign(tmp_path, [ok(), no_report, ok()])

    assert (outcome.ran, outcome.failed) == (3, 1)
    runs = stored(tmp_path)
    assert [r["status"] for r in runs] == ["ok", "failed", "ok"]
    assert runs[1]["error"].startswith("pgbench exited 1 without a report")
    assert runs[1]["tps"] is None and runs[2]["tps"] == pytest.approx(2939.525184)


def test_a_failure_before_pgbench_is_recorded_and_the_campaign_goes_on(tmp_path: Path) -> None:
    outcome, replayer, _ = campaign(tmp_path, [ok(), ok(), ok()], fail_dataset=frozenset({8}))

    assert (outcome.ran, outcome.failed) == (3, 3)
    assert {r["error"] for r in stored(tmp_path)} == {"pgbench -i -s 8 failed (replayed)"}
    assert replayer.argvs == []


def test_an_aborted_run_is_repeated_next_time(tmp_path: Path) -> None:
    aborted = Replay(recorded("15", "client-abort-midrun"))
    first, _, _ = campaign(tmp_path, [ok(), aborted, ok()])
    assert (first.ran, first.failed) == (3, 1)
    assert [r["status"] for r in stored(tmp_path)] == ["ok", "aborted", "ok"]

    second, replayer, _ = campaign(tmp_path, [ok()])

    assert (second.ran, second.skipped_done, second.failed) == (1, 2, 0)
    assert [clients_of(a) for a in replayer.argvs] == [2]
    latest = stored(tmp_path, "SELECT status, clients FROM latest_runs ORDER BY sequence")
    assert [(r["clients"], r["status"]) for r in latest] == [(1, "ok"), (2, "ok"), (4, "ok")]


def test_an_interruption_ends_the_campaign_and_keeps_the_runs_before(tmp_path: Path) -> None:
    stopped = Replay(recorded("16", "tpcb-progress"), interrupt=True)
    outcome, replayer, _ = campaign(tmp_path, [ok(), stopped, ok()])

    assert outcome.interrupted and outcome.ran == 2
    assert len(replayer.argvs) == 2  # the third run never started
    runs = stored(tmp_path)
    assert [r["status"] for r in runs] == ["ok", "interrupted"]
    assert runs[1]["error"] == "interrupted by the user"
    assert [c["status"] for c in stored(tmp_path, "SELECT status FROM campaigns")] == [
        "interrupted"
    ]

    again, replayer, _ = campaign(tmp_path, [ok(), ok()])

    assert (again.ran, again.skipped_done, again.interrupted) == (2, 1, False)
    assert [clients_of(a) for a in replayer.argvs] == [2, 4]


def test_warnings_are_stored_as_codes_with_their_numbers(tmp_path: Path) -> None:
    busy = ok(cpu_s=1.9, wall_s=9.0)  # 95 % of one thread over -T 2, 9 s long
    campaign(tmp_path, [ok(), busy, ok()], scale=2, refuse_checkpoint=True)

    stored_warnings = [findings.from_json(r["warnings_json"]) for r in stored(tmp_path)]
    codes = [[w.code for w in run] for run in stored_warnings]
    assert codes == [
        [WarningCode.CHECKPOINT_REFUSED],
        [WarningCode.CHECKPOINT_REFUSED, WarningCode.RUN_STALLED, WarningCode.PGBENCH_SATURATED],
        [WarningCode.CHECKPOINT_REFUSED, WarningCode.SCALE_BELOW_CLIENTS],
    ]
    stalled = stored_warnings[1][1]
    assert stalled.evidence == {"wall_s": 9.0, "duration_s": 2}
    assert stored_warnings[2][1].evidence == {"scale": 2, "clients": 4}
    raw = stored(tmp_path)[2]["warnings_json"]
    assert '"text": "scale 2 < 4 clients on an updating workload' in raw
