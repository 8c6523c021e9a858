"""A group's run: several servers driven together (`plan.groups`), stored as one run.

Each member server is prepared as for a run of its own (its setting variant, its dataset, the
run's hygiene) and gets the whole cell: a pgbench of its own with the cell's clients, threads
and rate, against its own server, all started at one instant on the campaign's load generators
(this machine; with [pgbench] hosts, each member's clients split across them) through
`generators.together`, by the same measured-run sequence as a single server's run
(`measured_run`). The run is stored once under the group's name: its figures are the sum
of every pgbench's report (`invocation.shares`), its latency percentiles come from the union of
their logs cut to the window where all measured, and each member's part is kept (`ServerPart`)
with the commits its server counted over the run, checked against its own pgbench's
transactions, and what limited it: the diagnosis a single server's run gets, on the member's
own telemetry and its own pgbench's figures (`as_member`). That is what each member's telemetry
is sampled for: the run stores no telemetry series of its own (they would mix servers). The
run's own diagnosis names only a saturated load generator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pgbenchlab.campaign.assemble import cost_warnings, progress_seconds
from pgbenchlab.campaign.executor import Executor, LocalExecutor, Telemetry
from pgbenchlab.campaign.generators import (
    FleetExecutor,
    Generator,
    Planned,
    Target,
    argv_figures,
    split,
    together,
)
from pgbenchlab.campaign.hosts import LOCAL
from pgbenchlab.diagnosing import diagnose_run, judged, observed_run
from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.findings import RunWarning
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.invocation.command import Call, Completed, Share
from pgbenchlab.invocation.shares import sum_reports
from pgbenchlab.pgbench.progress import ProgressLine, parse_progress_line
from pgbenchlab.pgbench.report import PgbenchReport, parse_report
from pgbenchlab.plan import RunSpec
from pgbenchlab.records.telemetry import RunTelemetry
from pgbenchlab.results import RunResult, ServerPart
from pgbenchlab.telemetry.crosscheck import check_commits


class GroupExecutor(LocalExecutor):
    """pgbench on every member server at once: the whole cell for each, its clients split over
    the load generators when there are several; `starts` are told each member's pgbench pid."""

    def __init__(
        self,
        generators: list[Generator],
        targets: list[Target],
        starts: Sequence[Callable[[int], None]] | None = None,
    ) -> None:
        super().__init__(generators[0].host, generators[0].executor.pgbench_cpus)
        self.generators = generators
        self.targets = targets
        self.starts = starts

    def pgbench(self, call: Call) -> Completed:
        planned: list[Planned] = []
        parts = split(
            *argv_figures(list(call.argv)),
            [g.cpus(self.pgbench_cpus) or 1 for g in self.generators],
        )
        for i, target in enumerate(self.targets):
            told = self.starts[i] if self.starts else None
            planned += [
                Planned(g, part, target, told if j == 0 else None)
                for j, (g, part) in enumerate(zip(self.generators, parts, strict=True))
            ]
        if call.on_stderr_line is not None:  # the run's progress: every share's, second by second
            summed = ProgressSum(len(planned), call.on_stderr_line)
            planned = [replace(p, on_line=summed.feed(i)) for i, p in enumerate(planned)]
        return together(replace(call, on_stderr_line=None), planned, self.pgbench_cpus)


class ProgressSum:
    """Every share's -P lines as the run's: second t told once all have reported it, their TPS
    summed and latency weighted by TPS (a shown figure only: the stored series come from the
    logs or from each share's own lines, `assemble.progress_seconds`)."""

    def __init__(self, shares: int, on_line: Callable[[str], None]) -> None:
        self.shares = shares
        self.on_line = on_line
        self.seen: dict[int, dict[int, ProgressLine]] = {}
        self._lock = threading.Lock()

    def feed(self, share: int) -> Callable[[str], None]:
        def line(text: str) -> None:
            parsed = parse_progress_line(text)
            if parsed is None or parsed.elapsed_s is None:
                return
            t = round(parsed.elapsed_s)
            with self._lock:
                got = self.seen.setdefault(t, {})
                got[share] = parsed
                if len(got) < self.shares:
                    return
                del self.seen[t]
            tps = sum(p.tps for p in got.values())
            latency = sum(p.tps * p.latency_avg_ms for p in got.values()) / tps if tps else 0.0
            self.on_line(f"progress: {t:.1f} s, {tps:.1f} tps, lat {latency:.3f} ms stddev 0.000")

        return line


