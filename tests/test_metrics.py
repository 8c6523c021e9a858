"""The live metrics (`run --metrics`) without a server: a campaign's Reporter events fed to the
exporter, scraped over real HTTP from its listener and read back with prometheus_client's
OpenMetrics parser; the address, the busy port, where it binds and when it stops; the Grafana
dashboard's queries against what is served. A real Prometheus scraping a real campaign is
`test_metrics_prometheus.py`."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from cli_process import run_cli
from pgbenchlab import plan
from pgbenchlab.cli.listener import Address, parse_address, serving
from pgbenchlab.cli.metrics import (
    METRICS,
    PREFIX,
    RUN_LABELS,
    CampaignMetrics,
    phase_of,
    run_labels,
)
from pgbenchlab.errors import UserError
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.records.telemetry import Point
from pgbenchlab.results import RunStatus
from test_cli_display import FakeClock, finished, progress, specs

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "pgbenchlab.json"


def scrape(address: Address, accept: str | None = None) -> tuple[str, str]:
    """The body and content type served at address (a client naming no format, as curl)."""
    request = urllib.request.Request(address.url, headers={"Accept": accept or "*/*"})
    with urllib.request.urlopen(request, timeout=5) as answer:
        return answer.read().decode(), answer.headers["Content-Type"]


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def named(text: str, name: str) -> list[Sample]:
    return [s for s in samples(text) if s.name == f"{PREFIX}_{name}"]


@pytest.fixture
def served() -> Iterator[tuple[Address, CampaignMetrics, FakeClock]]:
    address = Address("127.0.0.1", LOCAL_HOST.free_port())
    with serving(address, None) as metrics:
        assert metrics is not None
        clock = FakeClock()
        metrics.clock = clock  # the campaign's ETA starts on it at campaign_started
        yield address, metrics, clock


def test_a_campaign_is_served_as_it_goes(
    served: tuple[Address, CampaignMetrics, FakeClock],
) -> None:
    address, metrics, clock = served
    text, kind = scrape(address)
    assert kind.startswith("application/openmetrics-text; version=1.0.0"), kind
    assert text.endswith("# EOF\n")
    assert named(text, "run_info") == [] and named(text, "campaign_info") == []
    the_plan, todo = specs()
    first, second = todo
    metrics.campaign_started(the_plan, todo, 0)
    metrics.run_started(first, 1, 2)
    for step in ("server", "dataset", "vacuum", "checkpoint", "warmup"):
        metrics.phase(first, step)
    metrics.progress(first, progress(1.0, 900.5))
    text, _ = scrape(address)
    [tps] = named(text, "run_tps")
    labels = dict(zip(RUN_LABELS, run_labels(first), strict=True))
    assert {k: labels[k] for k in ("campaign", "server", "scale", "workload", "clients")} == {
        "campaign": "shown", "server": "pg", "scale": "10", "workload": "select-only",
        "clients": "1",
    }  # fmt: skip
    assert (labels["run"], labels["cell"]) == (first.run_key, first.cell_id)
    assert tps.labels == labels | {"phase": "warmup"}
    assert tps.value == 900.5

    metrics.phase(first, "measuring")
    text, _ = scrape(address)
    assert named(text, "run_tps") == [], "the warmup's last second is not the measured run's"
    clock.now += 5.0
    metrics.progress(first, progress(1.0, 1234.0))
    metrics.sampled(first, "pg", [Point("cpu", "user_pct", 1, 42.5)])
    text, _ = scrape(address)
    [tps] = named(text, "run_tps")
    assert (tps.value, tps.labels["phase"]) == (1234.0, "measured")
    [latency] = named(text, "run_latency_seconds")
    assert latency.value == pytest.approx(0.00025)
    [cpu] = named(text, "telemetry")
    assert (cpu.labels["member"], cpu.labels["source"], cpu.labels["metric"]) == (
        "pg",
        "cpu",
        "user_pct",
    )
    assert cpu.value == 42.5 and cpu.labels["run"] == first.run_key
    phases = {s.labels[f"{PREFIX}_run_phase"]: s.value for s in named(text, "run_phase")}
    assert phases == {"prepare": 0, "warmup": 0, "measured": 1, "finish": 0}
    [step] = named(text, "run_step_info")
    assert step.labels["step"] == "measuring"
    [elapsed] = named(text, "run_elapsed_seconds")
    assert elapsed.value == 5.0
    [eta] = named(text, "campaign_eta_seconds")
    assert eta.value == pytest.approx(27.0 - 5.0), "the run under way counts down"

    metrics.phase(first, "analysing")
    text, _ = scrape(address)
    assert named(text, "run_tps") == [] and named(text, "telemetry") == []
    phases = {s.labels[f"{PREFIX}_run_phase"]: s.value for s in named(text, "run_phase")}
    assert phases["finish"] == 1
    metrics.sampled(first, "pg", [Point("cpu", "user_pct", 2, 50.0)])
    assert named(scrape(address)[0], "telemetry") == [], "a late second is not the run's now"

    metrics.run_finished(first, finished(first, 1234.0))
    metrics.run_started(second, 2, 2)
    metrics.run_finished(second, finished(second, None, RunStatus.FAILED))
    text, _ = scrape(address)
    assert named(text, "run_info") == []
    [done] = named(text, "campaign_runs_done")
    [left] = named(text, "campaign_runs_todo")
    assert (done.value, left.value) == (2, 0)
    by_status = {s.labels["status"]: s.value for s in named(text, "campaign_runs_finished_total")}
    assert by_status == {"ok": 1, "failed": 1}


def test_phases_of_the_campaigns_steps() -> None:
    assert phase_of("server", "prepare") == "prepare"
    assert phase_of("pg_test_fsync", "prepare") == "prepare"
    assert phase_of("warmup", "prepare") == "warmup"
    assert phase_of("measuring", "warmup") == "measured"
    assert phase_of("profile", "measured") == "finish"
    assert phase_of("analysing", "finish") == "finish"
    assert phase_of("a step not known yet", "measured") == "finish"


def test_the_classic_text_format_when_asked(
    served: tuple[Address, CampaignMetrics, FakeClock],
) -> None:
    address, _, _ = served
    text, kind = scrape(address, "text/plain; version=0.0.4")
    assert kind.startswith("text/plain; version=0.0.4"), kind
    assert "# EOF" not in text and f"{PREFIX}_campaign_runs_done" in text


def test_labels_hold_no_secret(tmp_path: Path) -> None:
    text = """
