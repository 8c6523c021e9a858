"""The progress displays, fed the Reporter events of a small campaign (no server): the live
one drawn on rich's recording console at a fixed width, the plain one line for line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from pgbenchlab import plan
from pgbenchlab.cli.live import LiveReporter
from pgbenchlab.cli.progress import CampaignEta, JsonReporter, TerminalReporter, interactive
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.results import FAILED, LatencySummary, RunResult, RunStatus

PLAN = """
[campaign]
name = "shown"
[defaults]
duration = "10s"
warmup = "2s"
[[server]]
name = "pg"
install = "embedded"
[matrix]
scale = [10]
clients = [1, 4]
"""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def specs() -> tuple[plan.Plan, list[plan.RunSpec]]:
    the_plan = plan.parse(PLAN, "shown.toml", base=Path())
    return the_plan, list(the_plan.specs)


def finished(spec: plan.RunSpec, tps: float | None, status: RunStatus = RunStatus.OK) -> RunResult:
    latency = LatencySummary(
        source="full log",
        samples=1000,
        percentiles_ms={"50": 0.5, "99": 2.25},
        min_ms=0.1,
        max_ms=9.0,
        mean_ms=0.6,
        stddev_ms=0.2,
        histogram_json="{}",
    )
    return RunResult(
        run_key=spec.run_key,
        cell_id=spec.cell_id,
        sequence=spec.sequence,
        repeat=spec.repeat,
        status=status,
        spec=spec.cell,
        argv=(),
        started_at=0.0,
        finished_at=0.0,
        pgbench_version="pgbench (PostgreSQL) 18.1",
        error=None if tps else "pgbench: connection refused\nmore detail",
        tps=tps,
        latency=latency if tps else None,
    )


def progress(elapsed: float, tps: float) -> ProgressLine:
    return ProgressLine(elapsed_s=elapsed, tps=tps, latency_avg_ms=0.25, latency_stddev_ms=0.1)


def test_live_display_shows_campaign_eta_and_the_current_run() -> None:
    console = Console(width=110, record=True, force_terminal=True, color_system=None)
    clock = FakeClock()
    live = LiveReporter(console, clock)
    the_plan, todo = specs()
    live.campaign_started(the_plan, todo, 0)
    live.run_started(todo[0], 1, 2)
    live.phase(todo[0], "warmup")
    clock.now += 2
    live.phase(todo[0], "measuring")
    clock.now += 4
    live.progress(todo[0], progress(4.0, 12345.6))
    console.print(live.render())
    drawn = console.export_text()
    assert "campaign shown: 2 runs to do" in drawn
    assert "campaign shown" in drawn and "0/2 runs  elapsed 6 s  ETA 21 s" in drawn
    assert "run 1/2 pg s=10 select-only c=1 prepared #1  measuring  6 s/14 s" in drawn
    assert "12,346 tps  lat 0.250 ms" in drawn

    clock.now += 7  # the first run took 13 s of the 13.5 s expected
    live.run_finished(todo[0], finished(todo[0], 12000.4))
    live.run_started(todo[1], 2, 2)
    live.phase(todo[1], "server")
    console.print(live.render())
    drawn = console.export_text()
    assert "[1/2 ETA 13 s] pg s=10 select-only c=1 prepared #1: 12,000 tps, p99 2.250 ms" in drawn
    assert "1/2 runs  elapsed 13 s  ETA 13 s" in drawn
    assert drawn.rstrip().endswith("run 2/2 pg s=10 select-only c=4 prepared #1  server  0 s/14 s")


def test_live_display_prints_failures_and_notes_as_plain_lines() -> None:
    console = Console(width=110, record=True, force_terminal=True, color_system=None)
    live = LiveReporter(console, FakeClock())
    the_plan, todo = specs()
    live.campaign_started(the_plan, todo, 3)
    live.run_started(todo[0], 1, 2)
    live.run_finished(todo[0], finished(todo[0], None, FAILED))
    live.note("restarted server pg after a failed run [not markup]")
    drawn = console.export_text()
    assert "campaign shown: 2 runs to do, 3 already done" in drawn
    assert "pg s=10 select-only c=1 prepared #1: FAILED: pgbench: connection refused\n" in drawn
    assert "restarted server pg after a failed run [not markup]" in drawn
    console.print(live.render())
    assert "run 1/2" not in console.export_text(), "no run under way after it finished"


def test_nothing_is_drawn_before_the_campaign_starts() -> None:
    console = Console(width=80, record=True, force_terminal=True, color_system=None)
    console.print(LiveReporter(console, FakeClock()).render())
    assert console.export_text().strip() == ""


def test_plain_lines_are_unchanged_on_a_pipe() -> None:
    stream = io.StringIO()
    plain = TerminalReporter(stream, quiet=False)
    the_plan, todo = specs()
    plain.campaign_started(the_plan, todo, 0)
    for index, spec in enumerate(todo, 1):
        plain.run_started(spec, index, len(todo))
        plain.phase(spec, "measuring")
        plain.progress(spec, progress(1.0, 100.0))
        plain.run_finished(spec, finished(spec, 100.0 * index))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "campaign shown: 2 runs to do"
    assert lines[1].startswith("[1/2 ETA ")
    assert lines[1].endswith("] pg s=10 select-only c=1 prepared #1: 100 tps, p99 2.250 ms")
    assert lines[2] == "[2/2 ETA 0 s] pg s=10 select-only c=4 prepared #1: 200 tps, p99 2.250 ms"
    assert len(lines) == 3, "no live line on a pipe"


def test_eta_scales_the_rest_by_the_pace_so_far() -> None:
    clock = FakeClock()
    eta = CampaignEta(clock)
    _, todo = specs()
    eta.start(todo)  # 2 runs of 10 + 2 + 1.5 s
    assert eta.remaining() == 27.0
    assert eta.remaining(in_flight=5.0) == 22.0
    clock.now += 27.0  # the first run took twice as long as expected
    eta.run_done(todo[0])
    assert eta.remaining() == 27.0
    assert eta.remaining(in_flight=5.0) == 17.0, "the rest of the run under way, at that pace"
    assert eta.fraction_done() == 0.5


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "env", "live"),
    [
        (True, {}, True),
        (False, {}, False),
        (True, {"CI": "true"}, False),
        (True, {"CI": "false"}, True),
        (True, {"TERM": "dumb"}, False),
    ],
)
def test_live_only_for_a_person_at_a_terminal(
    tty: bool, env: dict[str, str], live: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert interactive(Stream(tty)) is live


def test_json_events_carry_the_cell_and_status_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`run --json`: a run's cell is its stored JSON, its status the status's name."""
    _, (spec, *_) = specs()
    reporter = JsonReporter()
    reporter.run_started(spec, 1, 1)
    reporter.run_finished(spec, finished(spec, None, RunStatus.FAILED))
    started, done = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert started["cell"] == spec.cell.stored() and started["cell"]["server"] == spec.server
    assert done["status"] == "failed"
