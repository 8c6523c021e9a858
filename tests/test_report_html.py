"""The HTML report, the Markdown summary and the images: self-contained, escaped, and showing
the view model's numbers."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab.analysis.capacity import CapacityAnswer
from pgbenchlab.analysis.slo import parse_slo
from pgbenchlab.report import write_report
from pgbenchlab.report.render import html, images, markdown
from pgbenchlab.report.render.tables import key_tables
from pgbenchlab.report.views import telemetry_series
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.capacity import CapacityView, KneePoint
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.store import Store
from support import embedded_data

HOSTILE = "<script>alert(1)</script>"
HOSTILE_ERROR = "<img src=x onerror=alert(3)> & \"quoted\" 'single' </script><!--"
HOSTILE_DESCRIPTION = "what changed: <i>work_mem</i> | *4MB*"
HOSTILE_PLAN = SyntheticPlan(
    name="</script><svg onload=alert(2)>",
    servers=(
        FakeServer(
            HOSTILE,
            "15.18",
            1.0,
            {"work_mem": "<b>4MB</b>", "shared_buffers": "1GB"},
            HOSTILE_DESCRIPTION,
        ),
        FakeServer("pg18 | *bold* `code`", "18.1", 1.1, {"shared_buffers": "2GB"}),
    ),
    clients=(1, 2),
    repeats=2,
    failures=(1,),
    duration_s=5,
)


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = write_synthetic(tmp_path_factory.mktemp("hostile"), HOSTILE_PLAN)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET error = ? WHERE status = 'failed'", (HOSTILE_ERROR,))
    return db


@pytest.fixture(scope="module")
def hostile_view(hostile_db: Path) -> ReportView:
    with Store(hostile_db) as store:
        return load_view(store, 1)


@pytest.fixture(scope="module")
def page(hostile_db: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = write_report(hostile_db, output=tmp_path_factory.mktemp("out") / "r.html")
    assert isinstance(out, Path)
    return out.read_text(encoding="utf-8")


def test_page_is_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script[^>]*\ssrc=", page)
    assert not re.search(r"<link\b", page)
    assert "@import" not in page
    assert not re.search(r"url\(\s*['\"]?https?:", page)
    assert page.count("<script") == 3  # the data, the Vega bundle, the page script
    assert "vegaEmbed" in page


def test_hostile_strings_are_text_everywhere(page: str) -> None:
    for raw in (HOSTILE, "<svg onload", "<img src=x", "<b>4MB</b>"):
        assert raw not in page
    # exactly the three script elements open and close: no string ended one early
    assert page.count("</script>") == 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the overview shows the name
    assert "&lt;b&gt;4MB&lt;/b&gt;" in page
    # what a server is, in the plan's words: a row of the servers table
    said = "<td>what changed: &lt;i&gt;work_mem&lt;/i&gt; | *4MB*</td><td>-</td>"
    assert f'<tr><th scope="row">what it is</th>{said}</tr>' in page


def test_embedded_json_keeps_the_strings_exactly(page: str, hostile_view: ReportView) -> None:
    data = embedded_data(page)
    assert data["campaign"] == HOSTILE_PLAN.name
    cells = data["cells"]
    assert isinstance(cells, list)
    assert {c["s_server"] for c in cells} == {s.name for s in HOSTILE_PLAN.servers}
    detail = data["detail"]
    assert isinstance(detail, dict)
    errors = [d.get("err") for d in detail["runs"].values()]
    assert HOSTILE_ERROR in errors


def test_embedded_numbers_are_the_view_models(page: str, hostile_view: ReportView) -> None:
    data = embedded_data(page)
    cells = {c["id"]: c for c in data["cells"]}
    for cell in hostile_view.cells:
        row = cells[cell.cell_id]
        if cell.tps is None:
            assert row["tps"] is None
            continue
        assert row["tps"] == pytest.approx(cell.tps.mean, abs=0.05)
        assert row["n"] == cell.n_ok
        assert row["p99"] == pytest.approx(cell.p99_ms, abs=6e-4)  # rounded to the µs
        assert row["runs"] == list(cell.run_ids)
    runs = data["runs"]
    assert isinstance(runs, dict)
    keys = [c["key"] for c in runs["columns"]]
    by_id = {row[keys.index("id")]: row for row in runs["rows"]}
    for run in hostile_view.runs:
        assert by_id[run.id][keys.index("tps")] == run.tps
        assert by_id[run.id][keys.index("p99_ms")] == run.p99_ms


def test_script_json_cannot_close_its_element() -> None:
    text = html.script_json({"a": "</script><!-- x", "b": float("nan"), "c": "\u2028"})
    assert "</" not in text and "<!--" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- x", "b": None, "c": "\u2028"}


def test_charts_exist_for_what_was_measured(hostile_view: ReportView) -> None:
    found = {c["id"]: c for c in html.main_charts(hostile_view)}
    assert set(found) == {
        "chart-tps",
        "chart-latency",
        "chart-efficiency",
        "chart-dist",
        "chart-sorted",
        "chart-heat-tps",
        "chart-heat-p99",
        "chart-version-tps",  # pg15 and pg18: the majors differ
        "chart-version-p99",
    }
    tps = found["chart-tps"]["specs"]["server"]
    assert tps["title"]["text"] == "Throughput against clients"
    point_layer = tps["spec"]["layer"][-1]
    assert point_layer["encoding"]["y"]["title"] == "throughput (TPS, transactions/s)"
    assert point_layer["encoding"]["href"] == {"field": "link"}
    assert point_layer["params"][0]["bind"] == "legend"
    # one spec per axis the reader may draw one line per
    assert set(found["chart-tps"]["specs"]) == {"server", "workload"}


def error_bar_layers(view: ReportView) -> list[Any]:
    tps = next(c for c in html.main_charts(view) if c["id"] == "chart-tps")["specs"]["server"]
    return [layer for layer in tps["spec"]["layer"] if layer.get("mark", {}).get("type") == "rule"]


def test_error_bars_only_where_repeats_give_intervals(
    hostile_view: ReportView, tmp_path: Path
) -> None:
    assert error_bar_layers(hostile_view)  # three repeats per cell
    db = write_synthetic(tmp_path, SyntheticPlan(repeats=1))
    with Store(db) as store:
        single = load_view(store, 1)
    assert not error_bar_layers(single)  # one run per cell: no empty layer for Vega to warn of


def test_markdown_tables_and_escaping(hostile_view: ReportView) -> None:
    text = markdown.render(hostile_view)
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script>alert(1)&lt;/script>" in text
    assert r"pg18 \| \*bold\* \`code\`" in text
    described = (
        r"  - &lt;script>alert(1)&lt;/script>: what changed: &lt;i>work\_mem&lt;/i> \| \*4MB\*"
    )
    assert described in text.splitlines()  # the one server described, under "servers"
    assert "| clients |" in text and "### Relative change against" in text
    first = key_tables(hostile_view)[0]
    for row in first.rows:
        assert "| " + " | ".join(markdown.escape(c) for c in row) + " |" in text


def test_markdown_to_a_file_and_as_text(hostile_db: Path, tmp_path: Path) -> None:
    text = write_report(hostile_db, fmt="markdown")
    assert isinstance(text, str) and text.startswith("## pgbench campaign")
    out = write_report(hostile_db, fmt="markdown", output=tmp_path / "r.md")
    assert out == tmp_path / "r.md" and out.read_text() == text


def test_default_output_is_beside_the_database(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(clients=(1,), repeats=1, duration_s=3))
    assert write_report(db) == tmp_path / "report.html"
    assert (tmp_path / "report.html").stat().st_size > 900_000  # the inlined Vega bundle


def test_images_every_chart_as_svg_and_png(tmp_path: Path) -> None:
    plan = SyntheticPlan(clients=(1, 4), repeats=1, workloads=("tpcb-like",), duration_s=10)
    db = write_synthetic(tmp_path / "res", plan)
    with Store(db) as store:
        view = load_view(store, 1)
    files = images.export(view, tmp_path / "img")
    names = {f.name for f in files}
    assert {"tps.svg", "tps.png", "latency.svg", "heat-tps.png", "dist.svg"} <= names
    per_run = {n for n in names if n.startswith("run-")}
    assert len(per_run) == len(view.runs) * 5 * 2
    for f in files:
        head = f.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if f.suffix == ".png" else b"<svg" in f.read_bytes()
    svg = (tmp_path / "img" / "tps.svg").read_text()
    assert "Throughput against clients" in svg and "clients (pgbench -c)" in svg


# -- telemetry beside the per-second TPS ----------------------------------------------------------

TELEMETRY_PLAN = SyntheticPlan(
    name="telemetry",
    servers=(FakeServer("pg15", "15.18", 1.0), FakeServer("pg18", "18.1", 1.1)),
    clients=(1, 4),
    repeats=1,
    failures=(2,),
    duration_s=8,
    telemetry=True,
)


@pytest.fixture(scope="module")
def telemetry_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = write_synthetic(tmp_path_factory.mktemp("telemetry"), TELEMETRY_PLAN)
    with sqlite3.connect(db) as connection:  # a series that stayed 0 is not drawn
        connection.execute(
            "UPDATE run_telemetry_seconds SET value = 0 "
            "WHERE run_id = 1 AND source = 'disk' AND metric = 'read_mb_per_s'"
        )
    return db


def test_image_names_from_stored_text_stay_in_their_directory(tmp_path: Path) -> None:
    # A knee chart's file is named after its server, read from a results database that may come
    # from another machine.
    db = write_synthetic(tmp_path / "res", SyntheticPlan(clients=(1,), repeats=1, duration_s=3))
    with Store(db) as store:
        view = load_view(store, 1, detail=False)
    slo = parse_slo("p99 <= 10ms")
    points = tuple(
        KneePoint(i, role, rate, 4, (rate or 100) * 0.98, 1.0, p99, p99, 0.0, 0.0, p99 < 10, "")
        for i, role, rate, p99 in (
            (1, "start", None, 5.0),
            (2, "grow", 50, 5.0),
            (3, "grow", 100, 30.0),
        )
    )
    answer = CapacityAnswer(50.0, 50.0, 100.0, "confirmed")
    searched = CapacityView("../../../escaped", "s=1", "c", slo, 10.0, answer, points)
    files = images.export(replace(view, capacity=(searched,)), tmp_path / "img", per_run=False)
    knees = [f for f in files if "escaped" in f.name]
    assert [f.name for f in knees] == ["knee-.._.._.._escaped-c.svg", "knee-.._.._.._escaped-c.png"]
    assert all(f.parent == tmp_path / "img" for f in files)
    assert [p for p in tmp_path.rglob("*escaped*") if p.parent != tmp_path / "img"] == []


def report_data(db: Path, out: Path) -> dict[str, Any]:
    written = write_report(db, output=out)
    assert isinstance(written, Path)
    return embedded_data(written.read_text(encoding="utf-8"))


def decoded_telemetry(data: dict[str, Any], run_id: int) -> dict[tuple[str, str], dict[int, float]]:
    """A run's telemetry as the page decodes it: (dataset, label) -> {t: value}."""
    x = data["detail"]["runs"][str(run_id)].get("x")
    if x is None:
        return {}
    first, encoded = x
    names = data["detail"]["telemetry"]["series"]
    found: dict[tuple[str, str], dict[int, float]] = {}
    for index, scale, *values in encoded:
        seconds = list(range(first, first + len(values))) if isinstance(first, int) else first
        found[tuple(names[index])] = {  # type: ignore[index]
            t: v * scale for t, v in zip(seconds, values, strict=True) if v is not None
        }
    return found


