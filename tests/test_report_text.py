"""`report --format text` (72 columns, no markup, for a mailing list) and `compare --metric`,
`--equivalence` and `--correction` on stored campaigns: synthetic results databases, and the
suite's real campaign (two major versions)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab.cli import main
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import Store
from pgbenchlab.store.columns import RUN_COLUMNS
from pgbenchlab.store.metrics import METRICS
from support import Campaign

MARKUP = re.compile(r"<[a-z/]|\*\*|^#|\|.*\||^\s*[-*] |`")


def cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def plain_72(text: str) -> None:
    """Every line fits 72 columns, and nothing is markup."""
    too_long = [line for line in text.splitlines() if len(line) > 72]
    assert not too_long, too_long
    marked = [line for line in text.splitlines() if MARKUP.search(line)]
    assert not marked, marked


def judged(results: Path, campaign_table: str) -> Path:
    """A synthetic campaign whose stored plan asks for these verdict rules."""
    db = write_synthetic(results, SyntheticPlan())
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE campaigns SET plan_text = ?",
            (f"[campaign]\nname = 'synthetic'\n{campaign_table}\n",),
        )
    connection.close()
    return results


def test_the_text_report_says_what_was_compared_in_72_plain_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = judged(tmp_path / "r", 'equivalence = "1%"\ncorrection = "bh"')
    code, out, _ = cli(capsys, "report", "--results", results, "--format", "text")
    assert code == 0
    plain_72(out)
    flat = " ".join(out.split())  # sentences wrapped at any space
    for expected in (
        "What was compared",
        "pg15 (baseline): PostgreSQL 15.18",
        "setting shared_buffers: pg15 64MB, pg18 96MB",
        "Machine and pgbench",
        "pgbench: pgbench (PostgreSQL) 18.1",
        "pg18 against pg15",
        "workload=select-only, clients=1",
        "Benjamini–Hochberg (false-discovery",
        "Equivalence within ±1%",
        "Noise floors",
        "restart to restart and build to build: not measured",
        "How to reproduce",
        "pgbenchlab 0.1.0",
        'equivalence = "1%"',  # the plan, inline
    ):
        assert expected in flat, expected
    assert '    equivalence = "1%"\n    correction = "bh"\n' in out  # quoted as it is
    assert re.search(r"TPS: [+-]\d+\.\d% \([+-]\d+\.\d% to [+-]\d+\.\d%, n=3/3\)", flat)
    assert re.search(r"not (decided|equivalent)", flat)
    written = tmp_path / "mail.txt"
    assert cli(capsys, "report", "--results", results, "--format", "text", "-o", written)[0] == 0
    assert written.read_text() == out


def test_compare_on_any_metric_with_equivalence_and_the_correction_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r"
    write_synthetic(results, SyntheticPlan())
    base = ("compare", "--results", results, "--baseline", "pg15", "--candidate", "pg18")
    code, out, _ = cli(capsys, *base, "--metric", "tps,latency_avg", "--metric", "p95_ms",
                       "--equivalence", "1%")  # fmt: skip
    assert code == 0
    rows = [line.split("  ")[0:2] for line in out.splitlines()]
    assert {"TPS", "latency_avg", "p95"} <= {r.strip() for row in rows for r in row}
    assert "p99 latency" not in out  # only the metrics asked for
    assert "within ±1%" in out and "Equivalence (two one-sided tests):" in out
    assert "Holm (family-wise error rate) at 5%." in out
    code, out, _ = cli(capsys, *base, "--correction", "bh", "--json")
    assert code == 0 and '"correction": "bh"' in out
    code, _, err = cli(capsys, *base, "--metric", "cpu_per_lunch")
    assert code == 2 and err.count("\n") == 1
    assert "no metric 'cpu_per_lunch'; metrics: tps, latency_avg" in err
    code, _, err = cli(capsys, *base, "--equivalence", "0%")
    assert code == 2 and "--equivalence '0%'" in err


def test_every_column_with_a_direction_is_a_metric_the_views_carry(tmp_path: Path) -> None:
    """A column added to the registry with `better` needs nothing else: it is a metric, and
    every run's view carries its value."""
    directed = [c for c in RUN_COLUMNS if c.better]
    assert {m.column for m in METRICS.values()} == {c.key for c in directed}
    assert METRICS["tps"].higher_is_better and not METRICS["p99"].higher_is_better
    db = write_synthetic(tmp_path, SyntheticPlan())
    with Store(db) as store:
        view = load_view(store, store.campaign_id(None), detail=False)
    figures = dict(view.runs[0].figures)
    assert figures["tps"] == view.runs[0].tps
    assert figures["latency_avg"] == view.runs[0].latency_avg_ms


