"""The report's view model against the results database it was built from (synthetic data
written through the real Store), its advice, its display histograms and the terminal summary."""

from __future__ import annotations

import math
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest_report import (
    FakeServer,
    SyntheticPlan,
    add_diagnosis,
    add_events,
    write_synthetic,
)
from pgbenchlab.analysis.comparison import compare
from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.analysis.stats import student_t_quantile
from pgbenchlab.errors import UserError
from pgbenchlab.report import summary_rows, summary_text
from pgbenchlab.report.render.along import along_charts
from pgbenchlab.report.views.build import load_view, mean_interval
from pgbenchlab.report.views.display_bins import display_bin, display_histogram
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.steps import axis_orders
from pgbenchlab.store import Store

PLAN = SyntheticPlan(failures=(3,), aborted=(5,), duration_s=30)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synthetic"), PLAN)


@pytest.fixture(scope="module")
def view(db: Path) -> ReportView:
    with Store(db) as store:
        return load_view(store, 1)


def sql(db: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as connection:
        return connection.execute(query, args).fetchall()


def test_every_run_is_in_the_view(db: Path, view: ReportView) -> None:
    ids = [row[0] for row in sql(db, "SELECT id FROM latest_runs ORDER BY sequence")]
    assert [r.id for r in view.runs] == ids
    assert {c.cell_id for c in view.cells} == {r[0] for r in sql(db, "SELECT cell_id FROM runs")}


def test_cell_numbers_match_the_database(db: Path, view: ReportView) -> None:
    for cell in view.cells:
        rows = sql(
            db,
            "SELECT tps, p99_ms, max_ms FROM latest_runs WHERE cell_id = ? AND status = 'ok'",
            cell.cell_id,
        )
        assert cell.n_ok == len(rows)
        assert cell.tps is not None
        assert cell.tps.mean == pytest.approx(statistics.fmean(float(r[0]) for r in rows))
        assert cell.p99_ms == pytest.approx(statistics.fmean(float(r[1]) for r in rows))
        assert cell.max_ms == max(r[2] for r in rows)


def test_interval_is_students_t_over_runs() -> None:
    values = [100.0, 110.0, 90.0, 105.0]
    interval = mean_interval(values)
    assert interval is not None and interval.low is not None and interval.high is not None
    half = student_t_quantile(0.975, 3) * statistics.stdev(values) / 2
    assert interval.mean == pytest.approx(101.25)
    assert interval.high - interval.mean == pytest.approx(half)
    single = mean_interval([5.0])
    assert single is not None and single.low is None and single.stddev is None
    assert mean_interval([]) is None


def test_failed_and_aborted_runs_are_counted_not_averaged(view: ReportView) -> None:
    failed = next(r for r in view.runs if r.sequence == 3)
    aborted = next(r for r in view.runs if r.sequence == 5)
    assert failed.status == "failed" and aborted.status == "aborted"
    for run in (failed, aborted):
        cell = next(c for c in view.cells if c.cell_id == run.cell_id)
        assert cell.n_not_ok == 1 and cell.n_ok == PLAN.repeats - 1


def test_efficiency_is_relative_to_the_fewest_clients(view: ReportView) -> None:
    for cell in view.cells:
        base = next(
            c
            for c in view.cells
            if c.clients == 1
            and [d for d in c.dims if d[0] != "clients"]
            == [d for d in cell.dims if d[0] != "clients"]
        )
        assert cell.tps is not None and base.tps is not None
        assert cell.efficiency == pytest.approx(cell.tps.mean / (base.tps.mean * cell.clients))
        assert cell.efficiency_base_clients == 1


def test_changes_are_the_comparison_modules(db: Path, view: ReportView) -> None:
    assert view.baseline == "pg15"
    change = next(ch for ch in view.changes if ch.metric == "tps")
    tps = "SELECT tps FROM latest_runs WHERE cell_id = ? AND status = 'ok'"
    base = [float(r[0]) for r in sql(db, tps, change.baseline_cell_id)]
    cand = [float(r[0]) for r in sql(db, tps, change.cell_id)]
    expected = compare(base, cand, higher_is_better=True)
    assert change.relative_change == pytest.approx(expected.relative_change)
    assert change.verdict == expected.verdict.value
    assert change.candidate == "pg18"
    # one TPS and one p99 change per candidate cell
    assert len(view.changes) == 2 * len([c for c in view.cells if c.dim("server") == "pg18"])


def test_axes_are_those_that_vary(view: ReportView) -> None:
    assert [a.key for a in view.axes] == ["server", "workload"]
    assert view.series_axis == "server"
    assert view.differing_settings == ("shared_buffers",)


def test_baseline_by_name_and_unknown_baseline(db: Path) -> None:
    with Store(db) as store:
        assert load_view(store, 1, baseline="pg18").baseline == "pg18"
        with pytest.raises(UserError, match="choose one of: pg15, pg18"):
            load_view(store, 1, baseline="pg99")


def test_advice_says_what_to_do(view: ReportView) -> None:
    kinds = {a.kind: a for a in view.advice}
    assert set(kinds) >= {"failed", "aborted", "short-run", "scale-below-clients"}
    assert kinds["failed"].severity == "error"
    assert "could not connect" in kinds["failed"].message
    assert "run the same command again" in kinds["failed"].remedy
    assert len(kinds["short-run"].run_ids) == len(view.runs) - 1  # the failed run is not short
    scale = kinds["scale-below-clients"]
    assert {r.workload for r in view.runs if r.id in scale.run_ids} == {"tpcb-like"}
    assert all(a.remedy for a in view.advice)


def test_an_interrupted_run_is_advised_to_be_run_again_not_fixed(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path)
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE runs SET status = 'interrupted', error = 'interrupted', tps = NULL "
            "WHERE id = (SELECT min(id) FROM runs WHERE status = 'ok')"
        )
    with Store(db) as store:
        view = load_view(store, 1)
    kinds = {a.kind: a for a in view.advice}
    assert kinds["interrupted"].message == "1 run(s) interrupted"
    assert "run the same command again" in kinds["interrupted"].remedy
    assert "fix the cause" not in kinds["interrupted"].remedy
    assert "failed" not in kinds  # the synthetic campaign has no failed run


