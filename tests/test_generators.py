"""A run split across load generators: the split, each one's argv, the summed report and the
diagnosis that names a saturated generator (pure parts; the real run is in
test_remote_campaign.py and test_remote_generators.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab.analysis.diagnosis import Bottleneck, Diagnosis, with_saturated_generators
from pgbenchlab.campaign.assemble import progress_seconds
from pgbenchlab.campaign.executor import GeneratorExecutor, log_layout
from pgbenchlab.campaign.generator_processes import CpuWatch, Started, run_all
from pgbenchlab.campaign.generators import (
    WAIT_AND_EXEC,
    Part,
    argv_duration,
    argv_figures,
    common_window,
    share_argv,
    split,
)
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.invocation.command import Call, Completed, Share, execute
from pgbenchlab.invocation.shares import sum_reports, total_report
from pgbenchlab.pgbench.report import parse_report

GOLDEN = Path(__file__).parent / "golden" / "pgbench" / "16"


def test_clients_threads_and_rate_split_with_the_remainder_first() -> None:
    three = [2, 2, 2]
    assert split(7, 4, 70.0, three) == [Part(3, 2, 30.0), Part(2, 1, 20.0), Part(2, 1, 20.0)]
    assert split(7, 4, 70.0, [8] * 3) == split(7, 4, 70.0, three)
    assert split(2, 8, None, [2, 2]) == [Part(1, 1, None), Part(1, 1, None)]  # threads ≤ clients
    assert split(3, 1, None, [2, 2]) == [Part(2, 1, None), Part(1, 1, None)]  # a thread each


def test_threads_go_where_the_cpus_are() -> None:
    # threads = "auto" over a 2-CPU and an 8-CPU generator, 4 clients each: 2 + 4 threads,
    # each its own; any other number in proportion to what each can use.
    assert split(8, 6, None, [2, 8]) == [Part(4, 2, None), Part(4, 4, None)]
    assert split(8, 3, None, [2, 8]) == [Part(4, 1, None), Part(4, 2, None)]


def test_each_generator_gets_its_share_seed_and_log_prefix() -> None:
    argv = ["pgbench", "-n", "-c", "5", "-j", "2", "-M", "simple", "-T", "2", "-P", "1"]
    argv += ["-D", "x=-c", "-R", "100", "-l", "--log-prefix=/r/a/pgbench_log", "bench"]
    assert argv_figures(argv) == (5, 2, 100.0)
    out = share_argv(argv, Part(2, 1, 40.0), 17, "lg2")
    assert out[:6] == ["pgbench", "-n", "-c", "2", "-j", "1"]
    assert out[out.index("-D") + 1] == "x=-c" and out[out.index("-R") + 1] == "40"
    assert out[-3:] == ["--log-prefix=/r/a/pgbench_log.lg2", "--random-seed=17", "bench"]


def test_each_generator_is_given_exactly_its_share_of_the_rate() -> None:
    argv = ["pgbench", "-c", "3", "-j", "1", "-T", "2", "-R", "500", "bench"]
    parts = split(*argv_figures(argv), [2, 2])
    given = [float(share_argv(argv, p, 1, "lg")[8]) for p in parts]
    assert given == [p.rate for p in parts] == [500 * 2 / 3, 500 / 3]  # not 333.333, 166.667
    assert share_argv(argv, Part(1, 1, 40.0), 1, "lg")[8] == "40"


def test_custom_scripts_go_into_the_run_directory_on_the_generator(tmp_path: Path) -> None:
    here, there = tmp_path / "run", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (tmp_path / "a@b.sql").write_text("SELECT 1;\n")
    argv = ["pgbench", "-b", "select-only@1", "-f", f"{tmp_path}/a@b.sql@3", "-D", "x=-f", "db"]
    shipped = GeneratorExecutor(LOCAL_HOST)._shipped_scripts(argv, here, there)
    assert shipped == [*argv[:4], f"{there}/script-4-a@b.sql@3", *argv[5:]]
    assert (there / "script-4-a@b.sql").read_text() == "SELECT 1;\n"


def test_each_generators_run_queue_wait_is_read_while_it_runs() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    running, ended, waiting = Started(None), Started(None), Started(None)
    for started, pid in ((running, os.getpid()), (ended, child.pid), (waiting, 1)):
        started.spawned(pid)
    running.mark(0.0)
    ended.mark(0.0)  # waiting: its wrapper has not exec'd pgbench yet
    watch = CpuWatch([running, ended, waiting])
    watch.read()
    time.sleep(0.01)
    watch.read()
    before = watch.last[1]
    child.kill()
    child.wait()
    watch.read()  # the child has gone: its last reading stands
    assert watch.last[1] == before
    rates = [watch.wait_per_s(i) for i in range(3)]
    assert rates[0] is not None and rates[1] is not None and rates[0] >= 0 and rates[1] >= 0
    assert rates[2] is None and watch.first[2] is None


def _share(host: str, stdout: str, started: float | None) -> Share:
    done = Completed(("pgbench",), 0, stdout, "", 2.0, 0.5, False)
    return Share(host, 1, 1, None, 1, 2, 0.0, started, done)


def test_the_report_is_the_sum_of_the_generators() -> None:
    text = (GOLDEN / "rate-limit.stdout").read_text()
    one = parse_report(text)
    both = total_report(
        Completed(("pgbench",), 0, "", "", 2.0, 1.0, False, (_share("a", text, 1.0),) * 2)
    )
    assert both.tps == pytest.approx(2 * (one.tps or 0))
    assert (both.transactions, both.clients) == (2 * one.transactions, 2 * one.clients)
    assert both.latency_avg_ms == pytest.approx(one.latency_avg_ms)
    assert (both.skipped, both.late, both.lag_max_ms) == (2 * 2267, 2 * 1013, one.lag_max_ms)
    assert both.skipped_pct == pytest.approx(one.skipped_pct, abs=1e-3)
    assert sum_reports([one]).latency_stddev_ms == pytest.approx(one.latency_stddev_ms)


def test_the_progress_series_is_summed_over_the_seconds_all_reported() -> None:
    def progress(*lines: str) -> Share:
        share = _share("x", "", 1.0)
        return replace(share, completed=replace(share.completed, stderr="".join(lines)))

    first = progress(
        "progress: 1.0 s, 300.0 tps, lat 1.000 ms stddev 0.1, 0 failed\n",
        "progress: 2.0 s, 100.0 tps, lat 3.000 ms stddev 0.1, 0 failed\n",
    )
    second = progress("progress: 1.0 s, 100.0 tps, lat 5.000 ms stddev 0.1, 2 failed\n")
    done = Completed(("pgbench",), 0, "", "", 2.0, 1.0, False, (first, second))
    (only,) = progress_seconds(done)
    assert (only.t, only.tps, only.failed) == (1, 400.0, 2)
    assert only.latency_mean_ms == pytest.approx(2.0)  # weighted by each one's TPS


def test_the_common_window_is_where_all_were_measuring() -> None:
    shares = (_share("a", "", 100.0), _share("b", "", 100.25))
    assert common_window(shares, 2) == (100.25, 102.0)
    assert common_window(shares, None) is None
    assert common_window((_share("a", "", None),), 2) is None


def test_a_saturated_generator_is_named_in_the_diagnosis() -> None:
    io = Diagnosis(Bottleneck.IO_BOUND, ("disk busy",), {"also": []})
    named = with_saturated_generators(io, [("lg1", 0.5, 2), ("lg2", 0.97, 1)])
    assert named is not None and named.verdict == Bottleneck.CLIENT_BOUND
    assert named.evidence == (
        "load generator lg2 wanted 97% of its 1 usable CPU(s) (on a CPU or waiting for one)",
    )
    assert named.details["also"] == ["io_bound"]
    assert with_saturated_generators(io, [("lg1", 0.5, 2)]) is io
    alone = with_saturated_generators(None, [("lg1", 0.95, 2)])
    assert alone is not None and alone.verdict == Bottleneck.CLIENT_BOUND


def test_a_generators_log_reduction_follows_pgbenchs_argv() -> None:
    plain = ["pgbench", "-c", "4", "-T", "30", "--max-tries=1", "db"]
    assert argv_duration(plain) == 30 and argv_duration(["pgbench", "-t", "9", "db"]) is None
    layout = log_layout(plain, (10.0, 40.0), -0.0015)
    assert (layout.rate_limited, layout.has_retries, layout.shift_us) == (False, False, -1500)
    paced = log_layout(["pgbench", "-R", "100", "--max-tries=3", "db"], None, 0.0)
    assert (paced.rate_limited, paced.has_retries, paced.columns) == (True, True, 8)


def test_ctrl_c_ends_the_start_wrapper_at_once_whatever_it_was_doing() -> None:
    """The wrapper that waits for a share's start instant ends by the signal itself, as the
    pgbench it becomes would: no Python handler that could catch a Ctrl-C and lose it in exec."""
    argv = [sys.executable, "-c", WAIT_AND_EXEC, f"{time.time() + 30:.6f}", "sleep", "30"]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as waiting:
        time.sleep(0.5)  # well into its wait
        waiting.send_signal(signal.SIGINT)
        _, stderr = waiting.communicate(timeout=5)
    assert waiting.returncode == -signal.SIGINT and "KeyboardInterrupt" not in stderr


class _CtrlCAfterTheFirst(list[Callable[[], Completed]]):
    """Jobs whose iteration is cut short by a Ctrl-C once the first has been started: the
    interruption that comes while the main thread is still starting the shares."""

    def __iter__(self) -> Iterator[Callable[[], Completed]]:
        yield self[0]
        raise KeyboardInterrupt


def test_ctrl_c_while_the_shares_are_still_being_started_stops_those_started() -> None:
    """The first share's process (a real one, started from its own thread) is asked to stop,
    even though its start was not yet known when the Ctrl-C came; the second never starts;
    both outcomes are interrupted."""
    starts = [Started(None), Started(None)]
    argvs = [("sleep", "30"), ("sleep", "31")]

    def job(i: int) -> Callable[[], Completed]:
        call = Call(argvs[i], {}, Path("/"), None, None, starts[i].spawned)
        return lambda: execute(call)

    began = time.monotonic()
    done = run_all(_CtrlCAfterTheFirst([job(0), job(1)]), starts, argvs)
    assert time.monotonic() - began < 10  # the first's sleep did not run its 30 s
    assert [d.interrupted for d in done] == [True, True]
    assert done[0].returncode == -signal.SIGINT and starts[0].pid is not None
    assert done[1] == Completed(argvs[1], 0, "", "", 0.0, 0.0, interrupted=True)
    assert starts[1].pid is None  # never started
