"""The live metrics of a campaign (`run --metrics`, `capacity --metrics`): what it tells its
display, kept for Prometheus to scrape, as prometheus_client's metric families.

`CampaignMetrics` is a `campaign.Reporter`. Each event replaces an immutable picture of the
campaign (`Picture`) under a lock only the campaign's own threads take (the main one,
pgbench's progress reader, the telemetry samplers), so none of them ever waits for a scrape;
a scrape reads the picture it finds and renders it in the listener's thread (`listener`).

The run's figures are the ones its display shows: pgbench's last `-P 1` line (the warmup's or
the measured run's, gone between them) and each second of the servers' telemetry as their
samplers derive it (rates per second, CPU shares, gauges). Labels carry the run's cell,
never a secret: settings that hold one are masked as in a run's label.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)

from pgbenchlab import plan
from pgbenchlab.cli.progress import CampaignEta, Clock, in_flight
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.records.telemetry import Point
from pgbenchlab.redaction import redact_setting
from pgbenchlab.results import RunResult

PREFIX = "pgbenchlab"
PHASES = ("prepare", "warmup", "measured", "finish")
PGBENCH_STEPS = {"warmup": "warmup", "measuring": "measured"}  # the steps pgbench runs in
RUN_LABELS = (
    "campaign", "run", "cell", "server", "variant", "scale", "workload", "clients", "threads",
    "protocol", "connection", "connect", "rate", "repeat",
)  # fmt: skip
# Every family served, each scrape (empty between runs): the dashboard's queries name these.
METRICS = (
    "campaign_info", "campaign_runs_done", "campaign_runs_todo", "campaign_progress_ratio",
    "campaign_elapsed_seconds", "campaign_eta_seconds", "campaign_runs_finished_total",
    "run_info", "run_phase", "run_step_info", "run_elapsed_seconds", "run_pgbench_seconds",
    "run_tps", "run_latency_seconds", "run_latency_stddev_seconds", "run_lag_seconds",
    "run_failed_per_second", "run_skipped_per_second", "run_retried_per_second", "telemetry",
)  # fmt: skip


def run_labels(spec: plan.RunSpec) -> tuple[str, ...]:
    """The run's cell as label values, in `RUN_LABELS` order (a setting holding a secret
    masked)."""
    variant = [f"{k}={redact_setting(k, v)}" for k, v in spec.server_settings]
    variant += [f"{k}={v}" for k, v in spec.sysctl]
    rate = spec.options.rate
    return (
        spec.campaign,
        spec.run_key,
        spec.cell_id,
        spec.server,
        " ".join(variant),
        str(spec.scale),
        spec.workload.name,
        str(spec.clients),
        str(spec.pgbench_threads),
        spec.options.protocol,
        spec.options.connection,
        str(spec.options.connect).lower(),
        "" if rate is None else f"{rate:g}",
        str(spec.repeat),
    )


def phase_of(step: str, current: str) -> str:
    """The run's phase once the campaign says `step`: pgbench's warmup or measured run, else
    preparing before the measured run and finishing after it."""
    if step in PGBENCH_STEPS:
        return PGBENCH_STEPS[step]
    return "finish" if current in ("measured", "finish") else "prepare"


@dataclass(frozen=True)
class RunPicture:
    spec: plan.RunSpec
    labels: tuple[str, ...]
    started_at: float  # on the reporter's clock
    step: str = "starting"
    phase: str = "prepare"
    line: ProgressLine | None = None  # pgbench's last progress line in this phase
    telemetry: Mapping[str, tuple[Point, ...]] = field(default_factory=dict)  # by server


@dataclass(frozen=True)
class Picture:
    campaign: str = ""
    done_before: int = 0  # runs a resumed campaign had already
    todo: int = 0  # runs left, the one under way included
    finished: Mapping[str, int] = field(default_factory=dict)  # by status
    run: RunPicture | None = None


class CampaignMetrics:
    """A `campaign.Reporter` keeping the campaign's picture, and a prometheus_client collector
    rendering it."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.eta = CampaignEta(clock)
        self.picture = Picture()
        self.lock = threading.Lock()  # writers only: a scrape reads `picture` as it is

    def change(self, update: Callable[[Picture], Picture]) -> None:
        with self.lock:
            self.picture = update(self.picture)

    def change_run(self, spec: plan.RunSpec, update: Callable[[RunPicture], RunPicture]) -> None:
        """The run under way changed (an event of another run, late, changes nothing)."""

        def changed(picture: Picture) -> Picture:
            run = picture.run
            if run is None or run.spec.run_key != spec.run_key:
                return picture
            return replace(picture, run=update(run))

        self.change(changed)

    # -- the Reporter events ---------------------------------------------------------------------

    def campaign_started(self, the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> None:
        eta = CampaignEta(self.clock)  # from now: the listener was up before the builds
        eta.start(todo)
        self.eta = eta
        self.change(lambda p: replace(p, campaign=the_plan.name, done_before=done, todo=len(todo)))

    def run_started(self, spec: plan.RunSpec, index: int, total: int) -> None:
        run = RunPicture(spec, run_labels(spec), self.clock())
        self.change(lambda p: replace(p, campaign=spec.campaign, todo=total - index + 1, run=run))

    def phase(self, spec: plan.RunSpec, text: str) -> None:
        def stepped(run: RunPicture) -> RunPicture:
            phase = phase_of(text, run.phase)
            if phase == run.phase:
                return replace(run, step=text)
            return replace(run, step=text, phase=phase, line=None, telemetry={})

        self.change_run(spec, stepped)

    def progress(self, spec: plan.RunSpec, line: ProgressLine) -> None:
        self.change_run(spec, lambda run: replace(run, line=line))

    def sampled(self, spec: plan.RunSpec, server: str, points: Sequence[Point]) -> None:
        def measured(run: RunPicture) -> RunPicture:
            if run.phase != "measured":  # a late second: the run has moved on
                return run
            return replace(run, telemetry={**run.telemetry, server: tuple(points)})

        self.change_run(spec, measured)

    def run_finished(self, spec: plan.RunSpec, result: RunResult) -> None:
        self.eta.run_done(spec)

        def finished(picture: Picture) -> Picture:
            counts = {**picture.finished}
            counts[result.status] = counts.get(result.status, 0) + 1
            return replace(picture, finished=counts, todo=max(picture.todo - 1, 0), run=None)

        self.change(finished)

    def note(self, text: str) -> None:
        pass

    # -- the exposition --------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The picture as it is now, as metric families (prometheus_client's `Collector`)."""
        picture = self.picture
        yield from self.campaign_families(picture)
        yield from run_families(picture.run, self.clock())

    def campaign_families(self, picture: Picture) -> Iterator[Metric]:
        run = picture.run
        flight = 0.0 if run is None else in_flight(run.spec, run.started_at, self.clock())
        done = picture.done_before + sum(picture.finished.values())
        by_campaign = [picture.campaign] if picture.campaign else None
        yield info("campaign", "The campaign served", ["campaign"], by_campaign)
        eta = self.eta
        for name, text, value, unit in (
            ("campaign_runs_done", "Runs complete (before a resume too)", done, ""),
            ("campaign_runs_todo", "Runs left, the one under way included", picture.todo, ""),
            ("campaign_progress_ratio", "Share of the planned time done",
             eta.fraction_done(flight), "ratio"),
            ("campaign_elapsed_seconds", "Time since the campaign started", eta.elapsed(),
             "seconds"),
            ("campaign_eta_seconds", "Time left, at the pace so far", eta.remaining(flight),
             "seconds"),
        ):  # fmt: skip
            family = GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=["campaign"], unit=unit)
            if by_campaign:
                family.add_metric(by_campaign, float(value))
            yield family
        finished = CounterMetricFamily(
            f"{PREFIX}_campaign_runs_finished",
            "Runs finished by this process, by status",
            labels=["campaign", "status"],
        )
        for status, count in sorted(picture.finished.items()):
            finished.add_metric([picture.campaign, status], count)
        yield finished