def test_high_variation_and_load_generator_advice(tmp_path: Path) -> None:
    noisy = SyntheticPlan(
        servers=(FakeServer("only", "16.4"),), workloads=("select-only",), clients=(1,)
    )
    db = write_synthetic(tmp_path, noisy)
    with sqlite3.connect(db) as connection:  # make repeats disagree and pgbench busy
        connection.execute("UPDATE runs SET tps = tps * (1 + repeat), client_cpu_s = 1000")
    with Store(db) as store:
        view = load_view(store, 1)
    kinds = {a.kind: a for a in view.advice}
    assert "CV" in kinds["high-variation"].message
    assert kinds["high-variation"].cell_id == view.cells[0].cell_id
    assert "more threads" in kinds["load-generator"].remedy
    assert view.axes == () and view.baseline is None and view.changes == ()


def test_no_campaign_is_a_user_error(tmp_path: Path) -> None:
    from pgbenchlab.report import write_report

    with pytest.raises(UserError, match="no results database"):
        write_report(tmp_path / "nothing.db")
    Store(tmp_path / "empty.db").close()
    with pytest.raises(UserError, match="no campaign"):
        write_report(tmp_path / "empty.db")


def test_terminal_summary_uses_the_view_model(db: Path, view: ReportView) -> None:
    with Store(db) as store:
        rows = summary_rows(store, 1)
        text = summary_text(store, 1)
    assert len(rows) == len(view.cells)
    first = rows[0]
    cell = view.cells[0]
    assert cell.tps is not None
    assert first.tps.startswith(f"{cell.tps.mean:,.0f}")
    assert (first.server, first.clients, first.runs) == ("pg15", cell.clients, cell.n_ok)
    assert "warning: 1 run(s) failed" in text
    header = "server scale workload clients runs TPS p99 ms failed warn"
    assert text.splitlines()[0].split() == header.split()


# -- display histograms ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=300))
def test_display_bins_are_exact_regroupings(values: list[int]) -> None:
    stored = LatencyHistogram.from_values(values)
    shown = display_histogram(stored)
    assert shown is not None
    assert shown.total == len(values)
    for low, high, count in stored.bins():  # a stored bucket never straddles a display bin
        assert display_bin(low) == display_bin(high)
        assert count > 0
    # the CDF at every display edge is exact
    for upper, below in zip(shown.upper_ms, _cumulative(shown.counts), strict=True):
        assert below == sum(1 for v in values if v < upper * 1000 - 1e-9)


def _cumulative(counts: tuple[int, ...]) -> list[int]:
    total, out = 0, []
    for c in counts:
        total += c
        out.append(total)
    return out


def test_display_bins_are_eight_per_power_of_two() -> None:
    assert display_bin(5) == (5, 6)
    assert display_bin(8) == (8, 9)
    assert display_bin(1000) == (960, 1024)
    assert display_bin(1024) == (1024, 1152)
    starts = {display_bin(v)[0] for v in range(1 << 20, 1 << 21)}
    assert len(starts) == 8
    assert math.isclose(display_bin(3_000_000)[1] / display_bin(3_000_000)[0], 1.125, rel_tol=0.2)


