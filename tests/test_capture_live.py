"""Each second's telemetry handed on as the sampler takes it (`CaptureConfig.on_sample`, what
`run --metrics` serves): the same figures the run then stores for that second."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import pytest

from pgbenchlab.records.telemetry import Point
from pgbenchlab.server import postmaster_pid
from pgbenchlab.telemetry.capture import Capture, CaptureConfig
from support import embedded_server

# alone: the sampler's ticks are timed to a fraction of a second
pytestmark = [pytest.mark.server, pytest.mark.alone]


def test_each_second_is_told_as_it_is_sampled_and_is_what_is_stored() -> None:
    told: list[tuple[float, str, list[Point]]] = []

    def sampled(points: Sequence[Point]) -> None:
        told.append((time.monotonic(), threading.current_thread().name, list(points)))

    with embedded_server("live") as server:
        config = CaptureConfig(
            server.endpoint, postmaster_pid=postmaster_pid(server.data_dir), on_sample=sampled
        )
        capture = Capture(config).start()
        capture.pgbench_started(os.getpid())
        with server.endpoint.connect() as conn:  # commits for the counters to count
            deadline = capture.t0_mono + 3.3
            while time.monotonic() < deadline:
                conn.execute("SELECT 1")
                conn.commit()
                time.sleep(0.01)
        stopped = time.monotonic()
        telemetry = capture.stop()

    seconds = [points[0].t for _, _, points in told]
    assert seconds[:3] == [1, 2, 3] and seconds == list(range(1, len(told) + 1))
    assert all(thread == "telemetry" and at < stopped for at, thread, _ in told)
    for _, _, points in told:
        live = {(p.source, p.metric): p.value for p in points}
        stored = {
            (p.source, p.metric): p.value
            for p in telemetry.series
            if p.t == points[0].t and p.source != "pg_stat_activity"  # waits: stored only
        }
        assert stored and stored.items() <= live.items()
        unchanged = {(t.source, t.metric) for t in telemetry.totals if t.value == 0}
        assert set(live) - set(stored) <= unchanged, "live figures the run did not store"
    commits = [p.value for _, _, ps in told for p in ps if p.metric == "xact_commit"]
    assert len(commits) == len(told) and sum(commits) > 30, "this test's commits, live"
