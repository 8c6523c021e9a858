"""A capacity campaign's searches as views: per server × cell the answer (decided again from
the stored probes, as the search decided it) and its knee, the probes' figures against the
offered rate; and the comparison of two servers' capacities."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pgbenchlab.analysis.capacity import (
    CONFIRM,
    START,
    VERDICT_RULES,
    CapacityAnswer,
    CapacityProbe,
    SearchIdentity,
    decide,
)
from pgbenchlab.analysis.slo import Slo, parse_slo
from pgbenchlab.errors import UserError
from pgbenchlab.report.views.variants import run_variant
from pgbenchlab.store import ProbeRecord, RunRecord, Store


@dataclass(frozen=True)
class KneePoint:
    """One probe's figures: offered and achieved rate, latency percentiles (ms), the late and
    skipped shares (fractions) and its verdict."""

    run_id: int
    role: str
    offered: float | None
    clients: int
    achieved: float | None
    p50_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    late_share: float | None
    skipped_share: float | None
    passed: bool
    verdict: str


@dataclass(frozen=True)
class CapacityView:
    server: str
    cell: str  # the cell's other axes, as a label
    search: str  # the cell's id
    slo: Slo
    limit_ms: float | None
    answer: CapacityAnswer | None  # None: the search did not end yet
    points: tuple[KneePoint, ...]  # in the order they ran
    verdict_rules: int = VERDICT_RULES  # how its probes were judged (analysis.capacity)

    @property
    def open_loop(self) -> tuple[KneePoint, ...]:
        """The rate-limited probes, by offered rate: the knee's x axis."""
        return tuple(sorted((p for p in self.points if p.offered), key=lambda p: p.offered or 0))

    @property
    def confirmations(self) -> tuple[KneePoint, ...]:
        """The full-length runs at the answer's rate: what the answer rests on."""
        if self.answer is None or self.answer.rate is None:
            return ()
        rate = self.answer.rate
        return tuple(p for p in self.points if p.role == CONFIRM and p.offered == rate)

    @property
    def achieved(self) -> float | None:
        """The lowest rate a confirmation at the answer's rate achieved (tx/s)."""
        return min((p.achieved for p in self.confirmations if p.achieved is not None), default=None)

    @property
    def skipped_share(self) -> float | None:
        """The highest share of its scheduled transactions a confirmation skipped."""
        shares = [p.skipped_share for p in self.confirmations if p.skipped_share is not None]
        return max(shares, default=None)

    def as_dict(self) -> dict[str, Any]:
        answer = None
        if self.answer is not None:
            found = {"achieved": self.achieved, "skipped_share": self.skipped_share}
            answer = asdict(self.answer) | found | {"verdict_rules": self.verdict_rules}
        return {
            "server": self.server,
            "cell": self.cell,
            "search": self.search,
            "slo": self.slo.text,
            "latency_limit_ms": self.limit_ms,
            "answer": answer,
            "probes": [asdict(p) for p in self.points],
        }


def capacity_views(store: Store, campaign_id: int) -> list[CapacityView]:
    """The campaign's capacity searches (empty for a campaign that is not one)."""
    campaign = store.campaign_record(campaign_id)
    identity = None if campaign is None else SearchIdentity.read(campaign.plan_text)
    if identity is None:
        return []
    records = {r.id: r for r in store.run_records(campaign_id)}
    probes = store.probe_records(campaign_id)
    searches = list(dict.fromkeys(p.search for p in probes))
    slo = parse_slo(identity.slo, stored=True)
    return [_view(identity, [p for p in probes if p.search == s], records, slo) for s in searches]


def _view(
    identity: SearchIdentity, probes: list[ProbeRecord], runs: dict[int, RunRecord], slo: Slo
) -> CapacityView:
    step = decide(
        [CapacityProbe(p.role, p.rate, p.passed, p.tps) for p in probes], identity.settings
    )
    first = runs.get(probes[0].run_id) or _missing(probes[0])
    limits = [runs[p.run_id].spec.latency_limit_ms for p in probes if p.run_id in runs]
    return CapacityView(
        server=first.spec.server,
        cell=_cell_label(first),
        search=probes[0].search,
        slo=slo,
        limit_ms=next((x for x in limits if x is not None), None),
        answer=step if isinstance(step, CapacityAnswer) else None,
        points=tuple(_point(p, runs.get(p.run_id)) for p in probes),
        verdict_rules=identity.verdict_rules,
    )


def _missing(probe: ProbeRecord) -> RunRecord:
    raise UserError(f"capacity probe {probe.run_id} has no stored run")


def _cell_label(run: RunRecord) -> str:
    settings = "".join(f" {k}={v}" for k, v in run_variant(run).items())
    cell = run.spec
    return f"s={cell.scale} {cell.workload} {cell.protocol}{settings}"


def _point(probe: ProbeRecord, run: RunRecord | None) -> KneePoint:
    transactions, skipped, failed, late = (
        (run.transactions, run.skipped, run.failed, run.late) if run else (None, None, None, None)
    )
    scheduled = (transactions or 0) + (skipped or 0) + (failed or 0)
    return KneePoint(
        run_id=probe.run_id,
        role=probe.role,
        offered=probe.rate,
        clients=probe.clients,
        achieved=probe.tps,
        p50_ms=run.p50_ms if run else None,
        p99_ms=run.p99_ms if run else None,
        p999_ms=run.p999_ms if run else None,
        late_share=late / transactions if late is not None and transactions else None,
        skipped_share=(skipped or 0) / scheduled if scheduled and probe.role != START else None,
        passed=probe.passed,
        verdict=probe.verdict,
    )


@dataclass(frozen=True)
class CapacityComparison:
    """Candidate ÷ baseline capacity, and the ratio's bracket from the two brackets (lowest:
    candidate's highest pass ÷ baseline's lowest fail; highest: the other way round)."""

    cell: str
    baseline: CapacityView
    candidate: CapacityView
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None


def compare_capacities(
    views: list[CapacityView], baseline: str, candidate: str
) -> list[CapacityComparison]:
    """Every cell both servers were searched in."""
    by_server: dict[str, dict[str, CapacityView]] = {}
    for view in views:
        by_server.setdefault(view.server, {})[view.cell] = view
    for name in (baseline, candidate):
        if name not in by_server:
            known = ", ".join(sorted(by_server)) or "none"
            raise UserError(f"no capacity search of server {name} (searched: {known})")
    shared = [c for c in by_server[baseline] if c in by_server[candidate]]
    return [_comparison(by_server[baseline][c], by_server[candidate][c]) for c in shared]


def _comparison(base: CapacityView, cand: CapacityView) -> CapacityComparison:
    b = base.answer or CapacityAnswer(None, None, None, "")
    c = cand.answer or CapacityAnswer(None, None, None, "")

    def ratio(top: float | None, bottom: float | None) -> float | None:
        return None if top is None or not bottom else top / bottom

    return CapacityComparison(
        cell=base.cell,
        baseline=base,
        candidate=cand,
        ratio=ratio(c.rate, b.rate),
        ratio_low=ratio(c.highest_pass, b.lowest_fail),
        ratio_high=ratio(c.lowest_fail, b.highest_pass),
    )
