"""What a campaign tells a display as it goes: the `Reporter` protocol the CLI's displays
implement, and a reporter that shows nothing. The campaign itself never prints."""

from __future__ import annotations

from typing import Protocol

from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.plan import Plan, RunSpec
from pgbenchlab.results import RunResult


class Reporter(Protocol):
    """Progress events for a display; the runner never prints."""

    def campaign_started(self, plan: Plan, todo: list[RunSpec], done: int) -> None: ...

    def run_started(self, spec: RunSpec, index: int, total: int) -> None: ...

    def phase(self, spec: RunSpec, text: str) -> None: ...

    def progress(self, spec: RunSpec, line: ProgressLine) -> None: ...

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

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        pass

    def note(self, text: str) -> None:
        pass
