"""Helpers shared by tests: the tiny real campaign plan, a quiet reporter, skips."""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ci_guard
from pgbenchlab import installs, osuser, plan
from pgbenchlab.campaign import RESULTS_DB, Outcome, run_campaign
from pgbenchlab.errors import InstallError
from pgbenchlab.installs import Installation
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.plan import Plan, RunSpec
from pgbenchlab.records.telemetry import Point
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.server import ManagedServer
from pgbenchlab.store import RunRecord, Store

# Two embedded servers, one without index scans: select-only reads the whole accounts table
# there, some fifty times slower at scale 1, a change far beyond this host's noise.
INDEX_AGAINST_SEQSCAN = """[[server]]
name = "index"
install = "embedded"
[[server]]
name = "seqscan"
install = "embedded"
settings = { enable_indexscan = "off", enable_bitmapscan = "off", enable_indexonlyscan = "off" }
"""

EMBEDDED_PG = """[[server]]
name = "pg"
install = "embedded"
"""


def one_cell_plan(
    name: str,
    *,
    campaign: str = "",
    defaults: str = "",
    servers: str = EMBEDDED_PG,
    tables: str = "",
) -> str:
    """A plan of one select-only cell (scale 1, 1 client) without warmup, for the real tests
    that measure an effect rather than a workload: ``campaign`` and ``defaults`` are more lines
    of those tables, ``servers`` its [[server]] (and [build.*]) tables, ``tables`` what follows
    its [matrix] (a [matrix.sysctl] or [matrix.sysfs])."""
    return f"""
[campaign]
name = "{name}"
{campaign}[defaults]
warmup = "0s"
{defaults}{servers}[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
{tables}"""


def base_and_patched(patched: str, patch: Path, configure: str) -> str:
    """The [build.*] and [[server]] tables of a patch measured against its base: Debian's
    PostgreSQL 13 built with ``configure`` (server "base") and with ``patch`` on top (server
    ``patched``), each with 32MB of shared buffers."""
    return f"""[build.pg13]
source = "debian:postgresql-13"
configure = {configure}
[build.pg13-{patched}]
from = "pg13"
patches = ["{patch}"]
[[server]]
name = "base"
install = {{ build = "pg13" }}
settings = {{ shared_buffers = "32MB" }}
[[server]]
name = "{patched}"
install = {{ build = "pg13-{patched}" }}
settings = {{ shared_buffers = "32MB" }}
"""


def run_errors(outcome: Outcome) -> list[str]:
    """What each run that did not complete said: an assertion on `outcome.failed` shows why."""
    return [f"{r.run_key}: {r.status}: {r.error}" for r in outcome.results if r.error]


def decided_runs(text: str, tmp_path: Path, results: Path) -> list[RunRecord]:
    """A `repeats = "auto"` campaign of one answer run for real, checked to have decided it;
    its ok runs."""
    require_installs("embedded")
    outcome = run_campaign(plan.parse(text, "p.toml", base=tmp_path), results, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    assert outcome.answers == ["repeats auto: 1 of 1 answer(s) decided; every answer decided"]
    with Store(results / RESULTS_DB) as store:
        return [r for r in store.run_records(outcome.campaign_id) if r.status == RunStatus.OK]


TINY_TWO_VERSIONS = """
[campaign]
name = "tiny"
repeats = 2

[defaults]
duration = "2s"
warmup = "1s"

[[server]]
name = "pg15"
install = "15"
settings = { shared_buffers = "64MB" }

[[server]]
name = "pg18"
install = "embedded"
settings = { shared_buffers = "96MB" }

[matrix]
scale = [1, 2]
# select-only runs fast enough for "auto" to sample its log (its rate set by the warmup's TPS);
# tpcb-like logs every transaction, so it needs no warmup. Two of each axis: every chart and
# comparison has a line and a pair, in 32 runs.
workload = ["select-only", { builtin = "tpcb-like", latency_log = "full", warmup = "0s" }]
clients = [1, 4]
"""


class QuietReporter:
    """Collects runner events instead of printing them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None:
        self.events.append(("campaign", (len(todo), done)))

    def run_started(self, spec: RunSpec, index: int, total: int) -> None:
        self.events.append(("run", spec.run_key))

    def phase(self, spec: RunSpec, text: str) -> None:
        self.events.append(("phase", text))

    def progress(self, spec: RunSpec, line: ProgressLine) -> None:
        self.events.append(("progress", line))

    def sampled(self, spec: RunSpec, server: str, points: Sequence[Point]) -> None:
        pass  # a second of telemetry: the tests read the run's stored telemetry instead

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        self.events.append(("finished", result.status))

    def note(self, text: str) -> None:
        self.events.append(("note", text))


def require_installs(*specs: str) -> None:
    """Skip (fail under CI) when an installation is missing; the caller starts real servers."""
    ci_guard.require_server_mark()
    found = installs.discover()
    for spec in specs:
        try:
            installs.resolve(spec, found)
        except InstallError:
            pytest.skip(f"PostgreSQL {spec} is not installed here: real-server test NOT run")


@contextmanager
def managed_server(
    name: str, install: Installation, settings: dict[str, str] | None = None, *, tls: bool = False
) -> Iterator[ManagedServer]:
    """A started managed server of install, in a directory of its own the server account
    reaches, removed afterwards."""
    account = osuser.server_account()
    home = account.make_dir(Path(tempfile.mkdtemp(prefix=f"pgbl-{name}-", dir="/var/tmp")), 0o755)
    server = ManagedServer(name, install, home / "data", account, settings or {}, tls=tls)
    server.prepare()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def embedded_server(name: str) -> Iterator[ManagedServer]:
    """A started managed server of the embedded PostgreSQL, removed afterwards."""
    require_installs("embedded")
    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve("embedded", installs.discover()), account)
    with managed_server(name, install) as server:
        yield server


@dataclass(frozen=True)
class Campaign:
    results_dir: Path
    plan: Plan
    outcome: Outcome
    reporter: QuietReporter


def case_id(path: Path) -> str:
    """A golden file's test id: its directory and name."""
    return f"{path.parent.name}/{path.stem}"


def plain(value: Any) -> Any:
    """JSON-like form in which NaN equals NaN, so parsed results compare with ==."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def embedded_data(page: str) -> dict[str, Any]:
    """The data block of an HTML report."""
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def process_stats() -> dict[int, list[str]]:
    """Every process's /proc/PID/stat fields after its name (state, ppid, pgrp, ...)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        found[int(entry.name)] = text[text.rfind(")") + 2 :].split()
    return found


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    return [
        pid
        for pid, fields in process_stats().items()
        if int(fields[2]) == pgid and fields[0] != "Z"
    ]


def descendants(pid: int) -> list[int]:
    """The live processes below pid (children, their children, ...)."""
    stats = process_stats()
    below, found = {pid}, []
    grew = True
    while grew:
        grew = False
        for child, fields in stats.items():
            if int(fields[1]) in below and child not in below and fields[0] != "Z":
                below.add(child)
                found.append(child)
                grew = True
    return found