def test_rate_limited_runs_keep_pgbenchs_late_and_skipped_shares(tmp_path: Path) -> None:
    plan = SyntheticPlan(
        servers=(FakeServer("pg16", "16.4"),),
        workloads=("tpcb-like",),
        clients=(4,),
        rates=(500.0, 1000.0, 2000.0),
        latency_limit_ms=10.0,
        repeats=2,
        duration_s=5,
    )
    db = write_synthetic(tmp_path, plan)
    with Store(db) as store:
        view = load_view(store, 1)
    assert [a.key for a in view.axes] == ["rate"]
    for run in view.runs:
        late_pct, skipped_pct = sql(
            db,
            "SELECT json_extract(report_json, '$.late_pct'), "
            "json_extract(report_json, '$.skipped_pct') FROM runs WHERE id = ?",
            run.id,
        )[0]
        assert run.late_share == pytest.approx(late_pct / 100)
        assert run.skipped_share == pytest.approx(skipped_pct / 100)
    shares = [c.late_share or 0.0 for c in sorted(view.cells, key=lambda c: c.rate or 0)]
    # the model: more late transactions nearer capacity
    assert shares == sorted(shares) and shares[-1] > 0


def test_server_events_are_read_where_telemetry_stored_them(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(clients=(1,), repeats=1, duration_s=10))
    add_events(db, [(1, 4.5, "checkpoint_start", "checkpoint starts: time")])
    with Store(db) as store:
        view = load_view(store, 1)
    run = next(r for r in view.runs if r.id == 1)
    assert [(e.t, e.kind, e.detail) for e in run.events] == [
        (4.5, "checkpoint_start", "checkpoint starts: time")
    ]
    assert all(not r.events for r in view.runs if r.id != 1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**45), min_size=1, max_size=200))
def test_display_histogram_matches_the_scalar_definition(values: list[int]) -> None:
    stored = LatencyHistogram.from_values(values)
    expected: dict[tuple[int, int], int] = {}
    for low, _high, count in stored.bins():
        key = display_bin(low)
        expected[key] = expected.get(key, 0) + count
    shown = display_histogram(stored)
    assert shown is not None
    got = {
        (round(lo * 1000), round(hi * 1000)): n
        for lo, hi, n in zip(shown.lower_ms, shown.upper_ms, shown.counts, strict=True)
    }
    assert got == expected


def test_telemetrys_diagnosis_becomes_advice_and_a_column(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(clients=(1, 2), repeats=1, duration_s=120))
    add_diagnosis(db, 1, "client_bound", ["pgbench threads on CPU 97 % of the run"])
    add_diagnosis(db, 2, "checkpoint_disturbed", ["worst second 40 % of the median"])
    add_diagnosis(db, 3, "lock_bound", ["Lock/transactionid 45 % of samples"])
    with Store(db) as store:
        view = load_view(store, 1)
        summary = summary_text(store, 1)
    kinds = {a.kind: a for a in view.advice}
    assert kinds["load-generator"].run_ids == (1,)
    assert kinds["checkpoint"].run_ids == (2,)
    run = next(r for r in view.runs if r.id == 3)
    assert run.diagnosis == "lock_bound"
    assert run.diagnosis_evidence == ("Lock/transactionid 45 % of samples",)
    assert "short-run" not in kinds
    assert "warning: 1 run(s) saturated pgbench" in summary


def test_versions_are_an_axis_of_their_own_oldest_first(tmp_path: Path) -> None:
    """Servers listed newest first: the oldest major is the default baseline and the charts
    along the versions read oldest first; one major alone gives no such chart."""
    newest_first = SyntheticPlan(
        servers=(
            FakeServer("pg18", "18.1", 1.2),
            FakeServer("pg96", "9.6", 0.7),
            FakeServer("pg13", "13.16", 1.0),
        ),
        scales=(1, 10),
        repeats=1,
    )
    with Store(write_synthetic(tmp_path / "versions", newest_first)) as store:
        view = load_view(store, 1)
    assert view.baseline == "pg96"
    charts = {c["id"]: c["specs"]["all"] for c in along_charts(view)}
    assert set(charts) == {
        "chart-version-tps",
        "chart-version-p99",
        "chart-scale-tps",
        "chart-scale-p99",
    }
    x = charts["chart-version-tps"]["spec"]["layer"][0]["encoding"]["x"]
    assert x["sort"] == ["pg96", "pg13", "pg18"]
    assert charts["chart-scale-p99"]["spec"]["layer"][1]["encoding"]["x"]["sort"] == ["1", "10"]

    one_major = SyntheticPlan(
        servers=(FakeServer("a", "15.18"), FakeServer("b", "15.17")), repeats=1
    )
    with Store(write_synthetic(tmp_path / "one", one_major)) as store:
        view = load_view(store, 1)
    assert view.baseline == "a" and along_charts(view) == []


def test_a_series_along_servers_of_several_majors_reads_oldest_first(tmp_path: Path) -> None:
    newest_first = SyntheticPlan(
        servers=(FakeServer("pg18", "18.1", 1.2), FakeServer("pg13", "13.16", 1.0)), repeats=1
    )
    with Store(write_synthetic(tmp_path / "versions", newest_first)) as store:
        view = load_view(store, 1)
    assert axis_orders(view)["server"] == ["pg13", "pg18"]
