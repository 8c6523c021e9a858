"""The HTML report, the Markdown summary and the images: self-contained, escaped, and showing
the view model's numbers."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab.report import html, images, markdown, write_report
from pgbenchlab.report.model import ReportView
from pgbenchlab.report.tables import key_tables
from pgbenchlab.report.viewmodel import load_view
from pgbenchlab.store import Store

HOSTILE = "<script>alert(1)</script>"
HOSTILE_ERROR = "<img src=x onerror=alert(3)> & \"quoted\" 'single' </script><!--"
HOSTILE_PLAN = SyntheticPlan(
    name="</script><svg onload=alert(2)>",
    servers=(
        FakeServer(HOSTILE, "15.18", 1.0, {"work_mem": "<b>4MB</b>", "shared_buffers": "1GB"}),
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


def embedded_data(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


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
        "chart-heat-tps",
        "chart-heat-p99",
    }
    tps = found["chart-tps"]["specs"]["server"]
    assert tps["title"]["text"] == "Throughput against clients"
    point_layer = tps["spec"]["layer"][-1]
    assert point_layer["encoding"]["y"]["title"] == "throughput (TPS, transactions/s)"
    assert point_layer["encoding"]["href"] == {"field": "link"}
    assert point_layer["params"][0]["bind"] == "legend"
    # one spec per axis the reader may draw one line per
    assert set(found["chart-tps"]["specs"]) == {"server", "workload"}


def test_markdown_tables_and_escaping(hostile_view: ReportView) -> None:
    text = markdown.render(hostile_view)
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script>alert(1)&lt;/script>" in text
    assert r"pg18 \| \*bold\* \`code\`" in text
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
