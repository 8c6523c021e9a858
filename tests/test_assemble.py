"""A run's result assembled from what pgbench left behind, without a server: the golden
captures of real pgbench runs (tests/golden/pgbench/) and real per-transaction logs
(tests/golden/logs/) go in, the stored figures, statuses and warnings come out."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES
from pgbenchlab.campaign.assemble import Hygiene, LogReading, MeasuredRun, assemble
from pgbenchlab.campaign.executor import LocalExecutor
from pgbenchlab.campaign.measure import Pgbench
from pgbenchlab.findings import RunWarning, WarningCode
from pgbenchlab.records.telemetry import NO_LOG_ACCESS, RunTelemetry, SourceStatus
from pgbenchlab.results import RunStatus
from replay import client, golden_log, recorded

STARTED, FINISHED = 1_800_000_000.0, 1_800_000_003.5


def spec(
    workload: str = "tpcb-like", *, scale: int = 2, clients: int = 2, threads: int = 2
) -> plan.RunSpec:
    text = f"""
[defaults]
duration = "2s"
threads = {threads}
[matrix]
scale = [{scale}]
workload = ["{workload}"]
clients = [{clients}]
"""
    return plan.parse(text, "assemble.toml", base=Path(".")).specs[0]


def read_log(
    version: str, the_spec: plan.RunSpec, files: list[Path], tmp_path: Path, sampling: float
) -> LogReading:
    """The log analysis as the runner makes it, on copies of the given files."""
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    return Pgbench(client(version), LocalExecutor()).read_log(the_spec, tmp_path, sampling)


def measured(version: str, case: str, **changes: object) -> MeasuredRun:
    done = recorded(version, case, wall_s=2.1, cpu_s=0.4)
    return replace(MeasuredRun(done, done.argv, STARTED, FINISHED), **changes)  # type: ignore[arg-type]


def test_an_ok_run_takes_pgbenchs_figures_and_the_full_logs_latency(tmp_path: Path) -> None:
    the_spec = spec()
    log = read_log("16", the_spec, golden_log("16", "tpcb"), tmp_path, 1.0)
    result = assemble(
        the_spec, "pgbench (PostgreSQL) 16.2", measured("16", "tpcb-progress", log=log)
    )

    assert result.status == RunStatus.OK and result.error is None
    assert result.tps == pytest.approx(2939.525184)
    assert result.transactions == 5864 and result.failed == 0
    assert result.latency_avg_ms == pytest.approx(0.680)
    assert result.latency_stddev_ms == pytest.approx(1.205)
    assert result.connection_time_ms == pytest.approx(7.726)
    assert result.client_cpu_s == pytest.approx(0.4)
    assert (result.started_at, result.finished_at) == (STARTED, FINISHED)
    assert result.pgbench_version == "pgbench (PostgreSQL) 16.2"
    assert result.latency is not None
    assert result.latency.source == "full log"
    assert result.latency.samples == 120  # every line of the two thread files
    assert tuple(result.latency.percentiles_ms) == STANDARD_PERCENTILES
    values = list(result.latency.percentiles_ms.values())
    assert values == sorted(values) and result.latency.min_ms <= values[0]
    assert values[-1] <= result.latency.max_ms
    # A full log gives the per-second series, numbered from 1 like -P 1.
    assert result.seconds and result.seconds[0].t == 1
    assert sum(s.tps for s in result.seconds) == 120
    assert result.warnings == ()


def test_seconds_come_from_the_progress_lines_without_a_log() -> None:
    result = assemble(spec(), "pgbench (PostgreSQL) 18.6", measured("18", "rate-limit"))

    assert result.status == RunStatus.OK
    assert result.tps == pytest.approx(2155.136760)
    assert result.skipped == 1633 and result.late == 803
    assert result.lag_avg_ms == pytest.approx(0.255) and result.lag_max_ms == pytest.approx(6.829)
    assert [(s.t, s.tps) for s in result.seconds] == [(1, 2164.9), (2, 2132.9)]
    assert [s.skipped for s in result.seconds] == [807, 826]
    assert result.seconds[0].lag_ms == pytest.approx(0.256)
    assert result.latency is None  # no log: no percentiles


def test_a_sampled_log_gives_percentiles_but_leaves_the_series_to_progress_lines(
    tmp_path: Path,
) -> None:
    the_spec = spec("select-only")
    log = read_log("16", the_spec, golden_log("16", "sampling"), tmp_path, 0.01)
    result = assemble(the_spec, "16", measured("16", "everything", log=log))

    assert result.latency is not None
    assert result.latency.source == "sampled log (rate 0.01)"
    assert set(result.latency.percentiles_ms) == set(STANDARD_PERCENTILES)
    assert [s.tps for s in result.seconds] == [583.0, 565.4]  # -P 1, not the sample
    assert [s.failed for s in result.seconds] == [17, 21]


def test_a_non_zero_exit_with_a_report_is_aborted_and_keeps_its_partial_figures() -> None:
    result = assemble(spec(), "15", measured("15", "client-abort-midrun"))

    assert result.status == RunStatus.ABORTED
    assert result.tps == pytest.approx(23064.516129) and result.transactions == 143
    assert result.error is not None and "division by zero" in result.error


def test_no_report_is_a_failure_with_pgbenchs_error() -> None:
    result = assemble(spec(), "15", measured("15", "missing-tables"))

    assert result.status == RunStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("pgbench exited 1 without a report: ")
    assert "pgbench_branches" in result.error
    assert result.tps is None and result.transactions is None and result.latency is None
    assert result.client_cpu_s == pytest.approx(0.4)
    assert (result.started_at, result.finished_at) == (STARTED, FINISHED)


def test_an_interrupted_pgbench_is_an_interrupted_run() -> None:
    done = recorded("16", "tpcb-progress")
    stopped = MeasuredRun(
        replace(done, returncode=130, stdout="", stderr="", interrupted=True),
        done.argv,
        STARTED,
        FINISHED,
    )
    result = assemble(spec(), "16", stopped)

    assert result.status == RunStatus.INTERRUPTED
    assert result.error == "interrupted by the user" and result.tps is None


def test_an_unreadable_log_leaves_the_reports_figures_and_says_so(tmp_path: Path) -> None:
    the_spec = spec()
    broken = tmp_path / "source" / "pgbench_log.4242"
    broken.parent.mkdir()
    broken.write_text("0 1 1123 0 1795340280 388369\nthis is not a pgbench log line\n")
    log = read_log("16", the_spec, [broken], tmp_path, 1.0)
    assert log.error is not None and "pgbench log line" in log.error

    result = assemble(the_spec, "16", measured("16", "tpcb-progress", log=log))

    assert result.status == RunStatus.OK and result.tps == pytest.approx(2939.525184)
    assert result.latency is None
    assert [s.tps for s in result.seconds] == [3171.9]  # from the -P 1 line
    assert [w.code for w in result.warnings] == [WarningCode.LOG_UNREADABLE]
    assert result.warnings[0].text == f"the per-transaction log could not be analysed: {log.error}"


def test_the_runs_checks_become_coded_warnings_with_their_numbers() -> None:
    the_spec = spec(scale=1, clients=4, threads=4)
    done = recorded("16", "tpcb-progress", wall_s=9.0, cpu_s=7.6)  # pgbench ran 2 threads
    hygiene = Hygiene((RunWarning(WarningCode.CHECKPOINT_REFUSED),), 0.2, 0.1)
    result = assemble(
        the_spec, "16", MeasuredRun(done, done.argv, STARTED, FINISHED, hygiene=hygiene)
    )

    by_code = {w.code: w for w in result.warnings}
    assert list(by_code) == [
        WarningCode.CHECKPOINT_REFUSED,
        WarningCode.SCALE_BELOW_CLIENTS,
        WarningCode.THREADS_REDUCED,
        WarningCode.RUN_STALLED,
        WarningCode.PGBENCH_SATURATED,
    ]
    assert (result.vacuum_s, result.checkpoint_s) == (0.2, 0.1)  # the hygiene's timings kept
    assert by_code[WarningCode.SCALE_BELOW_CLIENTS].evidence == {"scale": 1, "clients": 4}
    assert by_code[WarningCode.THREADS_REDUCED].evidence == {"used": 2, "asked": 4}
    assert by_code[WarningCode.PGBENCH_SATURATED].evidence["busy"] == pytest.approx(0.95)
    assert by_code[WarningCode.SCALE_BELOW_CLIENTS].text == (
        "scale 1 < 4 clients on an updating workload: branch-row contention limits TPS; "
        "use scale ≥ clients"
    )
    assert by_code[WarningCode.RUN_STALLED].text == (
        "the run took 9 s for -T 2: transactions stalled (-T is only checked between transactions)"
    )
    assert by_code[WarningCode.PGBENCH_SATURATED].text == (
        "pgbench used 95% of its 4 threads' CPU: the load generator may be the bottleneck; "
        "give it more threads or cores"
    )


def test_a_read_only_workload_with_few_rows_is_not_warned_about() -> None:
    result = assemble(spec("select-only", scale=1, clients=4), "18", measured("18", "select-only"))

    assert result.status == RunStatus.OK and result.tps == pytest.approx(26620.642870)
    assert result.warnings == ()


def test_assembly_is_pure() -> None:
    run = measured("16", "tpcb-progress")
    assert assemble(spec(), "16", run) == assemble(spec(), "16", run)


@pytest.mark.parametrize(
    ("note", "warned"),
    [
        ("the SSH account on host db1 cannot read the server's log /var/log/x.log: …", True),
        (NO_LOG_ACCESS, False),  # an external server without a host: its log is not looked for
        ("", False),
    ],
)
def test_a_server_log_not_read_on_its_host_is_a_warning(note: str, warned: bool) -> None:
    sources = (SourceStatus("server_log", note == "", note),)
    telemetry = RunTelemetry(STARTED, 2.0, None, 0, 0, sources, (), (), (), (), ())
    result = assemble(spec(), "16", measured("16", "tpcb-progress", telemetry=telemetry))
    found = [w for w in result.warnings if w.code == WarningCode.SERVER_LOG_UNREAD]
    assert result.status == RunStatus.OK
    assert [w.evidence["reason"] for w in found] == ([note] if warned else [])
    if warned:
        assert found[0].text.endswith(note)
