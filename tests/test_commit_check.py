"""Every run checks pgbench's transaction count against the commits the server counted: a run
that another client shared carries a warning with both figures; an undisturbed one none."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.plan import RunSpec
from pgbenchlab.records.telemetry import RunTelemetry, Total
from pgbenchlab.server import Endpoint
from pgbenchlab.telemetry.crosscheck import check_commits
from support import QuietReporter, embedded_server, run_errors

OTHER_COMMITS = 3000


def telemetry(
    commits: float | None, statements: int = 40, errors: tuple[str, ...] = ()
) -> RunTelemetry:
    totals = () if commits is None else (Total("pg_stat_database", "xact_commit", commits),)
    return RunTelemetry(
        started_at=0.0,
        duration_s=5.0,
        server_version_num=180000,
        activity_rounds=25,
        counter_rounds=6,
        sources=(),
        series=(),
        totals=totals,
        waits=(),
        events=(),
        statements=(),
        errors=errors,
        sampler_statements=statements,
    )


def test_commits_within_the_tolerance_agree() -> None:
    check = check_commits(
        10_000, telemetry(10_055), clients=4, connect_each=False, builtin_only=True
    )
    assert check is not None and check.unexplained == 15 and check.agrees


def test_another_clients_commits_are_named_with_both_figures() -> None:
    check = check_commits(
        10_000, telemetry(12_040), clients=4, connect_each=False, builtin_only=True
    )
    assert check is not None and not check.agrees
    assert "pgbench counted 10,000 transactions" in check.warning()
    assert "the server committed 12,040" in check.warning()


def test_fewer_commits_than_transactions_disagree() -> None:
    check = check_commits(
        10_000, telemetry(9_000), clients=4, connect_each=False, builtin_only=True
    )
    assert check is not None and check.unexplained == -1_040 and not check.agrees


def test_a_new_connection_per_transaction_widens_the_tolerance() -> None:
    kept = check_commits(1_000, telemetry(3_000), clients=2, connect_each=False, builtin_only=True)
    each = check_commits(1_000, telemetry(3_000), clients=2, connect_each=True, builtin_only=True)
    assert kept is not None and not kept.agrees
    assert each is not None and each.agrees


@pytest.mark.parametrize(
    ("tel", "builtin_only"),
    [(telemetry(100), False), (telemetry(None), True), (telemetry(100, errors=("x",)), True)],
    ids=["custom-script", "no-counter", "sampler-errors"],
)
def test_no_check_without_a_sound_basis(tel: RunTelemetry, builtin_only: bool) -> None:
    assert (
        check_commits(10_000, tel, clients=1, connect_each=False, builtin_only=builtin_only) is None
    )


class OtherClient(QuietReporter):
    """During the second measured run, another client commits in the benchmark's database."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.measured = 0
        self.thread: threading.Thread | None = None

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring":
            self.measured += 1
            if self.measured == 2:
                self.thread = threading.Thread(target=self.commit_many)
                self.thread.start()
        elif self.thread is not None:
            self.thread.join()

    def commit_many(self) -> None:
        with self.endpoint.connect() as conn:
            for _ in range(OTHER_COMMITS):
                conn.execute("SELECT 1")


@pytest.fixture
def shared_server() -> Iterator[Endpoint]:
    with embedded_server("commits") as managed:
        yield managed.endpoint


@pytest.mark.server
def test_a_run_shared_with_another_client_carries_the_warning(
    shared_server: Endpoint, tmp_path: Path, results_dir: Path
) -> None:
    e = shared_server
    text = f"""
[campaign]
name = "commits"
repeats = 2
order = "sequential"
[defaults]
duration = "2s"
warmup = "0s"
[[server]]
name = "shared"
dsn = "host={e.host} port={e.port} user={e.user} dbname={e.dbname}"
init = true
[matrix]
scale = [1]
workload = ["select-only"]
clients = [2]
"""
    reporter = OtherClient(shared_server)
    outcome = run_campaign(plan.parse(text, "p.toml", base=tmp_path), results_dir, reporter)
    assert outcome.failed == 0, run_errors(outcome)
    with sqlite3.connect(results_dir / RESULTS_DB) as db:
        rows = db.execute("SELECT transactions, warnings_json FROM runs ORDER BY id").fetchall()
    first, second = [(n, json.loads(w)) for n, w in rows]
    assert not any(w["code"] == "commits_disagree" for w in first[1]), first
    shared = [w for w in second[1] if w["code"] == "commits_disagree"]
    assert len(shared) == 1, second
    assert shared[0]["evidence"]["pgbench_transactions"] == second[0]
    assert f"pgbench counted {second[0]:,} transactions" in shared[0]["text"]
    assert "the server committed" in shared[0]["text"]
