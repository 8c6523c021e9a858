"""The plan's [dataset]: pgbench -i's options and a setup SQL, part of the dataset's identity."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.campaign.clean import remove_clusters
from pgbenchlab.campaign.client import require_client_features
from pgbenchlab.dataset import _init_failed
from pgbenchlab.errors import PlanError
from pgbenchlab.records.version import parse_version
from pgbenchlab.results import RunStatus
from pgbenchlab.server import Server
from pgbenchlab.store import Store
from support import QuietReporter, require_installs

SETUP = """
CREATE FUNCTION lab_marker() RETURNS int LANGUAGE sql AS 'SELECT 42';
CREATE INDEX accounts_by_balance ON pgbench_accounts (abalance);
"""
# Fails (division by zero) unless the dataset has its 2 partitions, its fillfactor and the
# setup's function: a run that is ok proves all three.
CHECK = r"""
SELECT count(*) AS parts FROM pg_inherits WHERE inhparent = 'pgbench_accounts'::regclass \gset
SELECT (coalesce(reloptions, '{}') @> '{fillfactor=90}')::int AS ff FROM pg_class
  WHERE relname = 'pgbench_tellers' \gset
\if :parts != 2
SELECT 1 / 0;
\endif
\if :ff = 0
SELECT 1 / 0;
\endif
SELECT lab_marker();
"""


def plan_text(dataset: str) -> str:
    return f"""
