"""What the store keeps of a run reads back as the records and enums the run's result held: its
cell (settings masked), pgbench's parsed report, its status, the diagnosis' and each group
member's verdict; the campaign listing is typed too. The stored JSON stays what it was."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from pathlib import Path

from pgbenchlab import findings
from pgbenchlab.analysis.diagnosis import RULES_VERSION, Bottleneck, Diagnosis
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.records.cell import RunCell
from pgbenchlab.redaction import MASK
from pgbenchlab.results import CampaignStatus, LatencySummary, RunResult, RunStatus, ServerPart
from pgbenchlab.store import Store, run_as_dict
from support import plain

GOLDEN = Path(__file__).parent / "golden" / "pgbench" / "18"
SECRET = "host=db password=hunter2"
CELL = RunCell.from_stored(
    {
        "server": "pg", "server_settings": {"primary_conninfo": SECRET, "work_mem": "8MB"},
        "scale": 1, "workload": "tpcb-like", "clients": 2, "threads": 1,
        "protocol": "prepared", "duration_s": 2, "transactions": None, "warmup_s": 0,
        "rate": 1000, "latency_limit_ms": None, "connect": False, "vacuum": "pgbench",
        "checkpoint": True, "latency_log": "auto", "max_tries": 3, "profile": "on",
    }
)  # fmt: skip


def stored_run(tmp_path: Path) -> tuple[Store, int, RunResult]:
    report = parse_report((GOLDEN / "tpcb-progress.stdout").read_text())
    result = RunResult(
        run_key="k-r1",
        cell_id="k",
        sequence=0,
        repeat=1,
        status=RunStatus.ABORTED,
        spec=CELL,
        argv=("pgbench",),
        started_at=1.0,
        finished_at=2.0,
        pgbench_version="pgbench (PostgreSQL) 18.1",
        tps=report.tps,
        report=report,
        diagnosis=Diagnosis(
            Bottleneck.WAL_FLUSH_BOUND, ("waits on WAL",), {"rules_version": RULES_VERSION}
        ),
        servers=(ServerPart("a", 2, 10.0, 20, 0, 0.2, 20, 0, Bottleneck.LOCK_BOUND, ("x",)),),
    )
    store = Store(tmp_path / "results.db")
    campaign = store.start_campaign("c", "c.toml", "", "d", {"pgbenchlab": "0"}, {})
    return store, store.record_run(campaign, result), result


def test_a_stored_run_reads_back_as_the_records_it_was(tmp_path: Path) -> None:
    store, run_id, result = stored_run(tmp_path)
    with store:
        record = store.run_record(run_id)
        assert record is not None
        masked = (("primary_conninfo", f"host=db password={MASK}"), ("work_mem", "8MB"))
        assert record.spec == replace(result.spec, server_settings=masked)
        assert record.spec.rate == 1000 and record.spec.profile == "on"
        assert record.report is not None and record.report.scripts == result.report.scripts  # type: ignore[union-attr]
        assert plain(record.report.stored()) == plain(result.report.stored())  # type: ignore[union-attr]
        assert record.status is RunStatus.ABORTED
        assert store.diagnoses_by_run([run_id])[run_id].verdict is Bottleneck.WAL_FLUSH_BOUND
        (part,) = store.run_server_parts(run_id)
        assert part.verdict is Bottleneck.LOCK_BOUND
        (listed,) = store.campaign_summaries()
        assert listed.runs == 1 and listed.campaign.status is CampaignStatus.RUNNING


def test_the_stored_json_is_the_cell_s_and_the_report_s_own(tmp_path: Path) -> None:
    store, run_id, _ = stored_run(tmp_path)
    with store:
        spec, report, status = store.db.execute(
            "SELECT spec_json, report_json, status FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        record = store.run_record(run_id)
    assert record is not None
    assert status == "aborted" and "hunter2" not in spec
    assert json.loads(spec) == record.spec.stored() and "connection" not in json.loads(spec)
    assert json.loads(spec)["max_tries"] == 3  # an option away from pgbench's default
    shown = run_as_dict(record, every_column=True)  # as `show --json` and exports print it
    assert shown["status"] == "aborted" and shown["spec"] == json.loads(spec)
    assert plain(shown["report"]) == plain(json.loads(report))
    assert RunCell.from_stored(shown["spec"]) == record.spec


def test_a_run_without_a_report_stores_an_empty_one(tmp_path: Path) -> None:
    store, _, result = stored_run(tmp_path)
    with store:
        campaign = store.start_campaign("e", "e.toml", "", "d", {"pgbenchlab": "0"}, {})
        failed = replace(result, run_key="k-r2", report=None, status=RunStatus.FAILED)
        run_id = store.record_run(campaign, replace(failed, diagnosis=None, servers=()))
        (stored,) = store.db.execute("SELECT report_json FROM runs WHERE id = ?", (run_id,))
        record = store.run_record(run_id)
    assert stored[0] == "{}" and record is not None and record.report is None


def test_a_stored_runs_figures_and_outcome_read_as_typed_attributes(tmp_path: Path) -> None:
    store, _, result = stored_run(tmp_path)
    stalled = findings.RunWarning(findings.WarningCode.RUN_STALLED, {"wall_s": 9, "duration_s": 2})
    latency = LatencySummary(
        "full log", 9, {"50": 1.25, "99": 4.5, "99.9": 7.0}, 0.5, 8.0, 1.5, 0.75, "{}"
    )
    figures = replace(
        result, run_key="k-r2", error="pgbench: stopped", transactions=9, failed=2, skipped=1,
        late=3, latency_avg_ms=1.5, latency=latency, warnings=(stalled,),
        instructions_per_tx=41000.5, instructions_tool="callgrind",
    )  # fmt: skip
    with store:
        campaign = store.start_campaign("f", "f.toml", "", "d", {"pgbenchlab": "0"}, {})
        record = store.run_record(store.record_run(campaign, figures))
    assert record is not None
    assert (record.cell_id, record.argv, record.error) == ("k", ("pgbench",), "pgbench: stopped")
    assert (record.tps, record.transactions) == (result.tps, 9)
    assert (record.failed, record.skipped, record.late, record.latency_avg_ms) == (2, 1, 3, 1.5)
    assert (record.p50_ms, record.p99_ms, record.p999_ms) == (1.25, 4.5, 7.0)
    assert record.latency_source == "full log" and record.instructions_per_tx == 41000.5
    assert findings.from_stored(record.warnings) == (stalled,)


def test_no_reader_of_the_store_returns_sqlite_rows() -> None:
    """The CLI, the views and the exports read frozen records; a row is the store's own."""
    public = inspect.getmembers(Store, inspect.isfunction)
    returns = {name: str(f.__annotations__.get("return")) for name, f in public}
    rows = [name for name, kind in returns.items() if "sqlite3" in kind and name[0] != "_"]
    assert rows == []
