"""The capacity search executed: for each server × cell of the plan (every axis but `rate`),
the probes `analysis.capacity.decide` asks for, each a stored run of the campaign
``NAME-capacity`` with its role, rate and verdict (`capacity_probes`); an interrupted search
continues from what is stored.

A probe is an open-loop run: ``-R rate`` with ``-L`` (the cell's ``latency_limit``, else the
SLO's loosest latency bound) and the full per-transaction log for the verdict. Its clients come
from Little's law: rate × the latency bound × `HEADROOM` transactions in flight at most while
the SLO holds, so the clients are never what limits the rate (capped at `MAX_CLIENTS`; a failed
probe whose clients were over 80 % busy says so). Trials run `trial_s`; confirmations the
plan's duration.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgbenchlab import installs
from pgbenchlab.analysis.capacity import (
    START,
    CapacityAnswer,
    CapacityProbe,
    Next,
    SearchIdentity,
    SearchSettings,
    decide,
)
from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.analysis.slo import RunFigures, Slo, Verdict, judge
from pgbenchlab.campaign.equipment import prepared
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.executor import Executor
from pgbenchlab.campaign.preflight import searchable_problems
from pgbenchlab.campaign.session import Outcome, Session, drive
from pgbenchlab.errors import NotReady
from pgbenchlab.plan import Plan, RunSpec
from pgbenchlab.plan.hosts import auto_threads
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.store import ProbeRecord

CAMPAIGN_SUFFIX = "-capacity"
HEADROOM = 2.0
MAX_CLIENTS = 64
DEFAULT_TRIAL_S = 10


@dataclass(frozen=True)
class CapacityOptions:
    slo: Slo
    settings: SearchSettings = field(default_factory=SearchSettings)
    trial_s: int = DEFAULT_TRIAL_S

    @property
    def identity(self) -> str:
        return SearchIdentity(self.slo.text, self.trial_s, self.settings).line


@dataclass(frozen=True)
class SearchResult:
    """One server × cell's search: its cell (as planned, without rate), -L, its answer (None
    when interrupted first) and its probes in order."""

    cell: RunSpec
    limit_ms: float
    answer: CapacityAnswer | None
    probes: tuple[ProbeRecord, ...]


@dataclass
class CapacityOutcome:
    outcome: Outcome
    campaign: str
    searches: list[SearchResult]


def capacity_plan(plan: Plan, options: CapacityOptions) -> Plan:
    """The capacity campaign's plan, refused (exit 2, every reason) when it cannot be
    searched (`preflight.searchable_problems`)."""
    problems = searchable_problems(plan, options.slo)
    if problems:
        raise NotReady(problems)
    name = plan.name + CAMPAIGN_SUFFIX
    return replace(plan, name=name, text=f"{plan.text.rstrip()}\n{options.identity}\n")


def search_cells(plan: Plan) -> list[RunSpec]:
    """One spec per server × cell: the first repeat of each (repeats are the search's own)."""
    return [s for s in plan.specs if s.repeat == 1]


def latency_limit_ms(cell: RunSpec, slo: Slo) -> float:
    limit = cell.options.latency_limit_ms or slo.latency_bound_ms
    assert limit is not None  # capacity_plan refused the plan otherwise
    return limit


def little_clients(rate: float, limit_ms: float) -> int:
    """Little's law with headroom: at most rate × latency transactions are in flight while
    the SLO holds; twice that many clients keep the client from being the limit."""
    return max(1, math.ceil(rate * limit_ms / 1000 * HEADROOM))


def clients_for(rate: float, limit_ms: float) -> int:
    return min(MAX_CLIENTS, little_clients(rate, limit_ms))


def clients_note(step: Next, limit_ms: float) -> str:
    """What the probe's verdict says when Little's law asked for more clients than it got."""
    if step.rate is None or little_clients(step.rate, limit_ms) <= MAX_CLIENTS:
        return ""
    wanted = little_clients(step.rate, limit_ms)
    return f"; clients capped at {MAX_CLIENTS} (Little's law asks {wanted})"


def probe_spec(
    cell: RunSpec,
    step: Next,
    limit_ms: float,
    options: CapacityOptions,
    number: int,
    auto_cpus: tuple[int, ...],
) -> RunSpec:
    """The run a probe is: the cell at the step's rate (closed loop for the start), with as
    many threads as its clients can use on the load generators (threads = "auto")."""
    duration = cell.options.duration_s or options.trial_s
    seconds = duration if step.full_length else min(options.trial_s, duration)
    clients = cell.clients if step.rate is None else clients_for(step.rate, limit_ms)
    run_options = replace(
        cell.options,
        rate=step.rate,
        latency_limit_ms=None if step.rate is None else limit_ms,
        duration_s=seconds,
        latency_log="off" if step.rate is None else "full",
        threads=auto_threads(clients, auto_cpus),
    )
    return replace(
        cell,
        campaign=cell.campaign + CAMPAIGN_SUFFIX,
        clients=clients,
        options=run_options,
        repeat=number,
    )


def figures(spec: RunSpec, result: RunResult) -> RunFigures:
    latency = result.latency
    values = dict(latency.percentiles_ms) if latency else {}
    mean = latency.mean_ms if latency else result.latency_avg_ms
    if mean is not None:
        values["mean"] = mean
    return RunFigures(
        offered=spec.options.rate or 0.0,
        achieved=result.tps,
        transactions=result.transactions or 0,
        skipped=result.skipped or 0,
        failed=result.failed or 0,
        late=result.late,
        latency_ms=values,
        latency_series_ms=[
            s.latency_mean_ms for s in result.seconds if s.latency_mean_ms is not None
        ],
        clients=spec.clients,
        ok=result.status == RunStatus.OK,
        error=result.error,
        latency_limit_ms=spec.options.latency_limit_ms,
        histogram=LatencyHistogram.from_json(latency.histogram_json) if latency else None,
    )


def verdict(step: Next, spec: RunSpec, result: RunResult, slo: Slo) -> Verdict:
    if step.rate is None:  # the closed-loop start: only its throughput counts
        ok = result.status == RunStatus.OK and bool(result.tps)
        return Verdict(ok, () if ok else (f"start run gave no TPS: {result.error}",))
    return judge(slo, figures(spec, result))


def as_probe(record: ProbeRecord) -> CapacityProbe:
    return CapacityProbe(record.role, record.rate, record.passed, record.tps)


def search_capacity(
    plan: Plan,
    options: CapacityOptions,
    results_dir: Path,
    reporter: Reporter,
    *,
    fresh: bool = False,
    built: list[installs.Installation] | None = None,
    executor: Executor | None = None,
) -> CapacityOutcome:
    """Search every server × cell of the plan (refused before anything starts when it cannot
    be searched); continues the campaign's stored probes unless fresh."""
    searched = capacity_plan(plan, options)
    results_dir = results_dir.resolve()
    found: list[SearchResult] = []
    body = searching(searched, options, reporter, found)
    with prepared(searched, results_dir, built, reporter) as (pgbench, servers, default, tunables):
        outcome = drive(
            searched, results_dir, reporter, pgbench, servers, executor or default, body,
            fresh=fresh, tunables=tunables,
        )  # fmt: skip
    return CapacityOutcome(outcome, searched.name, found)


def searching(
    plan: Plan, options: CapacityOptions, reporter: Reporter, found: list[SearchResult]
) -> Callable[[Session, Outcome, set[str]], None]:
    def body(campaign: Session, outcome: Outcome, _done: set[str]) -> None:
        stored = campaign.store.probe_records(campaign.campaign_id)
        cells = search_cells(plan)
        bound = options.settings.max_probes
        reporter.note(
            f"capacity {plan.name}: {len(cells)} search(es) for {options.slo.text}, "
            f"at most {bound} probes each; {len(stored)} stored probe(s) kept"
        )
        sequence = itertools.count(len(stored))
        for cell in cells:
            probes = [p for p in stored if p.search == cell.cell_id]
            found.append(search_one(campaign, outcome, cell, probes, options, sequence))

    return body


def search_one(
    campaign: Session,
    outcome: Outcome,
    cell: RunSpec,
    probes: list[ProbeRecord],
    options: CapacityOptions,
    sequence: Iterator[int],
) -> SearchResult:
    limit = latency_limit_ms(cell, options.slo)
    while True:
        step = decide([as_probe(p) for p in probes], options.settings)
        if isinstance(step, CapacityAnswer):
            return SearchResult(cell, limit, step, tuple(probes))
        spec = probe_spec(cell, step, limit, options, len(probes) + 1, campaign.plan.auto_cpus)
        spec = replace(spec, sequence=next(sequence))
        run_id, result = campaign.run_stored(
            spec, len(probes) + 1, options.settings.max_probes, outcome
        )
        if result.status == RunStatus.FAILED:  # nothing measured: no verdict, no more probes
            answer = CapacityAnswer(None, None, None, f"a probe failed: {result.error}")
            return SearchResult(cell, limit, answer, tuple(probes))
        judged = verdict(step, spec, result, options.slo)
        record = ProbeRecord(
            run_id,
            cell.cell_id,
            step.role,
            step.rate,
            spec.clients,
            judged.passed,
            judged.text + clients_note(step, limit),
            result.tps,
        )
        campaign.store.record_probe(campaign.campaign_id, record)
        probes.append(record)
        campaign.reporter.note(f"    {probe_text(record)}")


def probe_text(probe: ProbeRecord) -> str:
    rate = "closed loop" if probe.role == START else f"-R {probe.rate:g}"
    tps = "-" if probe.tps is None else f"{probe.tps:.1f}"
    return f"{probe.role} {rate} c={probe.clients}: {tps} TPS, {probe.verdict}"
