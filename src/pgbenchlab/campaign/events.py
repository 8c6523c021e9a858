"""What a campaign tells a display as it goes: the `Reporter` protocol the CLI's displays
implement, a reporter that shows nothing, and several reporters told alike (`Reporters`: a
display and the live metrics of `run --metrics`). The campaign itself never prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.plan import Plan, RunSpec
from pgbenchlab.records.telemetry import Point
from pgbenchlab.results import RunResult


class Reporter(Protocol):
    """Progress events for a display; the runner never prints."""

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None: ...

    def run_started(self, spec: RunSpec, index: int, total: int) -> None: ...

    def phase(self, spec: RunSpec, text: str) -> None: ...

    def progress(self, spec: RunSpec, line: ProgressLine) -> None: ...

    def sampled(self, spec: RunSpec, server: str, points: Sequence[Point]) -> None:
        """A second of a server's telemetry during the measured run, as its sampler derived it
        (rates per second, shares, gauges); told from the sampler's thread, so it must return
        at once."""
        ...

    def run_finished(self, spec: RunSpec, result: RunResult) -> None: ...

    def note(self, text: str) -> None: ...


class NullReporter:
    """A reporter that shows nothing: for scripts and benchmarks using the library."""

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None:
        pass

    def run_started(self, spec: RunSpec, index: int, total: int) -> None:
        pass

    def phase(self, spec: RunSpec, text: str) -> None:
        pass

    def progress(self, spec: RunSpec, line: ProgressLine) -> None:
        pass

    def sampled(self, spec: RunSpec, server: str, points: Sequence[Point]) -> None:
        pass

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class Reporters:
    """Several reporters told every event alike, in order."""

    def __init__(self, *reporters: Reporter) -> None:
        self.reporters = reporters

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None:
        for reporter in self.reporters:
            reporter.campaign_started(plan, todo, done)

    def run_started(self, spec: RunSpec, index: int, total: int) -> None:
        for reporter in self.reporters:
            reporter.run_started(spec, index, total)

    def phase(self, spec: RunSpec, text: str) -> None:
        for reporter in self.reporters:
            reporter.phase(spec, text)

    def progress(self, spec: RunSpec, line: ProgressLine) -> None:
        for reporter in self.reporters:
            reporter.progress(spec, line)

    def sampled(self, spec: RunSpec, server: str, points: Sequence[Point]) -> None:
        for reporter in self.reporters:
            reporter.sampled(spec, server, points)

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        for reporter in self.reporters:
            reporter.run_finished(spec, result)

    def note(self, text: str) -> None:
        for reporter in self.reporters:
            reporter.note(text)