def generators_of(executor: Executor) -> list[Generator]:
    """Where the campaign runs pgbench: its load generators, or the one host it uses."""
    if isinstance(executor, FleetExecutor):
        return executor.generators
    if isinstance(executor, LocalExecutor):
        name = LOCAL if executor.host is LOCAL_HOST else executor.host.name
        return [Generator(name, executor)]
    raise RuntimeError("a group's run needs pgbench started by pgbenchlab itself")


def server_parts(
    spec: RunSpec, shares: Sequence[Share], telemetry: Mapping[str, RunTelemetry | None]
) -> tuple[tuple[ServerPart, ...], list[RunWarning]]:
    """Each member's part (the sum of its shares' reports) and its commits cross-check: a
    warning naming the member whose server counted other commits than its pgbench."""
    parts: list[ServerPart] = []
    warnings: list[RunWarning] = []
    builtin_only = all(s.kind == "builtin" for s in spec.workload.scripts)
    for name, sampled in telemetry.items():
        own = [s for s in shares if s.server == name]
        report = _report(own)
        transactions = report.transactions if report else None
        check = check_commits(
            transactions,
            sampled,
            clients=spec.clients,
            connect_each=spec.options.connect,
            builtin_only=builtin_only,
        )
        if check is not None and not check.agrees:
            found = check.finding()
            warnings.append(RunWarning(found.code, {**found.evidence, "server": name}))
        for cost in cost_warnings(sampled):
            warnings.append(RunWarning(cost.code, {**cost.evidence, "server": name}))
        parts.append(
            ServerPart(
                name,
                sum(s.clients for s in own),
                report.tps if report else None,
                transactions,
                report.failed if report else None,
                report.latency_avg_ms if report else None,
                check.server_commits if check else None,
                check.unexplained if check else None,
                costs=sampled.costs if sampled else None,
            )
        )
    return tuple(parts), warnings


def _report(shares: Sequence[Share]) -> PgbenchReport | None:
    try:
        return sum_reports([parse_report(s.completed.stdout) for s in shares]) if shares else None
    except PgbenchParseError:
        return None


def diagnosed(
    parts: Sequence[ServerPart],
    result: RunResult,
    done: Completed,
    telemetry: Mapping[str, RunTelemetry | None],
    rules: Telemetry,
) -> tuple[ServerPart, ...]:
    """Each member's part with what limited its server: the run as that member saw it
    (`as_member`) diagnosed as a run of its own is (`diagnosing`), on the evidence the
    campaign's telemetry holds for that server; the part keeps what was judged."""
    found = []
    for part in parts:
        seen = as_member(result, part, done, telemetry.get(part.server))
        verdict = diagnose_run(seen, rules.evidence(part.server))
        found.append(judged(replace(part, observed=observed_run(seen)), verdict))
    return tuple(found)


def as_member(
    result: RunResult, part: ServerPart, done: Completed, telemetry: RunTelemetry | None
) -> RunResult:
    """The group's run as one member's own run: its telemetry, its pgbench's figures and -P
    series, its load generators' figures; nothing of the other members' or of their sum."""
    own = tuple(s for s in done.shares if s.server == part.server)
    labels = {s.label for s in own}
    return replace(
        result,
        tps=part.tps,
        transactions=part.transactions,
        failed=part.failed,
        latency_avg_ms=part.latency_avg_ms,
        latency=None,  # the union of every member's log
        seconds=progress_seconds(replace(done, shares=own)) if own else (),
        telemetry=telemetry,
        generators=tuple(g for g in result.generators if g.host in labels),
        servers=(),
        diagnosis=None,
    )
