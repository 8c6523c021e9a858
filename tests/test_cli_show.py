"""`show RUN` for a person: the run's line, pgbench's report as pgbench printed it (or rebuilt
when the raw output is gone), latency and its source, the diagnosis, waits and server events;
`show RUN --json` keeps printing everything stored."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import zstandard

from conftest_report import SyntheticPlan, add_diagnosis, add_events, write_synthetic
from pgbenchlab import jsontext
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli import main
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.report.views import run as runview
from pgbenchlab.store import Store, run_as_dict
from support import Campaign, case_id

GOLDEN = Path(__file__).parent / "golden" / "pgbench"
REPORTS = [  # the cases in which pgbench printed a report
    p
    for p in sorted(GOLDEN.glob("*/*.stdout"))
    if json.loads(p.with_suffix(".json").read_text())["report"]
]


def show(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    assert main(["show", *map(str, args)]) == 0
    out: str = capsys.readouterr().out
    return out


def test_show_on_a_synthetic_run_with_its_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(workloads=("tpcb-like",), clients=(4,)))
    add_diagnosis(db, 1, "lock_bound", ["row locks held 40 % of samples"])
    add_events(db, [(1, 12.5, "checkpoint", "checkpoint complete: wrote 120 buffers")])
    text = show(capsys, "1", "--results", tmp_path)
    lines = text.splitlines()
    assert lines[0].startswith("run 1 of campaign synthetic (repeat 1, started ")
    assert "tpcb-like · scale" in lines[1] and "4 clients" in lines[1]
    assert lines[2].startswith("status ok · ")
    assert "pgbench's report, as pgbench printed it:" in text
    assert "what limited it: lock bound\n  - row locks held 40 % of samples" in text
    assert "   12.5 s  checkpoint   checkpoint complete: wrote 120 buffers" in text
    detail = json.loads(show(capsys, "1", "--json", "--results", tmp_path))
    assert detail["diagnosis"]["verdict"] == "lock_bound" and detail["seconds"]


def test_show_rebuilds_pgbenchs_report_when_the_raw_output_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_synthetic(tmp_path, SyntheticPlan(workloads=("select-only",), clients=(1,)))
    shutil.rmtree(tmp_path / "artifacts")
    text = show(capsys, "1", "--results", tmp_path)
    assert "rebuilt from the stored fields (its raw output is not kept)" in text
    assert "server events (checkpoints, autovacuum): none during the run" in text


@pytest.mark.server
def test_show_on_real_runs(
    real_campaign: Campaign, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = real_campaign.results_dir
    with Store(results / RESULTS_DB) as store:
        rows = [run_as_dict(r) for r in store.run_records(real_campaign.outcome.campaign_id)]
    full = next(r for r in rows if r["latency_source"] == "full log")
    sampled = next(r for r in rows if str(r["latency_source"]).startswith("sampled log"))
    for row in (full, sampled):
        detail = json.loads(show(capsys, str(row["id"]), "--json", "--results", results))
        text = show(capsys, str(row["id"]), "--results", results)
        assert f"run {row['id']} of campaign tiny" in text
        assert f"status ok · {row['tps']:,.0f} tps" in text
        stdout = stored_stdout(results, row)
        assert "pgbench's report, as pgbench printed it:\n" in text
        assert "\n".join("  " + line for line in stdout.rstrip().splitlines()) in text
        source = f"(from the {row['latency_source']}, {row['latency_samples']:,} samples)"
        assert f"latency percentiles {source}:" in text
        assert f"p99 {row['p99_ms']:.3f} ms" in text
        verdict = detail["diagnosis"]["verdict"].replace("_", " ")
        assert f"what limited it: {verdict}" in text
        assert all(f"  - {e}" in text for e in detail["diagnosis"]["evidence"])
        assert detail["wait_events"], "pg_stat_activity was sampled during the run"
        for wait in detail["wait_events"]:
            assert f"{wait['type']}:{wait['event']}" in text
        assert "server events" in text
        assert len(text.splitlines()) < 60, "one screen"
        rebuilt = runview.rebuilt_report(runview.stored_report(detail)).splitlines()
        assert set(rebuilt) <= set(stdout.splitlines()), "the fallback says what pgbench said"
        assert len(rebuilt) >= 12


def stored_stdout(results: Path, row: dict[str, object]) -> str:
    run_dir = f"{row['sequence']:04d}-{row['run_key']}"
    path = results / "artifacts" / f"tiny-{row['campaign_id']}" / run_dir / "stdout.txt.zst"
    return zstandard.ZstdDecompressor().decompress(path.read_bytes()).decode()


@pytest.mark.parametrize("stdout", REPORTS, ids=case_id)
def test_the_rebuilt_report_says_what_pgbench_printed(stdout: Path) -> None:
    """Every line rebuilt from the stored fields is one pgbench printed, in every version."""
    printed = stdout.read_text()
    stored = json.loads(jsontext.dumps(asdict(parse_report(printed))))  # as the store keeps it
    rebuilt = runview.rebuilt_report(runview.stored_report({"report": stored})).splitlines()
    assert set(rebuilt) <= set(printed.splitlines())
    assert any(line.startswith("transaction type: ") for line in rebuilt)
    assert any(line.startswith("tps = ") for line in rebuilt) == (stored["tps"] is not None)