def page_seconds(data: dict[str, Any], run_id: int) -> list[int]:
    first = data["detail"]["runs"][str(run_id)]["s"][0]
    tps = data["detail"]["runs"][str(run_id)]["s"][1]
    return list(range(first, first + len(tps))) if isinstance(first, int) else list(first)


def stored_series(db: Path, run_id: int, source: str, metric: str) -> dict[int, float]:
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT t, value FROM run_telemetry_seconds "
            "WHERE run_id = ? AND source = ? AND metric = ?",
            (run_id, source, metric),
        ).fetchall()
    return {int(t): float(v) for t, v in rows}


def assert_close_to_stored(
    shown: dict[int, float], stored: dict[int, float], factor: float
) -> None:
    """The page's values are the stored ones (in display units) to 1 % of the series' peak."""
    assert set(shown) == set(stored)
    peak = max(abs(v) for v in stored.values()) * factor
    for t, value in stored.items():
        assert shown[t] == pytest.approx(value * factor, abs=0.0051 * peak)


def test_telemetry_series_are_embedded_for_runs_that_have_them(
    telemetry_db: Path, tmp_path: Path
) -> None:
    data = report_data(telemetry_db, tmp_path / "r.html")
    with Store(telemetry_db) as store:
        view = load_view(store, 1)
    for run in view.runs:
        shown = decoded_telemetry(data, run.id)
        if run.status == "failed":  # no telemetry stored: no series, no chart
            assert shown == {}
            continue
        assert_as_stored(telemetry_db, run.id, shown, host_cpus=2)
        waits = {label for dataset, label in shown if dataset == telemetry_series.WAITS}
        with sqlite3.connect(telemetry_db) as connection:
            events = connection.execute(
                "SELECT DISTINCT metric FROM run_telemetry_seconds "
                "WHERE run_id = ? AND source = 'pg_stat_activity'",
                (run.id,),
            ).fetchall()
        assert waits == {e[0] for e in events}  # at most MAX_EVENTS: none summed here
    assert (telemetry_series.IO, "data disk: read") not in decoded_telemetry(
        data, 1
    )  # 0 throughout
    select_only = next(r for r in view.runs if r.workload == "select-only" and r.ok)
    assert (telemetry_series.IO, "WAL: generated") not in decoded_telemetry(data, select_only.id)
    assert data["detail"]["telemetry"]["note"] == ""  # every run's telemetry is drawn


