"""Run statuses are defined once and applied alike in every phase: a workload whose every
transaction fails is `aborted` with or without a warmup, is never counted as done, is run
again when the campaign continues, and makes the campaign exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.results import RunStatus
from support import QuietReporter, require_installs

pytestmark = pytest.mark.server

PLAN = """
[campaign]
name = "always-fails"
[defaults]
duration = "1s"
warmup = "{warmup}"
[[server]]
name = "pg"
install = "embedded"
[matrix]
scale = [1]
workload = [{{ script = "fail.sql" }}]
clients = [1]
"""


def test_only_ok_is_complete() -> None:
    assert [s for s in RunStatus if s.complete] == [RunStatus.OK]


@pytest.mark.parametrize("warmup", ["0s", "1s"])
def test_a_failing_workload_is_aborted_in_every_phase(
    warmup: str, tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    (tmp_path / "fail.sql").write_text("SELECT 1/0;\n")
    the_plan = plan.parse(PLAN.format(warmup=warmup), "p.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    [result] = outcome.results
    assert result.status == RunStatus.ABORTED, result.error
    assert result.error and "division by zero" in result.error
    assert outcome.failed == 1
    again = run_campaign(the_plan, results_dir, QuietReporter())
    assert (again.ran, again.skipped_done, again.failed) == (1, 0, 1)