[campaign]
name = "secret"
[[server]]
name = "pg"
install = "embedded"
settings = { primary_conninfo = "host=h user=u password=s3cr3t-base" }
setting = { "myext.conninfo" = ["host=h user=u password=s3cr3t-axis"] }
[matrix]
scale = [1]
clients = [1]
"""
    [spec] = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path).specs
    metrics = CampaignMetrics()
    metrics.run_started(spec, 1, 1)
    metrics.phase(spec, "measuring")
    metrics.progress(spec, progress(1.0, 10.0))
    registry = CollectorRegistry()
    registry.register(metrics)
    served = generate_latest(registry).decode()
    assert "s3cr3t" not in served
    [info] = named(served, "run_info")
    assert info.labels["variant"] == "myext.conninfo=host=h user=u password=********"


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:9187", Address("127.0.0.1", 9187)),
        ("localhost:80", Address("localhost", 80)),
        ("[::1]:9187", Address("::1", 9187)),
        ("0.0.0.0:65535", Address("0.0.0.0", 65535)),
    ],
)
def test_addresses(text: str, address: Address) -> None:
    assert parse_address(text) == address
    assert str(address) == text


@pytest.mark.parametrize("text", ["9187", ":9187", "host:", "host:0", "h:65536", "::1:9187", "h:x"])
def test_an_address_must_name_host_and_port(text: str) -> None:
    with pytest.raises(UserError, match=r"give HOST:PORT, such as 127\.0\.0\.1:9187"):
        parse_address(text)


def test_it_listens_only_where_asked_and_stops_with_the_block() -> None:
    address = Address("127.0.0.1", LOCAL_HOST.free_port())
    with serving(address, None):
        assert "pgbenchlab_campaign_runs_done" in scrape(address)[0]
        with closing(socket.socket()) as other, pytest.raises(ConnectionRefusedError):
            other.connect(("127.0.0.2", address.port))  # loopback too, but not what was asked
    with closing(socket.socket()) as after, pytest.raises(ConnectionRefusedError):
        after.connect(("127.0.0.1", address.port))


def test_a_busy_port_is_refused_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        '[campaign]\nname = "busy"\n[[server]]\nname = "pg"\ninstall = "embedded"\n'
        "[matrix]\nscale = [1]\nclients = [1]\n"
    )
    results = tmp_path / "results"
    commands = [["run", plan_file], ["capacity", plan_file, "--slo", "p99 <= 10ms"]]
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in commands:
            done = run_cli(*command, "--results", results, "--metrics", f"127.0.0.1:{port}")
            assert done.returncode == 2, done.stderr
            assert done.stderr == (
                f"pgbenchlab: error: --metrics 127.0.0.1:{port}: the port is in use; choose a "
                "free one\n"
            )
            assert not results.exists(), "nothing started"
    for command in commands:
        done = run_cli(*command, "--metrics", "nowhere", "--results", results)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "--metrics 'nowhere': give HOST:PORT" in done.stderr


def test_the_dashboard_asks_only_for_what_is_served(
    served: tuple[Address, CampaignMetrics, FakeClock],
) -> None:
    """Every metric a panel's query names is one the exporter serves, with every family fed a
    sample (a rate-limited run that failed, skipped and retried transactions)."""
    address, metrics, _ = served
    the_plan, [spec, _] = specs()
    metrics.campaign_started(the_plan, [spec], 0)
    metrics.run_started(spec, 1, 1)
    metrics.phase(spec, "measuring")
    line = ProgressLine(
        elapsed_s=1.0, tps=10.0, latency_avg_ms=1.0, latency_stddev_ms=0.5, failed=1,
        lag_ms=0.2, skipped=2, retried=3, retries=4,
    )  # fmt: skip
    metrics.progress(spec, line)
    metrics.sampled(spec, "pg", [Point("cpu", "user_pct", 1, 1.0)])
    served_names = {s.name for s in samples(scrape(address)[0])}
    metrics.run_finished(spec, finished(spec, 10.0))
    served_names |= {s.name for s in samples(scrape(address)[0])}
    assert {f"{PREFIX}_{m}" for m in METRICS} <= served_names
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # (a datasource variable's query is the plugin's type)
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    assert len(queries) >= 8
    for query in queries:
        asked = set(re.findall(rf"\b{PREFIX}_[a-z_]+", query))
        assert asked, f"a query naming no metric: {query}"
        assert asked <= served_names, f"{query}: {asked - served_names} not served"
