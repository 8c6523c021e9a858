"""A real Prometheus (Debian's package, started here) scrapes a real campaign run with
`pgbenchlab run --metrics` every second; its HTTP API gives back each run's TPS series with the
run's labels, every value one that pgbench printed in that run's -P lines, the servers'
telemetry and the campaign's progress; the Grafana dashboard's queries are Prometheus's to
parse."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import prometheus_server
from cli_process import run_cli
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.pgbench.log_files import read_log_bytes
from pgbenchlab.pgbench.progress import parse_stderr
from pgbenchlab.store import Store
from pgbenchlab.store.records import RunRecord
from support import require_installs

PLAN = """
[campaign]
name = "watched"
[defaults]
duration = "4s"
warmup = "1s"
[[server]]
name = "pg"
install = "embedded"
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1, 2]
"""
DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "pgbenchlab.json"


def printed_tps(results: Path, run: RunRecord) -> set[float]:
    """The TPS of each -P line of the run's measured pgbench, as it printed them."""
    [stderr] = results.rglob(f"*-{run.run_key}/stderr.txt.zst")
    return {line.tps for line in parse_stderr(read_log_bytes(stderr).decode()).progress}


def values(series: dict[str, Any]) -> list[float]:
    return [float(value) for _, value in series["values"]]


@pytest.mark.server
@pytest.mark.alone  # two scrapes a second apart in a 4 s run: a neighbour delayed one
def test_prometheus_scrapes_a_real_campaign(tmp_path: Path, results_dir: Path) -> None:
    require_installs("embedded")
    missing = prometheus_server.unavailable()
    if missing:
        pytest.skip(missing)
    plan_file = tmp_path / "watched.toml"
    plan_file.write_text(PLAN)
    target = f"127.0.0.1:{LOCAL_HOST.free_port()}"
    with prometheus_server.Prometheus([target], tmp_path / "prometheus") as prometheus:
        done = run_cli("run", plan_file, "--results", results_dir, "--metrics", target)
        assert done.returncode == 0, done.stderr
        assert f"live metrics at http://{target}/metrics" in done.stderr
        end = time.time()
        with Store(results_dir / RESULTS_DB) as store:
            runs = store.run_records(store.campaign_id("watched"))
        assert len(runs) == 2

        measured = prometheus.raw('pgbenchlab_run_tps{job="pgbenchlab", phase="measured"}', end)
        by_run = {s["metric"]["run"]: s for s in measured}
        assert set(by_run) == {r.run_key for r in runs}, measured
        for run in runs:
            series = by_run[run.run_key]
            labels = series["metric"]
            assert labels["instance"] == target
            assert {k: labels[k] for k in ("campaign", "server", "scale", "workload")} == {
                "campaign": "watched", "server": "pg", "scale": "1", "workload": "select-only",
            }  # fmt: skip
            assert labels["clients"] == str(run.spec.clients)
            assert labels["cell"] == run.values["cell_id"]
            assert len(series["values"]) >= 2, "a 4 s run scraped every second"
            assert set(values(series)) <= printed_tps(results_dir, run), "pgbench's own TPS"

            commits = prometheus.raw(
                'pgbenchlab_telemetry{source="pg_stat_database", metric="xact_commit", '
                f'run="{run.run_key}"}}',
                end,
            )
            assert [s["metric"]["member"] for s in commits] == ["pg"]
            assert max(values(commits[0])) > 0, "commits per second while pgbench ran"

            phases = prometheus.raw(
                f'pgbenchlab_run_phase{{run="{run.run_key}", pgbenchlab_run_phase="measured"}}',
                end,
            )
            assert 1.0 in values(phases[0])

        [done_runs] = prometheus.raw('pgbenchlab_campaign_runs_done{campaign="watched"}', end)
        assert values(done_runs)[0] == 0 and 1.0 in values(done_runs), "progress as it went"
        [eta] = prometheus.raw('pgbenchlab_campaign_eta_seconds{campaign="watched"}', end)
        assert values(eta)[0] > values(eta)[-1] >= 0

        dashboard_queries_are_prometheus_queries(prometheus, end)


def dashboard_queries_are_prometheus_queries(
    prometheus: prometheus_server.Prometheus, at: float
) -> None:
    """Each of the dashboard's queries, its variables set, parsed and run by Prometheus; the
    TPS panel's finds the campaign's runs."""
    dashboard = json.loads(DASHBOARD.read_text())
    found: dict[str, int] = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            query = target["expr"].replace("$campaign", "watched").replace("$server", ".*")
            data = prometheus.api("query_range", query=query, start=at - 120, end=at, step="1s")
            found[panel["title"]] = found.get(panel["title"], 0) + len(data["result"])
    assert found["TPS (pgbench -P 1)"] >= 2
    assert found["Commits and rollbacks per second"] >= 1
    assert found["Runs done"] == 1
