"""What limited each member server of a group's run: the campaign's diagnosis of a single
server's run, given the member's own telemetry, -P series and load generator figures (never the
group's sum), kept with its part and stored in run_servers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pgbenchlab import plan
from pgbenchlab.analysis import telemetry_figures
from pgbenchlab.analysis.diagnosis import Bottleneck, Diagnosis, diagnose
from pgbenchlab.campaign.assemble import generator_figures, progress_seconds
from pgbenchlab.campaign.together import diagnosed, server_parts
from pgbenchlab.invocation.command import Completed, Share
from pgbenchlab.plan import RunSpec
from pgbenchlab.records.telemetry import LogEvent, RunTelemetry, SourceStatus, WaitCount
from pgbenchlab.results import OK, RunResult
from pgbenchlab.store import Store
from pgbenchlab.telemetry.campaign import CampaignTelemetry

GOLDEN = Path(__file__).parent / "golden" / "pgbench" / "18" / "select-only.stdout"
PLAN = """
[campaign]
name = "pair"
[defaults]
duration = "7s"
[[server]]
name = "a"
[[server]]
name = "b"
[[server_group]]
name = "ab"
servers = ["a", "b"]
solo = false
[matrix]
clients = [2]
"""
CHECKPOINT = (
    LogEvent(3.2, "checkpoint_start", "checkpoint starting: immediate", {}),
    LogEvent(3.9, "checkpoint_end", "checkpoint complete", {"total_s": 0.7}),
)


def telemetry(waits: dict[tuple[str, str], int]) -> RunTelemetry:
    """A member's telemetry over a 7 s run with a checkpoint from 3.2 to 3.9 s in its log."""
    return RunTelemetry(
        started_at=0.0,
        duration_s=7.0,
        server_version_num=180000,
        activity_rounds=35,
        counter_rounds=9,
        sources=(SourceStatus("server_log", True),),
        series=(),
        totals=(),
        waits=tuple(WaitCount(kind, event, n) for (kind, event), n in waits.items()),
        events=CHECKPOINT,
        statements=(),
        pgbench_threads=2,
        host_cpus=2,
    )


def progress(tps: list[float]) -> str:
    return "".join(
        f"progress: {t}.0 s, {v:.1f} tps, lat 2.000 ms stddev 0.100, 0 failed\n"
        for t, v in enumerate(tps, start=1)
    )


def share(server: str, tps: list[float], cpu_s: float) -> Share:
    done = Completed(("pgbench",), 0, GOLDEN.read_text(), progress(tps), 7.0, cpu_s, False)
    return Share("local", 2, 2, None, 1, 2, 0.0, 0.0, done, server)


def group_run(spec: RunSpec, shares: tuple[Share, ...]) -> tuple[RunResult, Completed]:
    done = Completed(("pgbench",), 0, "", "", 7.0, 0.0, False, shares)
    result = RunResult(
        run_key="ab-r1",
        cell_id="ab",
        sequence=1,
        repeat=1,
        status=OK,
        spec=spec.stored_cell,
        argv=("pgbench",),
        started_at=1.0,
        finished_at=8.0,
        pgbench_version="pgbench (PostgreSQL) 18.6",
        seconds=progress_seconds(done),
        generators=generator_figures(shares, 7),
    )
    return result, done


def expected(sampled: RunTelemetry, tps: list[float]) -> Diagnosis:
    series = list(enumerate(tps, start=1))
    return diagnose(telemetry_figures.figures(sampled, series, clients=2))


def test_each_member_is_diagnosed_on_its_own_telemetry_and_series(tmp_path: Path) -> None:
    """a's TPS fell during its checkpoint; b's did not, but its backends waited on a lock. The
    group's summed series dips too: b judged on it would be checkpoint-disturbed."""
    spec = plan.parse(PLAN, str(tmp_path / "p.toml"), base=tmp_path).specs[0]
    a_tps, b_tps = [900.0, 1000, 1000, 150, 1000, 1000, 900], [900.0] + [1000] * 5 + [900]
    sampled = {
        "a": telemetry({("CPU", "CPU"): 30, ("Client", "ClientRead"): 5}),
        "b": telemetry({("Lock", "relation"): 25, ("CPU", "CPU"): 10}),
    }
    shares = (share("a", a_tps, 1.0), share("b", b_tps, 1.0))
    result, done = group_run(spec, shares)
    parts, _ = server_parts(spec, shares, sampled)
    a, b = diagnosed(parts, result, done, sampled, CampaignTelemetry(fsync_test=False))
    assert (a.verdict, b.verdict) == ("checkpoint_disturbed", "lock_bound")
    want_a, want_b = expected(sampled["a"], a_tps), expected(sampled["b"], b_tps)
    assert (a.verdict, a.evidence) == (want_a.verdict.value, want_a.evidence)
    assert (b.verdict, b.evidence) == (want_b.verdict.value, want_b.evidence)
    summed = [s.tps for s in result.seconds]
    assert expected(sampled["b"], summed).verdict == Bottleneck.CHECKPOINT_DISTURBED
    # kept with the parts, in run_servers, and read back as they were
    with Store(tmp_path / "results.db") as store:
        campaign = store.start_campaign("c", "c.toml", "", "d", {"pgbenchlab": "0"}, {})
        run_id = store.record_run(campaign, replace(result, servers=(a, b)))
        assert store.run_server_parts(run_id) == (a, b)


def test_a_saturated_load_generator_is_named_for_its_member_only(tmp_path: Path) -> None:
    """a's pgbench used 1.95 of its 2 CPUs: a is client-bound, named by its generator; b,
    driven from the same machine with CPU to spare, keeps its own verdict."""
    spec = plan.parse(PLAN, str(tmp_path / "p.toml"), base=tmp_path).specs[0]
    flat = [1000.0] * 7
    lock = {("Lock", "relation"): 25, ("CPU", "CPU"): 10}
    sampled = {"a": telemetry(lock), "b": telemetry(lock)}
    shares = (share("a", flat, 13.65), share("b", flat, 2.0))
    result, done = group_run(spec, shares)
    parts, _ = server_parts(spec, shares, sampled)
    a, b = diagnosed(parts, result, done, sampled, CampaignTelemetry(fsync_test=False))
    assert a.verdict == "client_bound" and a.evidence[0].startswith("load generator a@local")
    assert (b.verdict, b.evidence) == ("lock_bound", expected(sampled["b"], flat).evidence)
