"""A followed branch's timelines (templates/follow.html) and a page per change
(templates/follow_change.html). Each timeline is an inline SVG (no script, no network): a point
per measured commit at its place on the branch, its interval as a bar, a hover title with the
commit's subject and a link to its runs; each change a band between its two measured commits,
linked to its page, and its culprit marked on the axis. This module places the marks."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pgbenchlab.report.render import templating
from pgbenchlab.report.views.follow import CommitFigure, FollowChangeView, FollowView, Timeline
from pgbenchlab.report.views.metrics import METRICS as METRIC_NAMES
from pgbenchlab.report.views.metrics import format_value

WIDTH, HEIGHT, MARGIN = 900, 240, 56

PageOf = Callable[[str], str | None]  # a campaign's name → its page, from the site's root


def plain(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def follow_page(view: FollowView) -> str:
    return f"follows/{plain(view.name)}.html"


def change_page(view: FollowView, change: FollowChangeView) -> str:
    return f"follows/{plain(view.name)}-{plain(change.key)}.html"


@dataclass(frozen=True)
class Dot:
    figure: CommitFigure
    x: float
    y: float
    low: float
    high: float
    title: str
    link: str | None


@dataclass(frozen=True)
class Band:
    change: FollowChangeView
    x1: float
    x2: float
    culprit_x: float | None
    title: str
    link: str
    regressed: bool


@dataclass(frozen=True)
class TimelineChart:
    timeline: Timeline
    title: str
    top_label: str
    bottom_label: str
    first_date: str
    last_date: str
    dots: tuple[Dot, ...]
    bands: tuple[Band, ...]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN
    right: int = WIDTH - MARGIN
    top: int = MARGIN // 2
    bottom: int = HEIGHT - MARGIN


def metric_name(metric: str) -> str:
    return METRIC_NAMES[metric].label if metric in METRIC_NAMES else metric


def charts(view: FollowView, page_of: PageOf, up: str) -> list[TimelineChart]:
    """Every timeline's chart; links relative to a page in follows/ (``up`` leads to the root)."""
    return [_chart(view, t, page_of, up) for t in view.timelines]


def _chart(view: FollowView, timeline: Timeline, page_of: PageOf, up: str) -> TimelineChart:
    figures = timeline.figures
    first, last = figures[0].commit.position, figures[-1].commit.position
    span = max(last - first, 1)
    low = min(f.low for f in figures)
    high = max(f.high for f in figures)
    height = (high - low) or abs(high) or 1.0
    metric = timeline.series.metric

    def x(position: float) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * (position - first) / span

    def y(value: float) -> float:
        return HEIGHT - MARGIN - (HEIGHT - 1.5 * MARGIN) * (value - low) / height

    dots = []
    for f in figures:
        page = page_of(f.commit.campaign)
        title = (
            f"{f.commit.short} {f.commit.subject} ({f.commit.author_date[:10]}): "
            f"{format_value(metric, f.figure)} [{format_value(metric, f.low)} … "
            f"{format_value(metric, f.high)}], {f.runs} run(s)"
        )
        link = None if page is None else up + page
        dots.append(Dot(f, x(f.commit.position), y(f.figure), y(f.low), y(f.high), title, link))
    bands = []
    for c in timeline.changes:
        found, change = c.change.found, c.change
        culprit = None if c.culprit_position is None else x(c.culprit_position)
        title = (
            f"{found.verdict}: {found.relative_step:+.1%} [{found.ci_low:+.1%} … "
            f"{found.ci_high:+.1%}] between {change.before.short} and {change.after.short}"
            + (f"; culprit {c.culprit[:10]} {c.culprit_subject}" if c.culprit else "")
        )
        bands.append(
            Band(c, x(change.before.position), x(change.after.position), culprit, title,
                 change_page(view, c).removeprefix("follows/"), c.change.regressed)
        )  # fmt: skip
    return TimelineChart(
        timeline,
        f"{timeline.series.cell}: {metric_name(metric)}",
        format_value(metric, high),
        format_value(metric, low),
        figures[0].commit.author_date[:10],
        figures[-1].commit.author_date[:10],
        tuple(dots),
        tuple(bands),
    )


def follow_html(view: FollowView, page_of: PageOf, style: str, index_link: str) -> str:
    return templating.render(
        "follow.html",
        title=f"pgbenchlab: {view.branch} followed by {view.name}",
        style=style,
        index_link=index_link,
        view=view,
        charts=charts(view, page_of, "../"),
        change_link=lambda c: change_page(view, c).removeprefix("follows/"),
    )


def change_html(
    view: FollowView, change: FollowChangeView, page_of: PageOf, style: str, bisection_page: str
) -> str:
    metric = change.change.series.metric
    found = change.change.found
    before_page, after_page = (
        page_of(c.campaign) for c in (change.change.before, change.change.after)
    )
    return templating.render(
        "follow_change.html",
        title=f"pgbenchlab: a change in {view.name}",
        style=style,
        follow_link=follow_page(view).removeprefix("follows/"),
        c=change,
        metric=metric_name(metric),
        before=format_value(metric, found.before),
        after=format_value(metric, found.after),
        before_page=None if before_page is None else "../" + before_page,
        after_page=None if after_page is None else "../" + after_page,
        bisection_page="../" + bisection_page,
    )
