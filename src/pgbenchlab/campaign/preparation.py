"""A server's one-off preparation (`[[server]] prepare`): after each start of the server by the
campaign (its first, a restart for another setting variant or after it went down: each empties
shared_buffers), before its next run, pgbench's builtin workload (read-only by default) for the
planned time on that run's dataset; how long it took and its TPS are stored with the campaign."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pgbenchlab.campaign.measure import Pgbench
from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.invocation.command import Invocation
from pgbenchlab.invocation.shares import total_report
from pgbenchlab.pgbench.progress import ProgressLine, error_summary
from pgbenchlab.plan import PreparePlan, RunSpec, Script, Workload
from pgbenchlab.server import Endpoint, Server, client_endpoint
from pgbenchlab.store.server_setup import Preparation

PHASE = "one-off preparation"


def prepare_server(
    pgbench: Pgbench,
    wanted: PreparePlan,
    server: Server,
    endpoint: Endpoint,
    spec: RunSpec,
    cwd: Path,
    on_progress: Callable[[ProgressLine], None],
) -> Preparation:
    """The preparation run on endpoint's dataset (spec: the run it precedes); raises when
    pgbench failed, so that the run fails and the next one prepares again."""
    workload = Workload(wanted.workload, (Script("builtin", wanted.workload),))
    options = replace(
        spec.options,
        duration_s=wanted.duration_s,
        transactions=None,
        warmup_s=0,
        threads=min(wanted.clients, os.cpu_count() or 1),
        rate=None,
        latency_limit_ms=None,
        connect=False,
        max_tries=1,
    )
    run = Invocation(workload, spec.scale, wanted.clients, options, wanted.duration_s)
    started, clock = time.time(), time.monotonic()
    done = pgbench.run(client_endpoint(server, endpoint), run, cwd, on_progress)
    if done.interrupted:
        raise KeyboardInterrupt
    if done.returncode != 0:
        raise RuntimeError(
            f"the preparation of server {server.name} failed: pgbench exited "
            f"{done.returncode}: {error_summary(done.stderr)}"
        )
    try:
        tps: float | None = total_report(done).tps
    except PgbenchParseError:
        tps = None
    seconds = time.monotonic() - clock
    return Preparation(
        server.name,
        started,
        wanted.workload,
        wanted.clients,
        spec.scale,
        wanted.duration_s,
        seconds,
        tps,
    )
