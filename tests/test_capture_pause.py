"""Pausing the telemetry sampler (the overhead benchmark switches it second by second): no
query and no counter sample while paused; on resuming, counters wait for a whole second."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from pgbenchlab.server import ManagedServer, postmaster_pid
from pgbenchlab.telemetry.capture import Capture, CaptureConfig
from support import embedded_server

# alone: the sampler's ticks are timed to a fraction of a second
pytestmark = [pytest.mark.server, pytest.mark.alone]


@pytest.fixture
def server() -> Iterator[ManagedServer]:
    with embedded_server("pause") as managed:
        yield managed


def sleep_until(t0: float, t: float) -> None:
    time.sleep(max(0.0, t0 + t - time.monotonic()))


def test_paused_capture_takes_no_samples(server: ManagedServer) -> None:
    config = CaptureConfig(
        server.endpoint, postmaster_pid=postmaster_pid(server.data_dir), activity_hz=2
    )
    capture = Capture(config).start()
    capture.pgbench_started(os.getpid())  # something to watch: this process
    t0 = capture.t0_mono
    sleep_until(t0, 1.25)  # ticks 0.5 and 1.0 sampled
    capture.pause()
    rounds, samples = capture.state.rounds, len(capture.state.samples)
    sleep_until(t0, 2.75)  # ticks 1.5, 2.0 and 2.5 skipped
    assert (capture.state.rounds, len(capture.state.samples)) == (rounds, samples)
    capture.resume()
    sleep_until(t0, 4.25)  # ticks 3.0, 3.5 and 4.0 sampled; counters at 3.0 and 4.0 only
    telemetry = capture.stop()

    assert rounds == 2
    assert telemetry.activity_rounds == 5
    assert [s.t for s in capture.state.samples] == [None, 1, 3, 4]
    cpu_seconds = sorted({p.t for p in telemetry.series if p.source == "cpu"})
    assert cpu_seconds == [1, 3, 4]  # second 3 covers the pause as one interval