[campaign]
name = "dataset-options"
[defaults]
duration = "1s"
warmup = "0s"
{dataset}
[[server]]
name = "pg"
install = "embedded"
settings = {{ shared_buffers = "32MB" }}
[matrix]
scale = [1]
workload = [{{ script = "check.sql" }}]
clients = [1, 2]
"""


def parsed(tmp_path: Path, dataset: str) -> plan.Plan:
    (tmp_path / "check.sql").write_text(CHECK)
    (tmp_path / "setup.sql").write_text(SETUP)
    return plan.parse(plan_text(dataset), str(tmp_path / "p.toml"), base=tmp_path)


OPTIONS = '[dataset]\npartitions = 2\nfillfactor = 90\nsetup_sql = "setup.sql"\n'


@pytest.mark.parametrize(
    ("dataset", "says"),
    [
        ("[dataset]\npartition_method = 'hash'\n", "dataset.partition_method: needs partitions"),
        ("[dataset]\npartitions = 0\n", "dataset.partitions: must be a whole number from 1"),
        ("[dataset]\nfillfactor = 5\n", "dataset.fillfactor: must be a whole number from 10"),
        ("[dataset]\ninit_steps = 'dtg'\n", re.escape("add the primary keys (p)")),
        ("[dataset]\ninit_steps = 'dtxgp'\n", "must be letters of dtgGvpf"),
        ("[dataset]\nsetup_sql = 'none.sql'\n", "dataset.setup_sql: cannot read"),
        ("[dataset]\nunlogged = true\n", "dataset.unlogged: unknown key"),
    ],
)
def test_mistakes_in_dataset_are_refused(tmp_path: Path, dataset: str, says: str) -> None:
    with pytest.raises(PlanError, match=says):
        parsed(tmp_path, dataset)


def test_the_options_and_the_setups_content_are_the_datasets_identity(tmp_path: Path) -> None:
    plain = parsed(tmp_path, "")
    assert plain.dataset.identity == "" and plain.dataset.init_arguments() == []
    made = parsed(tmp_path, OPTIONS + "unlogged_tables = true\ninit_steps = 'dtgvp'\n")
    assert made.dataset.init_arguments() == [
        "-I", "dtgvp", "-F", "90", "--partitions=2", "--unlogged-tables"
    ]  # fmt: skip
    identity = parsed(tmp_path, OPTIONS).dataset.identity
    assert len(identity) == 8 and identity != made.dataset.identity
    before = parsed(tmp_path, OPTIONS)
    (tmp_path / "setup.sql").write_text(SETUP + "-- edited\n")
    edited = plan.parse(plan_text(OPTIONS), str(tmp_path / "p.toml"), base=tmp_path)
    assert edited.dataset.identity != identity  # another setup: another dataset
    assert edited.digest != before.digest  # and a changed plan (the file is part of it)


def test_options_the_pgbench_lacks_are_refused_before_anything_starts(tmp_path: Path) -> None:
    the_plan = parsed(tmp_path, "[dataset]\npartitions = 4\n")
    old = parse_version("pgbench (PostgreSQL) 12.22")
    with pytest.raises(PlanError, match=r"dataset\.partitions needs pgbench 13 or later"):
        require_client_features(the_plan, old, old.text)


@pytest.mark.server
def test_a_dataset_made_with_options_and_setup_sql(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    the_plan = parsed(tmp_path, OPTIONS)
    try:
        outcome = run_campaign(the_plan, results_dir, QuietReporter())
        assert [r.status for r in outcome.results] == [RunStatus.OK] * 2, [
            r.error for r in outcome.results
        ]
        other = parsed(tmp_path, OPTIONS.replace("fillfactor = 90", "fillfactor = 100"))
        again = run_campaign(other, results_dir, QuietReporter(), fresh=True)
        # another fillfactor: another dataset, beside the first; the check script fails on it
        assert {r.status for r in again.results} == {RunStatus.ABORTED}
        with Store(results_dir / "results.db") as store:
            first = store.dataset_records(outcome.campaign_id)
            second = store.dataset_records(again.campaign_id)
        identity = the_plan.dataset.identity
        assert [d.database for d in first] == [f"pgbench_s1_{identity}"]  # made once for both
        assert first[0].init_seconds is not None
        assert second[0].database == f"pgbench_s1_{other.dataset.identity}" != first[0].database
    finally:
        remove_clusters(results_dir)


@pytest.mark.server
def test_a_setup_that_fails_fails_the_run_saying_why(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    the_plan = parsed(tmp_path, OPTIONS)
    (tmp_path / "setup.sql").write_text("CREATE INDEX ON no_such_table (x);\n")
    the_plan = plan.parse(plan_text(OPTIONS), str(tmp_path / "p.toml"), base=tmp_path)
    try:
        outcome = run_campaign(the_plan, results_dir, QuietReporter())
        assert {r.status for r in outcome.results} == {RunStatus.FAILED}
        error = outcome.results[0].error or ""
        assert "setup_sql" in error and 'relation "no_such_table" does not exist' in error
    finally:
        remove_clusters(results_dir)


@dataclass(frozen=True)
class _CrashedServer:
    """A managed server whose log says why pgbench's connection broke (its log's words as a
    full disk left them in a real one)."""

    name: str = "small"
    managed: bool = True

    def log_problems(self, lines: int = 3) -> list[str]:
        return ['PANIC:  could not write to file "pg_wal/xlogtemp.97": No space left on device']


def test_an_initialisation_cut_by_a_crash_says_what_the_server_log_says() -> None:
    """pgbench -i's connection broken by a crashing server (its output as captured when a full
    disk crashed one) names no cause of the server's: its log's does; words of the server's
    own in pgbench's output are enough on their own."""
    broken = (
        "creating tables...\ngenerating data (client-side)...\npgbench: error: PQputline failed\n"
    )
    said = str(_init_failed(cast(Server, _CrashedServer()), 4, broken))
    assert said.startswith("pgbench -i -s 4 failed on small: ") and "PQputline failed" in said
    assert said.endswith("[its log: PANIC:  could not write to file \"pg_wal/xlogtemp.97\": "
                         "No space left on device]")  # fmt: skip
    refused = 'pgbench: error: ERROR:  could not extend file "base/5/16398": No space left\n'
    assert "its log" not in str(_init_failed(cast(Server, _CrashedServer()), 4, refused))