def assert_as_stored(
    db: Path, run_id: int, shown: dict[tuple[str, str], dict[int, float]], host_cpus: int
) -> None:
    """Every drawn metric the run stored with a value other than 0 is shown, as stored (in
    display units); no other series is (wait events apart)."""
    expected = set()
    for (source, metric), how in telemetry_series.DRAWN.items():
        stored = stored_series(db, run_id, source, metric)
        key = (how.dataset, how.label)
        if not any(stored.values()) or key in expected:  # absent, 0, or drawn from another
            continue
        expected.add(key)
        factor = host_cpus / 100 if how.factor == telemetry_series.HOST_SHARE else how.factor
        assert_close_to_stored(shown[key], stored, factor)
    assert {key for key in shown if key[0] != telemetry_series.WAITS} == expected


def test_telemetry_and_tps_share_the_time_axis(telemetry_db: Path, tmp_path: Path) -> None:
    """Every stored series numbers its seconds alike (second t covers (t - 1, t] after
    pgbench's start): the page draws TPS and telemetry on one axis without moving either."""
    data = report_data(telemetry_db, tmp_path / "r.html")
    with sqlite3.connect(telemetry_db) as connection:
        runs = connection.execute(
            "SELECT r.id, min(s.t), max(s.t), r.latency_source FROM runs r "
            "JOIN run_seconds s ON s.run_id = r.id GROUP BY r.id"
        ).fetchall()
    assert runs
    for run_id, first, last, source in runs:
        assert source == "full log" and first == 1
        seconds = page_seconds(data, run_id)
        assert seconds == list(range(first, last + 1))
        telemetry_seconds = {
            t for series in decoded_telemetry(data, run_id).values() for t in series
        }
        assert min(telemetry_seconds) == seconds[0] == 1