@pytest.mark.server
def test_the_text_report_of_a_real_campaign(
    real_campaign: Campaign, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "report", "--results", real_campaign.results_dir, "--format",
                       "text")  # fmt: skip
    assert code == 0
    plain_72(out)
    out = " ".join(out.split())
    servers = [s.name for s in real_campaign.plan.servers]
    assert f"{servers[1]} against {servers[0]}" in out
    assert re.search(r"PostgreSQL 15\.\d+", out) and re.search(r"PostgreSQL 18\.\d+", out)
    assert re.search(r"e\.g\. pgbench .*-c \d", out)
    assert re.search(r"TPS: run to run \d+\.\d%", out)
    assert "Holm (family-wise error rate)" in out
    # its plan has a line wider than the page (a workload table): named, not quoted
    assert "too long to quote) is stored with the campaign" in out


def test_change_points_on_the_metrics_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(3):
        nightly = SyntheticPlan(name=f"night{i}", seed=i, clients=(1,),
                                servers=(FakeServer("pg", "18.1"),))  # fmt: skip
        write_synthetic(tmp_path, nightly)
    argv = ["compare", "--results", tmp_path, "--series", "campaign", "night0", "night1", "night2"]
    code, out, _ = cli(capsys, *argv, "--metric", "latency_avg,p95")
    assert code == 0
    assert "(latency_avg, p95)" in " ".join(out.split())
    assert "TPS" not in out


def test_metric_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_synthetic(tmp_path, SyntheticPlan())
    argv = ["bisect", tmp_path / "plan.toml", "--good", "a", "--bad", "b", "--metric", "nope"]
    code, _, err = cli(capsys, *argv, "--results", tmp_path)
    assert code == 2 and "no metric 'nope'; metrics: tps," in err and err.count("\n") == 1
    series = ["compare", "--results", tmp_path, "--series", "server", "--equivalence", "1%"]
    code, _, err = cli(capsys, *series)
    assert code == 2 and "--equivalence judges two selections" in err


def test_the_reports_change_tables_carry_the_adjustment(tmp_path: Path) -> None:
    """+25 % TPS at select-only, 2 clients is significant alone (p = 0.025) but not across
    the campaign's 12 comparisons: not enough data, and the tables' note names Holm."""
    from pgbenchlab.report.render.tables import change_tables

    db = write_synthetic(tmp_path, SyntheticPlan())
    with Store(db) as store:
        view = load_view(store, store.campaign_id(None), detail=False)
    held = [c for c in view.changes if "not significant across the 12 comparisons" in c.reason]
    assert held and all(c.verdict == "not_enough_data" for c in held)
    assert "Verdicts adjusted across the 12 comparisons: Holm" in change_tables(view)[0].note


def test_compare_judges_as_the_campaigns_plan_asks_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = judged(tmp_path / "r", 'equivalence = "1%"\ncorrection = "bh"')
    base = ("compare", "--results", results, "--baseline", "pg15", "--candidate", "pg18")
    code, out, _ = cli(capsys, *base)
    assert code == 0 and "Benjamini–Hochberg (false-discovery rate)" in out
    assert "within ±1%" in out
    code, out, _ = cli(capsys, *base, "--correction", "holm", "--equivalence", "3%")
    assert code == 0 and "Holm (family-wise error rate)" in out and "within ±3%" in out
