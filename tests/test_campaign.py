"""A real campaign end to end: two major versions, two scales, two workloads, two client
counts, two repeats; its results must agree with what pgbench itself printed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import zstandard

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.errors import StoreError
from pgbenchlab.pgbench.report import parse_report
from support import TINY_TWO_VERSIONS, Campaign, QuietReporter

pytestmark = pytest.mark.server


def rows(campaign: Campaign, sql: str) -> list[sqlite3.Row]:
    db = sqlite3.connect(campaign.results_dir / RESULTS_DB)
    db.row_factory = sqlite3.Row
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def raw_stdout(campaign: Campaign, run: sqlite3.Row) -> str:
    name = json.loads(run["artifacts_json"])
    assert "stdout.txt.zst" in name
    artifacts = next((campaign.results_dir / "artifacts").glob(f"*/*-{run['run_key']}"))
    data = (artifacts / "stdout.txt.zst").read_bytes()
    return zstandard.ZstdDecompressor().decompress(data).decode()


def test_every_run_finished_and_is_stored(real_campaign: Campaign) -> None:
    outcome = real_campaign.outcome
    assert outcome.ran == 32 and outcome.failed == 0 and not outcome.interrupted
    runs = rows(real_campaign, "SELECT * FROM latest_runs")
    assert len(runs) == 32
    assert {r["status"] for r in runs} == {"ok"}, [r["error"] for r in runs]
    cells = {(r["server"], r["scale"], r["workload"], r["clients"]) for r in runs}
    assert len(cells) == 16
    assert {r["repeat"] for r in runs} == {1, 2}
    # the hygiene before each run, timed: pgbench's own VACUUM, then a CHECKPOINT waited for
    assert all(r["vacuum_s"] >= 0 and r["checkpoint_s"] > 0 for r in runs)


def test_every_run_agrees_with_the_servers_commit_count(real_campaign: Campaign) -> None:
    sql = (
        "SELECT r.transactions, t.value AS commits, r.warnings_json FROM latest_runs r "
        "JOIN run_telemetry_totals t ON t.run_id = r.id AND t.metric = 'xact_commit'"
    )
    checked = rows(real_campaign, sql)
    assert len(checked) == 32
    for run in checked:
        codes = [w["code"] for w in json.loads(run["warnings_json"])]
        assert "commits_disagree" not in codes
        assert 0 <= run["commits"] - run["transactions"] < 200  # the sampler's own and setup


def test_servers_of_two_major_versions_with_effective_settings(real_campaign: Campaign) -> None:
    servers = {r["name"]: r for r in rows(real_campaign, "SELECT * FROM servers")}
    assert servers["pg15"]["version_num"] // 10000 == 15
    assert servers["pg18"]["version_num"] // 10000 == 18
    assert json.loads(servers["pg15"]["settings_json"])["shared_buffers"] == "64MB"
    assert json.loads(servers["pg18"]["settings_json"])["shared_buffers"] == "96MB"
    assert json.loads(servers["pg18"]["settings_json"])["log_checkpoints"] == "on"


def test_stored_numbers_agree_with_pgbench_own_report(real_campaign: Campaign) -> None:
    for run in rows(real_campaign, "SELECT * FROM latest_runs"):
        report = parse_report(raw_stdout(real_campaign, run))
        assert run["tps"] == report.tps
        assert run["transactions"] == report.transactions
        assert report.latency_avg_measured
        assert run["latency_avg_ms"] == report.latency_avg_ms
        assert run["latency_stddev_ms"] == report.latency_stddev_ms
        assert report.clients == run["clients"]


def test_latency_distribution_from_the_log(real_campaign: Campaign) -> None:
    sources = set()
    for run in rows(real_campaign, "SELECT * FROM latest_runs"):
        source = run["latency_source"]
        sources.add(source.split(" (")[0])
        if source == "full log":
            # Every successful transaction is in the log (pgbench counts the same ones).
            assert run["latency_samples"] == run["transactions"]
        else:
            rate = float(source.removeprefix("sampled log (rate ").rstrip(")"))
            expected = rate * run["transactions"]
            assert abs(run["latency_samples"] - expected) < 6 * expected**0.5 + 10
        values = [run[c] for c in ("min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms")]
        assert values == sorted(values) and values[-1] <= run["max_ms"]
    assert "full log" in sources


def test_per_second_series_and_histograms(real_campaign: Campaign) -> None:
    sql = "SELECT id, transactions, latency_source FROM latest_runs"
    for run in rows(real_campaign, sql):
        seconds = rows(real_campaign, f"SELECT * FROM run_seconds WHERE run_id = {run['id']}")
        assert seconds  # a 2 s run may print a single -P 1 line
        if run["latency_source"] == "full log":  # exact, from every logged transaction
            assert sum(s["tps"] for s in seconds) == run["transactions"]
            # a second in which no transaction ended (a stalled host) has no latency at all
            for s in seconds:
                assert (s["latency_min_ms"] is None) == (s["tps"] == 0), s
                assert s["tps"] == 0 or s["latency_min_ms"] <= s["latency_max_ms"], s
        else:  # pgbench's -P 1 lines: no min/max, the last partial second is not printed
            assert all(s["latency_min_ms"] is None for s in seconds)
            assert 0 < sum(s["tps"] for s in seconds) <= run["transactions"] * 1.05
        hist = rows(real_campaign, f"SELECT * FROM run_histograms WHERE run_id = {run['id']}")
        assert [h["kind"] for h in hist] == ["latency"]


def test_stored_command_line_has_no_local_paths(real_campaign: Campaign) -> None:
    for run in rows(real_campaign, "SELECT argv_json FROM latest_runs"):
        argv = json.loads(run["argv_json"])
        assert argv[0] == "pgbench"
        assert "-P" in argv and "-n" in argv
        assert not any(str(real_campaign.results_dir) in a for a in argv)
        assert not any(a.startswith("/tmp/pgbl-") for a in argv)


def test_progress_events_reach_the_reporter(real_campaign: Campaign) -> None:
    kinds = [kind for kind, _ in real_campaign.reporter.events]
    assert kinds.count("finished") == 32
    assert "progress" in kinds
    phases = {value for kind, value in real_campaign.reporter.events if kind == "phase"}
    assert {"vacuum", "checkpoint", "warmup", "measuring"} <= phases


def test_running_the_same_plan_again_continues_and_a_changed_plan_is_refused(
    real_campaign: Campaign,
) -> None:
    base = real_campaign.results_dir.parent
    same = plan.parse(TINY_TWO_VERSIONS, str(base / "tiny.toml"), base=base)
    outcome = run_campaign(same, real_campaign.results_dir, QuietReporter())
    assert outcome.ran == 0 and outcome.skipped_done == 32
    changed = plan.parse(
        TINY_TWO_VERSIONS.replace('duration = "2s"', 'duration = "3s"'),
        str(base / "tiny.toml"),
        base=base,
    )
    with pytest.raises(StoreError, match='duration = "3s"'):
        run_campaign(changed, real_campaign.results_dir, QuietReporter())


def test_raw_outputs_are_kept_compressed(real_campaign: Campaign) -> None:
    run_dirs = list((real_campaign.results_dir / "artifacts").glob("*/*"))
    assert len(run_dirs) == 32
    for run_dir in run_dirs:
        names = {p.name for p in run_dir.iterdir()}
        assert {"stdout.txt.zst", "stderr.txt.zst", "argv.json"} <= names
        assert any(n.startswith("pgbench_log.") and n.endswith(".zst") for n in names)
        assert not any(Path(n).suffix not in (".zst", ".json") for n in names)
