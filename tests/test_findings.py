"""Warnings as data: each rule's threshold, the stored form (and older databases' plain
sentences), and the report's advice selecting warnings by code."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab import findings
from pgbenchlab.findings import RunWarning, WarningCode
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import Store


def test_scale_below_clients_only_for_updating_workloads() -> None:
    assert findings.scale_below_clients(True, 4, 4) is None
    assert findings.scale_below_clients(False, 1, 4) is None
    found = findings.scale_below_clients(True, 1, 4)
    assert found == RunWarning(WarningCode.SCALE_BELOW_CLIENTS, {"scale": 1, "clients": 4})


def test_pgbench_saturation_has_one_threshold() -> None:
    assert findings.saturated(findings.PGBENCH_SATURATED)
    assert not findings.saturated(0.89)
    assert findings.pgbench_saturated(3.5, 2, 2) is None  # 0.875 of two threads
    assert findings.pgbench_saturated(None, 2, 2) is None
    found = findings.pgbench_saturated(3.8, 2, 2)
    assert found is not None and found.evidence["busy"] == pytest.approx(0.95)


def test_a_stall_is_a_run_far_longer_than_its_duration() -> None:
    assert findings.run_stalled(8.0, 2) is None  # 2 × 1.5 + 5 s of slack
    assert findings.run_stalled(100.0, None) is None  # -t: no duration to compare with
    stalled = findings.run_stalled(8.5, 2)
    assert stalled is not None and stalled.text.startswith("the run took 8 s for -T 2")


def test_the_stored_form_round_trips_and_carries_the_sentence() -> None:
    warnings = (
        RunWarning(WarningCode.THREADS_REDUCED, {"used": 2, "asked": 4}),
        findings.checkpoint_refused(),
    )
    text = findings.to_json(warnings)
    assert json.loads(text)[0] == {
        "code": "threads_reduced",
        "evidence": {"used": 2, "asked": 4},
        "text": "pgbench used 2 threads, not 4",
    }
    assert findings.from_json(text) == warnings


def test_older_plain_sentences_are_kept_as_written() -> None:
    old = findings.from_json('["pgbench used 1 threads, not 2"]')
    assert [(w.code, w.text) for w in old] == [
        (WarningCode.LEGACY, "pgbench used 1 threads, not 2")
    ]
    unknown = findings.from_json('[{"code": "from_the_future", "evidence": {}, "text": "later"}]')
    assert [(w.code, w.text) for w in unknown] == [(WarningCode.LEGACY, "later")]
    assert findings.from_json("[]") == ()


def test_the_reports_advice_selects_stored_warnings_by_code(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(workloads=("select-only",), repeats=1))
    saturated = findings.pgbench_saturated(1.9, 2, 1)
    assert saturated is not None
    stored = {
        1: findings.to_json([saturated]),
        2: findings.to_json([findings.checkpoint_refused()]),
        # An older database's sentence naming the load generator is not read for its words.
        3: json.dumps(["pgbench used 95% of its 1 threads' CPU: the load generator may be ..."]),
    }
    with sqlite3.connect(db) as conn:
        for run_id, text in stored.items():
            conn.execute("UPDATE runs SET warnings_json = ? WHERE id = ?", (text, run_id))
    with Store(db) as store:
        view = load_view(store, 1)

    advice = {a.kind: a for a in view.advice}
    assert advice["load-generator"].run_ids == (1,)
    assert advice["load-generator"].remedy == findings.REMEDIES[WarningCode.PGBENCH_SATURATED]
    others = {a.message: a.run_ids for a in view.advice if a.kind == "run-warning"}
    assert others == {
        f"1 run(s): {findings.checkpoint_refused().text}": (2,),
        "1 run(s): pgbench used 95% of its 1 threads' CPU: the load generator may be ...": (3,),
    }
    run = next(r for r in view.runs if r.id == 1)
    assert run.stored_warnings == (saturated,)
