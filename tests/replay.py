"""Replaying recorded pgbench runs through a campaign's executor seam, for tests without
PostgreSQL.

`recorded` turns a golden capture (tests/golden/pgbench/<version>/<case>.*) into what
`invocation.command.execute` returns; `ReplayExecutor` hands those out in order instead of running
pgbench, and writes a golden per-transaction log (tests/golden/logs/) where pgbench would have.
`StandInServer` and `StandInServers` replace the server side: an external-server-like object
with fixed facts that starts nothing. They exist only for orchestration tests; the real server
code keeps its real-server tests.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgbenchlab import dataset, findings
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.diagnosing import Evidence
from pgbenchlab.findings import RunWarning
from pgbenchlab.installs import Installation
from pgbenchlab.invocation.command import Call, Completed
from pgbenchlab.plan import DatasetOptions, Plan, RunSpec
from pgbenchlab.records.telemetry import Point, RunTelemetry
from pgbenchlab.records.version import parse_version
from pgbenchlab.server import Endpoint, Server, ServerFacts
from pgbenchlab.store import Store

GOLDEN = Path(__file__).parent / "golden"


def recorded(version: str, case: str, *, wall_s: float = 2.0, cpu_s: float = 0.2) -> Completed:
    """A golden capture as `command.execute` returns it (CPU and wall time were not recorded:
    they are given)."""
    base = GOLDEN / "pgbench" / version / case
    return Completed(
        argv=tuple(json.loads(base.with_suffix(".argv").read_text())),
        returncode=int(base.with_suffix(".exit").read_text()),
        stdout=base.with_suffix(".stdout").read_text(),
        stderr=base.with_suffix(".stderr").read_text(),
        wall_s=wall_s,
        cpu_s=cpu_s,
        interrupted=False,
    )


def golden_log(major: str, case: str) -> list[Path]:
    """A golden per-transaction log's files (one per pgbench thread)."""
    return sorted((GOLDEN / "logs" / major / case).glob("pgbench_log.*"))


def client(version: str) -> PgbenchClient:
    """The pgbench a capture came from, as a campaign sees it (the binary is never run)."""
    text = (GOLDEN / "pgbench" / version / "version.txt").read_text().strip()
    parsed = parse_version(text)
    install = Installation("path", Path("/nonexistent/bin"), parsed, False, True)
    return PgbenchClient(install, parsed, text)


@dataclass(frozen=True)
class Replay:
    """One pgbench call: a recorded output, the log it wrote, or a Ctrl-C while it ran."""

    output: Completed
    log: tuple[Path, ...] = ()
    interrupt: bool = False  # SIGINT arrives while pgbench runs


class StandInServer:
    """An external-server-like object with fixed facts: it starts, stops and connects to
    nothing. For orchestration tests only."""

    managed = False
    init_allowed = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.endpoint = Endpoint("/nonexistent/socket", 5432, "bench", "bench")
        self.starts = 0

    def client_endpoint(self, connection: str) -> Endpoint:
        return self.endpoint

    def prepare(self) -> None:
        self.starts += 1

    def restart(self) -> None:
        self.starts += 1

    def stop(self) -> None:
        pass

    def is_alive(self) -> bool:
        return True

    def facts(self) -> ServerFacts:
        return ServerFacts(self.name, "external", "16.2", 160002, {}, {}, None, None)

    def log_tail(self, lines: int = 20) -> list[str]:
        return []

    def log_problems(self, lines: int = 3) -> list[str]:
        return []


class StandInServers:
    """A campaign's server pool of stand-ins, one per plan server."""

    def __init__(self, plan: Plan) -> None:
        self.servers = {s.name: StandInServer(s.name) for s in plan.servers}
        self.claimed = False

    def claim(self) -> None:
        self.claimed = True

    def release(self) -> None:
        self.claimed = False

    def get(self, spec: RunSpec) -> tuple[Server, bool]:
        server = self.servers[spec.server]
        started = server.starts == 0
        if started:
            server.prepare()
        return server, started

    def stop_all(self) -> list[str]:
        return []


class NoCapture:
    def start(self) -> object:
        return self

    def pgbench_started(self, pid: int) -> None:
        pass

    def stop(self, pgbench_cpu_s: float | None = None) -> RunTelemetry | None:
        return None


class NoTelemetry:
    def capture(
        self,
        server: Server,
        endpoint: Endpoint,
        threads: int | None,
        on_phase: Callable[[str], None] | None = None,
        on_sample: Callable[[Sequence[Point]], None] | None = None,
    ) -> NoCapture:
        return NoCapture()

    def evidence(self, server: str) -> Evidence:
        return Evidence()

    def profiler(
        self, server: Server, label: str, work_dir: Path, pgbench: Installation | None = None
    ) -> None:
        return None


@dataclass
class ReplayExecutor:
    """Hands out recorded pgbench runs in order; datasets and hygiene do nothing (a refused
    CHECKPOINT when asked); `fail_dataset` names scales whose preparation fails; each pgbench
    call lasts `run_s`."""

    replays: list[Replay]
    refuse_checkpoint: bool = False
    fail_dataset: set[int] = field(default_factory=set)
    argvs: list[list[str]] = field(default_factory=list)
    run_s: float = 0.0

    def pgbench(self, call: Call) -> Completed:
        argv = list(call.argv)
        self.argvs.append(argv)
        replay = self.replays.pop(0)
        time.sleep(self.run_s)
        if call.on_start is not None:
            call.on_start(os.getpid())
        for log in replay.log:
            shutil.copy(log, Path(call.cwd) / log.name)
        try:
            if replay.interrupt:  # as a terminal's Ctrl-C reaches the campaign
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler's KeyboardInterrupt ends the wait at once
            for line in replay.output.stderr.splitlines():
                if call.on_stderr_line is not None:
                    call.on_stderr_line(line)
        except KeyboardInterrupt:  # pgbench stopped early, as command.execute reports it
            return Completed(tuple(argv), 130, "", "", 0.5, 0.1, True)
        out = replay.output
        return Completed(
            tuple(argv), out.returncode, out.stdout, out.stderr, out.wall_s, out.cpu_s, False
        )

    def prepare_dataset(
        self,
        server: Server,
        scale: int,
        *,
        pgbench: Path,
        work_dir: Path,
        force: bool,
        options: DatasetOptions = dataset.DEFAULTS,
    ) -> dataset.Prepared:
        if scale in self.fail_dataset:
            raise RuntimeError(f"pgbench -i -s {scale} failed (replayed)")
        return dataset.Prepared(server.endpoint.with_dbname(f"pgbench_s{scale}"), 0.5)

    def vacuum(self, endpoint: Endpoint, mode: str) -> None:
        pass

    def checkpoint(self, endpoint: Endpoint) -> RunWarning | None:
        return findings.checkpoint_refused() if self.refuse_checkpoint else None

    def telemetry(self, store: Store, campaign_id: int, *, fsync_test: bool) -> NoTelemetry:
        return NoTelemetry()
