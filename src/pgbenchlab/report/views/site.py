"""A whole results database as a site: every campaign's view, and the comparisons between the
campaigns that share cells (the `compare` views, campaign against campaign)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pgbenchlab.errors import UserError
from pgbenchlab.plan import stored_verdicts
from pgbenchlab.report.views.bisection import BisectionView, load_bisections
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.compare import CellChange, match
from pgbenchlab.report.views.follow import FollowView, load_follows
from pgbenchlab.report.views.mail import verdict_rules
from pgbenchlab.report.views.metrics import one_server_each
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.results import CampaignStatus
from pgbenchlab.store import Store

DEFAULT_THRESHOLD = 0.02  # as `pgbenchlab compare`


@dataclass(frozen=True)
class CampaignComparison:
    """An earlier campaign (the baseline) against a later one, on the cells they share."""

    baseline: ReportView
    candidate: ReportView
    changes: tuple[CellChange, ...]
    margin: float | None = None  # the baseline plan's equivalence margin (each change judged)

    @property
    def cells(self) -> int:
        return len({c.cell for c in self.changes})


@dataclass(frozen=True)
class EmptyCampaign:
    """A campaign without a run yet (interrupted before its first): listed, no report."""

    id: int
    name: str
    description: str
    started_at: float
    status: CampaignStatus


@dataclass(frozen=True)
class SiteView:
    campaigns: tuple[ReportView, ...]  # oldest first
    comparisons: tuple[CampaignComparison, ...]
    empty: tuple[EmptyCampaign, ...] = ()
    bisections: tuple[BisectionView, ...] = ()
    follows: tuple[FollowView, ...] = ()  # followed branches


def load_site(store: Store, threshold: float = DEFAULT_THRESHOLD) -> SiteView:
    """Every campaign with runs, every pair of them that shares a cell, and the campaigns
    that have no run yet."""
    listed = store.campaign_summaries()
    if not listed:
        raise UserError(f"no campaign in {store.path}: nothing to put on a site")
    empty = tuple(
        EmptyCampaign(c.id, c.name, c.description, c.started_at, c.status)
        for c in (s.campaign for s in listed if s.runs == 0)
    )
    views = tuple(load_view(store, s.campaign.id) for s in listed if s.runs > 0)
    comparisons = [
        found
        for index, first in enumerate(views)
        for second in views[index + 1 :]
        if (found := compare_campaigns(first, second, threshold)) is not None
    ]
    return SiteView(views, tuple(comparisons), empty, load_bisections(store), load_follows(store))


def compare_campaigns(
    baseline: ReportView, candidate: ReportView, threshold: float
) -> CampaignComparison | None:
    """As `compare CAMPAIGN_A CAMPAIGN_B`: servers matched by name, or whatever they are
    called when each campaign has one; None when no cell is shared."""
    ignore = ("server",) if one_server_each([baseline, candidate]) else ()
    rules = replace(
        verdict_rules(stored_verdicts(baseline.campaign.plan_text)), threshold=threshold
    )  # the baseline plan's metrics, equivalence margin and correction, as `compare` takes them
    try:
        changes = match(
            baseline, baseline.cells, candidate, candidate.cells, ignore=ignore, rules=rules
        )
    except UserError:  # no cell with results in common
        return None
    return CampaignComparison(baseline, candidate, tuple(changes), rules.equivalence)
