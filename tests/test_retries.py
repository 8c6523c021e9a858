"""Retried transactions (pgbench --max-tries, 15+): the plan option, the argv, the check against
an older pgbench, and a real run whose serialization failures pgbench retries."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.campaign.client import require_client_features
from pgbenchlab.errors import PlanError
from pgbenchlab.invocation import command
from pgbenchlab.records.version import parse_version
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import Store
from support import QuietReporter, require_installs, run_errors

# Every client updates the same branch row under REPEATABLE READ: concurrent updates fail with
# serialization errors, which pgbench retries up to max_tries.
CONTENDED = """\\set delta random(-5, 5)
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = 1;
END;
"""
PLAN = """
[campaign]
name = "retries"

[defaults]
duration = "3s"
warmup = "0s"
max_tries = 20

[matrix]
scale = 1
workload = [{ name = "contended", script = "contended.sql" }]
clients = [4]

[[server]]
name = "pg18"
install = "embedded"
"""


def parsed(base: Path) -> plan.Plan:
    (base / "contended.sql").write_text(CONTENDED)
    return plan.parse(PLAN, str(base / "retries.toml"), base=base)


def test_the_argv_asks_for_retries(tmp_path: Path) -> None:
    spec = parsed(tmp_path).specs[0]
    run = command.Invocation(spec.workload, 1, 4, spec.options, 3)
    argv = command.build_argv(
        Path("pgbench"), parse_version("pgbench (PostgreSQL) 18.1"), run, "db"
    )
    assert "--max-tries=20" in argv


def test_an_older_pgbench_is_refused_before_anything_starts(tmp_path: Path) -> None:
    the_plan = parsed(tmp_path)
    old = "pgbench (PostgreSQL) 14.10"
    with pytest.raises(PlanError, match="max_tries needs pgbench 15 or later"):
        require_client_features(the_plan, parse_version(old), old)
    new = "pgbench (PostgreSQL) 15.4"
    require_client_features(the_plan, parse_version(new), new)


@pytest.mark.server
def test_serialization_failures_are_retried_and_counted(results_dir: Path, tmp_path: Path) -> None:
    require_installs("embedded")
    outcome = run_campaign(parsed(tmp_path), results_dir, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        (run,) = load_view(store, 1, detail=False).runs
    assert run.ok and run.retried and run.retries and run.retries >= run.retried
    assert run.latency_source == "full log"  # the log, with its retries column, was analysed
    assert run.p99_ms is not None and run.transactions
