"""Campaign progress as plain lines (pipes, CI, `--quiet`) or JSON lines (`--json`), the
campaign's ETA both displays share, and the choice of display (the live one is in `live`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from pgbenchlab import jsontext, plan
from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.durations import duration_text
from pgbenchlab.errors import first_line
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.records.telemetry import Point
from pgbenchlab.results import FAILED, RunResult, RunStatus

Clock = Callable[[], float]


def run_seconds(spec: plan.RunSpec) -> float:
    """A run's expected wall time: as `Plan.estimated_seconds` counts it."""
    return (spec.options.duration_s or 10) + spec.options.warmup_s + 1.5


def in_flight(spec: plan.RunSpec, started_at: float, now: float) -> float:
    """Seconds into the run under way, at most what it should take (a live ETA counts down
    within a run)."""
    return min(now - started_at, run_seconds(spec))


class CampaignEta:
    """The time left: the expected seconds of the runs not done yet, scaled by how the runs
    done so far compared with their own expectation."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.expected = 0.0
        self.spent_expected = 0.0

    def start(self, todo: list[plan.RunSpec]) -> None:
        self.expected = sum(run_seconds(s) for s in todo)

    def run_done(self, spec: plan.RunSpec) -> None:
        self.spent_expected += run_seconds(spec)

    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining(self, in_flight: float = 0.0) -> float:
        """`in_flight`: expected seconds of the run under way already spent, so that a live
        display counts down within a run (the plain lines are printed between runs, at 0)."""
        left = max(0.0, self.expected - self.spent_expected - in_flight)
        rate = self.elapsed() / self.spent_expected if self.spent_expected else 1.0
        return left * rate

    def fraction_done(self, in_flight: float = 0.0) -> float:
        if not self.expected:
            return 0.0
        return min(1.0, (self.spent_expected + in_flight) / self.expected)


def finished_text(result: RunResult) -> str:
    """A finished run in a few words: TPS, p99, what limited it; or why it failed."""
    if result.status == FAILED or result.tps is None:
        return f"{result.status.upper()}: {first_line(result.error)}"
    p99 = result.latency.percentiles_ms.get("99") if result.latency else None
    text = f"{result.tps:,.0f} tps" + (f", p99 {p99:.3f} ms" if p99 is not None else "")
    if result.diagnosis is not None and result.diagnosis.verdict != Bottleneck.UNCLEAR:
        text += f", {result.diagnosis.verdict.replace('_', ' ')}"
    if result.status != RunStatus.OK:
        text += f" ({result.status})"
    return text


def progress_text(line: ProgressLine) -> str:
    lat = f"{line.latency_avg_ms:.3f} ms" if line.latency_avg_ms is not None else "-"
    elapsed = f"{line.elapsed_s:.0f}s" if line.elapsed_s is not None else ""
    return f"{elapsed} {line.tps:,.0f} tps, lat {lat}"


def campaign_text(the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> str:
    resumed = f", {done} already done" if done else ""
    return f"campaign {the_plan.name}: {len(todo)} runs to do{resumed}"


def print_plan_warnings(the_plan: plan.Plan, stream: TextIO) -> None:
    for warning in the_plan.warnings:
        print(f"pgbenchlab: warning: {warning}", file=stream)


class TerminalReporter:
    """Campaign and current-run progress on stderr as plain lines; on a terminal the current
    run's state is one line rewritten in place."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.live = stream.isatty()
        self.total = 0
        self.index = 0
        self.eta = CampaignEta()

    def campaign_started(self, the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> None:
        self.total = len(todo)
        self.eta.start(todo)
        if not self.quiet:
            print_plan_warnings(the_plan, self.stream)
        self.say(campaign_text(the_plan, todo, done))

    def run_started(self, spec: plan.RunSpec, index: int, total: int) -> None:
        self.index = index
        self.total = max(self.total, total)  # a capacity search knows only its bound

    def prefix(self) -> str:
        return f"[{self.index}/{self.total} ETA {duration_text(self.eta.remaining())}]"

    def phase(self, spec: plan.RunSpec, text: str) -> None:
        self.live_line(f"{self.prefix()} {spec.label}: {text}")

    def progress(self, spec: plan.RunSpec, line: ProgressLine) -> None:
        self.live_line(f"{self.prefix()} {spec.label}: {progress_text(line)}")

    def sampled(self, spec: plan.RunSpec, server: str, points: Sequence[Point]) -> None:
        pass  # telemetry is for the live metrics (`run --metrics`), not these lines

    def run_finished(self, spec: plan.RunSpec, result: RunResult) -> None:
        self.eta.run_done(spec)
        self.live_line("")
        self.say(f"{self.prefix()} {spec.label}: {finished_text(result)}")
        for warning in result.warnings:
            self.say(f"    warning: {warning.text}")

    def note(self, text: str) -> None:
        self.say(text)

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def live_line(self, text: str) -> None:
        if self.live and not self.quiet:
            width = 120
            print(
                f"\r{text[:width]:<{width}}",
                end="\r" if not text else "",
                file=self.stream,
                flush=True,
            )


class JsonReporter:
    """Events as JSON lines on stdout, for scripts."""

    def emit(self, event: str, **fields: Any) -> None:
        print(jsontext.dumps({"event": event, "time": time.time(), **fields}), flush=True)

    def campaign_started(self, the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> None:
        self.emit(
            "campaign_started",
            campaign=the_plan.name,
            todo=len(todo),
            done=done,
            warnings=list(the_plan.warnings),
        )

    def run_started(self, spec: plan.RunSpec, index: int, total: int) -> None:
        self.emit(
            "run_started", run=spec.run_key, index=index, total=total, cell=spec.cell.stored()
        )

    def phase(self, spec: plan.RunSpec, text: str) -> None:
        self.emit("phase", run=spec.run_key, phase=text)

    def progress(self, spec: plan.RunSpec, line: ProgressLine) -> None:
        self.emit(
            "progress",
            run=spec.run_key,
            elapsed_s=line.elapsed_s,
            tps=line.tps,
            latency_ms=line.latency_avg_ms,
        )

    def sampled(self, spec: plan.RunSpec, server: str, points: Sequence[Point]) -> None:
        pass  # telemetry is for the live metrics (`run --metrics`), not these lines

    def run_finished(self, spec: plan.RunSpec, result: RunResult) -> None:
        self.emit(
            "run_finished",
            run=spec.run_key,
            status=result.status,
            tps=result.tps,
            error=result.error,
            warnings=[w.text for w in result.warnings],
        )

    def note(self, text: str) -> None:
        self.emit("note", text=text)


def interactive(stream: TextIO) -> bool:
    """A person watches: a terminal, and not a CI job (which may fake one)."""
    in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return stream.isatty() and not in_ci and os.environ.get("TERM") != "dumb"
