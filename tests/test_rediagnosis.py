"""A stored run's diagnosis follows today's rules: its telemetry reads back as it was stored,
and a verdict made by other rules (`rules_version`) is made again from what was stored; so is
each member server's verdict of a group's run, from the member's run as its own that its part
kept."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab import diagnosing
from pgbenchlab.analysis.diagnosis import RULES_VERSION, Bottleneck, Diagnosis
from pgbenchlab.diagnosing import Evidence, diagnose_run, judged, observed_run
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.costs import RunCosts
from pgbenchlab.records.observed import ObservedRun
from pgbenchlab.records.telemetry import Affinity, RunTelemetry
from pgbenchlab.results import OK, RunResult, Second, ServerPart
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


# -- a group's member servers (`ServerPart`): each keeps its run as its own, judged again -----


def member(name: str, verdict: Bottleneck | None, rules: int | None, kept: bool) -> ServerPart:
    """A member's part whose verdict came from rules ``rules`` (None: no version stored), with
    the member's run as its own kept (as a campaign keeps it) or not (stored before schema 34)."""
    return ServerPart(
        name, 2, 400.0, 800, 0, 5.0, 810, 2,
        verdict=verdict,
        evidence=("as older rules saw it",) if verdict else (),
        details={} if rules is None else {"rules_version": rules},
        observed=observed_run(a_run(None)) if kept else None,
    )  # fmt: skip


def group_run(*parts: ServerPart) -> RunResult:
    return replace(a_run(None, telemetry=False), servers=parts)


def test_a_group_members_verdict_of_older_rules_is_made_again_from_the_run_it_kept(
    tmp_path: Path,
) -> None:
    today = diagnose_run(a_run(None), Evidence(FSYNC.ops_per_s))  # pg's facts: its syncs
    assert today is not None and today.verdict != Bottleneck.LOCK_BOUND  # a change to see
    older = member("pg", Bottleneck.LOCK_BOUND, 1, kept=True)
    current = replace(member("b", Bottleneck.LOCK_BOUND, RULES_VERSION, kept=True), evidence=("x",))
    lost = member("c", Bottleneck.LOCK_BOUND, 1, kept=False)
    store, run_id = stored(tmp_path, group_run(older, current, lost))
    with store:
        again, kept, dropped = store.run_server_parts(run_id)
    assert (again.verdict, again.evidence, again.details) == (
        today.verdict,
        today.evidence,
        today.details,
    )
    assert again.details["rules_version"] == RULES_VERSION and again.observed == older.observed
    assert kept == current  # today's rules: read as stored
    assert (dropped.verdict, dropped.evidence) == (None, ())  # nothing left to judge


def test_a_members_kept_run_reads_back_as_it_was(tmp_path: Path) -> None:
    costs = RunCosts(window_s=2.0, server_user_s=1.5, notes={"instructions": "no counters"})
    telemetry = replace(STORED, costs=costs, errors=("a sampler stopped",), tls_cipher="x")
    observed = replace(observed_run(a_run(None)), telemetry=telemetry)
    assert ObservedRun.from_stored(json.loads(json.dumps(observed.stored()))) == observed
    judged_now = diagnosing.diagnose(observed, Evidence(FSYNC.ops_per_s))
    part = judged(replace(member("pg", None, None, kept=False), observed=observed), judged_now)
    assert part.verdict is not None and part.details["rules_version"] == RULES_VERSION
    store, run_id = stored(tmp_path, group_run(part))
    with store:
        assert store.run_server_parts(run_id) == (part,)


def test_member_verdicts_stored_before_schema_34_were_rules_3s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Member verdicts came with schema 20, after rules 3; stored without the member's run,
    they read as stored until the rules change, then they are dropped."""
    assert RULES_VERSION == 3  # else: the migration's history no longer covers today's rules
    part = member("pg", Bottleneck.LOCK_BOUND, None, kept=False)
    store, run_id = stored(tmp_path, group_run(part, member("b", None, None, kept=False)))
    store.close()
    db = sqlite3.connect(tmp_path / "results.db")  # as schema 33 wrote it
    db.executescript(
        "ALTER TABLE run_servers DROP COLUMN details_json; "
        "ALTER TABLE run_servers DROP COLUMN observed_json; DROP TABLE follow_metrics; "
        "PRAGMA user_version = 33;"
    )
    db.close()
    with Store(tmp_path / "results.db") as store:
        read, silent = store.run_server_parts(run_id)
        assert read == replace(part, details={"rules_version": 3})
        assert silent == member("b", None, None, kept=False)
        monkeypatch.setattr(diagnosing, "RULES_VERSION", 4)
        (newer, _) = store.run_server_parts(run_id)
    assert (newer.verdict, newer.evidence) == (None, ())