def test_telemetry_beyond_the_budget_is_left_out_and_said(
    telemetry_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry_series, "TELEMETRY_SECONDS", 3 * TELEMETRY_PLAN.duration_s)
    data = report_data(telemetry_db, tmp_path / "r.html")
    drawn = [run for run, item in data["detail"]["runs"].items() if "x" in item]
    assert drawn == ["1", "2", "4"]  # the first ones in run order (3 failed: no telemetry)
    note = data["detail"]["telemetry"]["note"]
    assert "drawn for 3 of the 7 runs with telemetry" in note and "24 s" in note
    keys = [c["key"] for c in data["runs"]["columns"]]
    column = data["runs"]["columns"][keys.index("telemetry")]
    assert "hidden" not in column
    marks = {row[keys.index("id")]: row[keys.index("telemetry")] for row in data["runs"]["rows"]}
    assert marks == {1: "drawn", 2: "drawn", 3: None, 4: "drawn"} | dict.fromkeys(
        range(5, 9), "left out"
    )


def test_the_first_repeat_of_every_cell_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry_series, "TELEMETRY_SECONDS", 200)
    # (id, repeat, sequence, measured seconds): a sequential campaign, repeats side by side
    runs = [(1, 1, 0, 60.02), (2, 2, 1, 60.01), (3, 1, 2, 60.03), (4, 2, 3, 60.0), (5, 1, 4, 90)]
    assert telemetry_series.charted(runs) == [1, 3]  # run 5 would pass the budget: it stops there