def info(name: str, text: str, labels: list[str], values: Sequence[str] | None) -> Metric:
    family = InfoMetricFamily(f"{PREFIX}_{name}", text, labels=labels)
    if values is not None:
        family.add_metric(values, {})
    return family


# The gauges of pgbench's last progress line: name, help, unit, its value from the line.
LINE_GAUGES: tuple[tuple[str, str, str, Callable[[ProgressLine], float | None]], ...] = (
    ("run_pgbench_seconds", "pgbench's time into the phase at its last progress line", "seconds",
     lambda line: line.elapsed_s),
    ("run_tps", "Transactions per second in pgbench's last progress second", "",
     lambda line: line.tps),
    ("run_latency_seconds", "Average latency in pgbench's last progress second", "seconds",
     lambda line: line.latency_avg_ms / 1000),
    ("run_latency_stddev_seconds", "Latency's standard deviation in that second", "seconds",
     lambda line: line.latency_stddev_ms / 1000),
    ("run_lag_seconds", "Average schedule lag in that second (-R)", "seconds",
     lambda line: None if line.lag_ms is None else line.lag_ms / 1000),
    ("run_failed_per_second", "Failed transactions in that second (15+)", "",
     lambda line: line.failed),
    ("run_skipped_per_second", "Transactions skipped in that second (-R with -L)", "",
     lambda line: line.skipped),
    ("run_retried_per_second", "Transactions retried in that second (--max-tries)", "",
     lambda line: line.retried),
)  # fmt: skip


def run_families(run: RunPicture | None, now: float) -> Iterator[Metric]:
    labels = list(RUN_LABELS)
    values = None if run is None else list(run.labels)
    yield info("run", "The run under way: its cell", labels, values)
    phase = StateSetMetricFamily(f"{PREFIX}_run_phase", "The run's phase", labels=labels)
    step = InfoMetricFamily(f"{PREFIX}_run_step", "The campaign's step in it", labels=labels)
    elapsed = GaugeMetricFamily(
        f"{PREFIX}_run_elapsed_seconds", "Time since the run started", labels=labels, unit="seconds"
    )
    if run is not None and values is not None:
        phase.add_metric(values, {p: p == run.phase for p in PHASES})
        step.add_metric(values, {"step": run.step})
        elapsed.add_metric(values, now - run.started_at)
    yield from (phase, step, elapsed)
    yield from line_families(run, labels)
    yield telemetry_family(run, labels)


def line_families(run: RunPicture | None, labels: list[str]) -> Iterator[Metric]:
    line = None if run is None else run.line
    for name, text, unit, value_of in LINE_GAUGES:
        family = GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=[*labels, "phase"], unit=unit)
        value = None if run is None or line is None else value_of(line)
        if run is not None and value is not None:
            family.add_metric([*run.labels, run.phase], float(value))
        yield family


def telemetry_family(run: RunPicture | None, labels: list[str]) -> Metric:
    family = GaugeMetricFamily(
        f"{PREFIX}_telemetry",
        "The servers' last second of telemetry (per second for counters; shares; gauges)",
        labels=[*labels, "member", "source", "metric"],
    )
    for member, points in sorted((run.telemetry if run else {}).items()):
        assert run is not None
        for point in points:
            family.add_metric([*run.labels, member, point.source, point.metric], point.value)
    return family
