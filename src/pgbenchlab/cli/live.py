"""The live progress display for a person at a terminal (rich): the campaign's bar and ETA and
the current run's phase and TPS, redrawn in place under the plain lines of finished runs.

The lines printed above the live area are the plain display's, so the scrollback reads the
same either way; the live area disappears when the campaign ends."""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from pgbenchlab import plan
from pgbenchlab.cli.progress import (
    CampaignEta,
    Clock,
    campaign_text,
    finished_text,
    in_flight,
    run_seconds,
)
from pgbenchlab.durations import duration_text
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.records.telemetry import Point
from pgbenchlab.results import RunResult

REFRESHES_PER_SECOND = 4


class LiveReporter:
    """A `campaign.Reporter` drawing on a rich console; use it as a context manager."""

    def __init__(self, console: Console, clock: Clock = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self.eta = CampaignEta(clock)
        self.name = ""
        self.total = 0
        self.index = 0
        self.done = 0
        self.spec: plan.RunSpec | None = None
        self.phase_text = ""
        self.run_started_at = 0.0
        self.last: ProgressLine | None = None
        self.live = Live(
            console=console,
            get_renderable=self.render,
            refresh_per_second=REFRESHES_PER_SECOND,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    @classmethod
    def on_stderr(cls) -> LiveReporter:
        return cls(Console(stderr=True))

    def __enter__(self) -> LiveReporter:
        self.live.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.live.stop()

    # -- the Reporter events ---------------------------------------------------------------------

    def campaign_started(self, the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> None:
        self.name, self.total = the_plan.name, len(todo)
        self.eta.start(todo)
        for warning in the_plan.warnings:
            self.say(f"pgbenchlab: warning: {warning}")
        self.say(campaign_text(the_plan, todo, done))

    def run_started(self, spec: plan.RunSpec, index: int, total: int) -> None:
        self.spec, self.index = spec, index
        self.total = max(self.total, total)  # a capacity search knows only its bound
        self.phase_text, self.last = "starting", None
        self.run_started_at = self.clock()

    def phase(self, spec: plan.RunSpec, text: str) -> None:
        self.phase_text = text

    def progress(self, spec: plan.RunSpec, line: ProgressLine) -> None:
        self.last = line

    def sampled(self, spec: plan.RunSpec, server: str, points: Sequence[Point]) -> None:
        pass  # telemetry is for the live metrics (`run --metrics`), not this display

    def run_finished(self, spec: plan.RunSpec, result: RunResult) -> None:
        self.eta.run_done(spec)
        self.done += 1
        left = duration_text(self.eta.remaining())
        self.say(f"[{self.index}/{self.total} ETA {left}] {spec.label}: {finished_text(result)}")
        for warning in result.warnings:
            self.say(f"    warning: {warning.text}")
        self.spec = None

    def note(self, text: str) -> None:
        self.say(text)

    def say(self, text: str) -> None:
        """A line above the live area, as the plain display prints it (never rich markup)."""
        self.console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    # -- drawing ---------------------------------------------------------------------------------

    def render(self) -> RenderableType:
        if not self.name:  # the campaign is still being set up (servers checked, database)
            return Text("")
        return Group(self.campaign_row(), self.run_row())

    def campaign_row(self) -> Table:
        row = Table.grid(padding=(0, 1))
        row.add_column(no_wrap=True)
        row.add_column(width=30)
        row.add_column(no_wrap=True)
        in_flight = self.in_flight()
        bar = ProgressBar(total=1.0, completed=self.eta.fraction_done(in_flight), width=30)
        elapsed = duration_text(self.eta.elapsed())
        left = duration_text(self.eta.remaining(in_flight))
        row.add_row(
            Text(f"campaign {self.name}", style="bold"),
            bar,
            Text(f"{self.done}/{self.total} runs  elapsed {elapsed}  ETA {left}"),
        )
        return row

    def run_row(self) -> Text:
        if self.spec is None:
            return Text("")
        text = Text(f"run {self.index}/{self.total} ", style="dim")
        text.append(self.spec.label, style="cyan")
        text.append(f"  {self.phase_text}", style="yellow")
        text.append(f"  {self.run_clock(self.spec)}")
        if self.last is not None:
            text.append(f"  {self.last.tps:,.0f} tps", style="bold green")
            if self.last.latency_avg_ms is not None:
                text.append(f"  lat {self.last.latency_avg_ms:.3f} ms")
        return text

    def in_flight(self) -> float:
        """Seconds into the run under way, at most what it should take."""
        if self.spec is None:
            return 0.0
        return in_flight(self.spec, self.run_started_at, self.clock())

    def run_clock(self, spec: plan.RunSpec) -> str:
        """The run's time so far against what it should take."""
        spent = duration_text(self.clock() - self.run_started_at)
        return f"{spent}/{duration_text(run_seconds(spec))}"
