"""A stored run's diagnosis follows today's rules: its telemetry reads back as it was stored,
and a verdict made by other rules (`rules_version`) is made again from what was stored."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pgbenchlab.analysis.diagnosis import RULES_VERSION, Bottleneck, Diagnosis
from pgbenchlab.diagnosing import Evidence, diagnose_run
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.telemetry import Affinity, RunTelemetry
from pgbenchlab.results import OK, RunResult, Second
from pgbenchlab.store import Store
from pgbenchlab.store.telemetry import read_telemetry
from pgbenchlab.telemetry.campaign import ServerTelemetryFacts
from pgbenchlab.telemetry.fsync import FsyncFigure
from test_telemetry_store import SPEC, TELEMETRY

STORED = replace(TELEMETRY, affinity=(Affinity("server", "0", ("0",), 3),))
FSYNC = FsyncFigure("254:0", {"fdatasync": 420.0, "open_sync": 300.0}, "report")


def a_run(diagnosis: Diagnosis | None, telemetry: bool = True) -> RunResult:
    return RunResult(
        run_key="k-r1",
        cell_id="k",
        sequence=1,
        repeat=1,
        status=OK,
        spec=RunCell.from_stored(SPEC),
        argv=("pgbench",),
        started_at=1.0,
        finished_at=2.0,
        pgbench_version="pgbench (PostgreSQL) 18.1",
        tps=400.0,
        seconds=(Second(1, 410.0, 4.9, 0.5), Second(2, 390.0, 5.1, 0.6)),
        telemetry=STORED if telemetry else None,
        diagnosis=diagnosis,
    )


def stored(tmp_path: Path, result: RunResult) -> tuple[Store, int]:
    store = Store(tmp_path / "results.db")
    campaign = store.start_campaign("c", "c.toml", "", "d", {"pgbenchlab": "0"}, {})
    store.record_server_facts(campaign, ServerTelemetryFacts("pg", None, None, FSYNC))
    return store, store.record_run(campaign, result)


def in_order(telemetry: RunTelemetry | None) -> RunTelemetry | None:
    """The record with its collections in one order (the tables keep no insertion order)."""
    if telemetry is None:
        return None
    kept = ("sources", "series", "totals", "waits", "events", "statements", "affinity")
    return replace(telemetry, **{k: tuple(sorted(getattr(telemetry, k), key=repr)) for k in kept})


def test_a_runs_telemetry_reads_back_as_it_was_stored(tmp_path: Path) -> None:
    store, run_id = stored(tmp_path, a_run(None))
    with store:
        assert in_order(read_telemetry(store.db, run_id)) == in_order(STORED)
        assert read_telemetry(store.db, run_id + 1) is None


def test_a_verdict_of_older_rules_is_made_again_from_what_was_stored(tmp_path: Path) -> None:
    old = Diagnosis(Bottleneck.LOCK_BOUND, ("as older rules saw it",), {"rules_version": 1})
    today = diagnose_run(a_run(None), Evidence(FSYNC.ops_per_s))
    assert today is not None and today.verdict != Bottleneck.LOCK_BOUND  # a change to see
    store, run_id = stored(tmp_path, a_run(old))
    with store:
        again = store.diagnoses_by_run([run_id])[run_id]
    assert (again.verdict, again.evidence) == (today.verdict, today.evidence)
    assert again.details == today.details and again.details["rules_version"] == RULES_VERSION


def test_a_verdict_of_todays_rules_is_read_as_stored(tmp_path: Path) -> None:
    current = Diagnosis(Bottleneck.LOCK_BOUND, ("as stored",), {"rules_version": RULES_VERSION})
    store, run_id = stored(tmp_path, a_run(current))
    with store:
        found = store.diagnoses_by_run([run_id])[run_id]
    assert (found.verdict, found.evidence) == (Bottleneck.LOCK_BOUND, ("as stored",))


def test_an_old_verdict_with_nothing_left_to_judge_is_dropped(tmp_path: Path) -> None:
    old = Diagnosis(Bottleneck.LOCK_BOUND, ("older rules",), {"rules_version": 1})
    store, run_id = stored(tmp_path, a_run(old, telemetry=False))
    with store:
        assert store.diagnoses_by_run([run_id]) == {}
