"""What a campaign sets up around a server besides starting it, stored with the campaign: its
cluster's tablespaces (made by `servers`, recorded here), and its one-off preparation
(`[[server]] prepare`): after each start of the server by the campaign (its first, a restart for
another setting variant or after it went down: each empties shared_buffers), before its next
run, pgbench's builtin workload (read-only by default) for the planned time on that run's
dataset; how long it took and its TPS."""

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
from pgbenchlab.plan import Plan, PreparePlan, RunSpec, Script, Workload
from pgbenchlab.server import Endpoint, ManagedServer, Server, client_endpoint, tablespaces
from pgbenchlab.store import Store
from pgbenchlab.store.server_setup import Preparation, record_preparation, record_tablespaces

PHASE = "one-off preparation"


def record_cluster(store: Store, campaign_id: int, plan: Plan, server: Server) -> None:
    """The tablespaces the dataset has in a managed server's cluster."""
    if isinstance(server, ManagedServer) and plan.dataset.tablespaces:
        made = tablespaces.planned(plan.dataset, server.name, server.data_dir)
        record_tablespaces(store, campaign_id, server.name, made)


def prepare_and_record(
    store: Store,
    campaign_id: int,
    pgbench: Pgbench,
    wanted: PreparePlan,
    server: Server,
    endpoint: Endpoint,
    spec: RunSpec,
    cwd: Path,
    on_progress: Callable[[ProgressLine], None],
) -> None:
    done = prepare_server(pgbench, wanted, server, endpoint, spec, cwd, on_progress)
    record_preparation(store, campaign_id, done)


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