def test_beyond_the_busiest_wait_events_the_rest_are_summed_per_type() -> None:
    events = [f"LWLock:L{i}" for i in range(6)] + ["Lock:tuple", "IO:DataFileRead", "CPU:CPU"]
    events += ["IO:WALSync", "Client:ClientRead"]
    rows = [  # the first events are the busiest; the first is seen in second 1 only
        ("pg_stat_activity", event, t, float(len(events) - i) * (3 if i == 0 else 1))
        for i, event in enumerate(events)
        for t in ((1,) if i == 0 else (1, 2))
    ]
    series = {s.label: s for s in telemetry_series.drawn_series(rows, host_cpus=None)}
    busiest = events[: telemetry_series.MAX_EVENTS]
    assert set(series) == set(busiest) | {"CPU:other", "IO:other", "Client:other"}
    assert series["IO:other"].values == (2.0, 2.0) and series["Client:other"].values == (1.0, 1.0)
    assert series["LWLock:L0"].t == (1, 2) and series["LWLock:L0"].values == (33.0, 0.0)
    stacked = [label.split(":")[0] for label in series]  # stacking order: by type, CPU first
    assert stacked == sorted(stacked, key=telemetry_series.WAIT_TYPES.index)


def test_telemetry_timeline_as_an_image(tmp_path: Path) -> None:
    # One server: four runs, one failed without telemetry; each image takes about 0.2 s.
    db = write_synthetic(
        tmp_path / "res", replace(TELEMETRY_PLAN, servers=TELEMETRY_PLAN.servers[:1])
    )
    with Store(db) as store:
        view = load_view(store, 1)
    assert any(not r.telemetry for r in view.runs)
    files = images.export(view, tmp_path / "img")
    timelines = sorted(f.name for f in files if f.name.endswith("-timeline.svg"))
    assert timelines == [f"run-{r.id}-timeline.svg" for r in view.runs if r.telemetry]
    svg = (tmp_path / "img" / "run-1-timeline.svg").read_text()
    for title in ("Benchmark backends by wait event", "CPU in cores", "Commits and WAL flushes"):
        assert title in svg


@pytest.mark.server
def test_real_campaign_telemetry_in_the_payload(real_campaign: Any, tmp_path: Path) -> None:
    """Real runs of 15 and 18: every run with telemetry has its series, equal to the stored
    ones, on the axis of its TPS."""
    db = real_campaign.results_dir / "results.db"
    data = report_data(db, tmp_path / "r.html")
    with sqlite3.connect(db) as connection:
        recorded = dict(connection.execute("SELECT run_id, host_cpus FROM run_telemetry"))
        runs = connection.execute("SELECT id, status FROM latest_runs").fetchall()
    assert recorded
    for run_id, status in runs:
        shown = decoded_telemetry(data, run_id)
        assert bool(shown) == (run_id in recorded), run_id
        if not shown:
            continue
        assert_as_stored(db, run_id, shown, recorded[run_id])
        # the host's CPU and pgbench's are sampled for every managed run
        assert (telemetry_series.HOST_CPU, "host: user") in shown
        assert (telemetry_series.PROCESS_CPU, "pgbench: on a CPU") in shown
        if status == "ok":
            seconds = page_seconds(data, run_id)
            first_telemetry = min(t for series in shown.values() for t in series)
            assert seconds[0] == first_telemetry == 1


def test_a_capacity_search_of_a_hostile_server_stays_text(hostile_view: ReportView) -> None:
    # The knee chart's element is named after its server: the name must not end the attribute.
    slo = parse_slo("p99 <= 10ms")
    point = KneePoint(1, "grow", 50, 4, 49.0, 1.0, 5.0, 5.0, 0.0, 0.0, True, "")
    answer = CapacityAnswer(50.0, 50.0, None, "")
    searched = CapacityView(HOSTILE, "s=1", "c", slo, 10.0, answer, (point,))
    page = html.render(replace(hostile_view, capacity=(searched,)))
    assert HOSTILE not in page
    assert 'id="chart-knee-&lt;script&gt;alert(1)&lt;/script&gt;-c"' in page
