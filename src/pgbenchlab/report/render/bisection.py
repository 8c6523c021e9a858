"""A bisection's page: the figure along the commits tested (an inline SVG: no script, no
network), the answer, and every step with its evidence."""

from __future__ import annotations

from collections.abc import Callable

from pgbenchlab.report.render.sections import esc
from pgbenchlab.report.views.bisection import BisectionView, BisectPoint

WIDTH, HEIGHT, MARGIN = 720, 260, 48
COLOURS = {
    "good end": "#11602f",
    "like good": "#3f9b5a",
    "bad end": "#a3161b",
    "like bad": "#d9534f",
    "neither": "#c98a00",
    "undecided": "#5b6472",
}


def bisection_body(view: BisectionView) -> str:
    """The page's body (the site wraps it)."""
    return (
        f"<h1>Bisection {esc(view.name)}</h1>"
        f'<p class="sub">{esc(view.metric)} between {esc(view.good)} (good) and '
        f"{esc(view.bad)} (bad) in {esc(view.source)}: {view.commits} commits on the "
        f"first-parent line, {view.tested} tested; a change counts beyond "
        f"{view.threshold:.0%}. Status: {esc(view.status)}.</p>"
        f"{_answer(view)}<h2>The figure along the commits tested</h2>{chart(view)}"
        f'<p class="sub">Each point: the commit\'s {esc(view.metric)} relative to the good end '
        "in the same interleaved rounds (geometric means). Skipped commits (they did not build "
        "or run) are marked on the axis.</p><h2>Steps</h2>"
        f"{_steps(view)}"
    )


def _answer(view: BisectionView) -> str:
    if view.first_bad is not None:
        point = view.first_bad
        change = f" Against its parent: {esc(view.change)}." if view.change else ""
        return (
            f"<p><strong>First bad commit: <code>{esc(point.commit)}</code> "
            f"{esc(point.subject)}</strong>.{change}</p>"
        )
    if view.unsplit:
        listed = ", ".join(f"<code>{esc(h[:10])}</code>" for h in view.unsplit)
        return f"<p><strong>The change lies in {listed}</strong>, which could not be split.</p>"
    if view.stopped:
        return f"<p><strong>No answer yet</strong>: {esc(view.stopped)}.</p>"
    return "<p>No answer yet: the bisection has not finished.</p>"


def chart(view: BisectionView) -> str:
    measured = [p for p in view.points if p.relative_to_good is not None]
    if not measured:
        return "<p>No commit measured yet.</p>"
    values = [p.relative_to_good for p in measured if p.relative_to_good is not None]
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0
    last = max(view.commits - 1, 1)

    def x(position: int) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * position / last

    def y(value: float) -> float:
        return HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * (value - low) / span

    parts = [
        f'<line x1="{MARGIN}" y1="{y(0):.1f}" x2="{WIDTH - MARGIN}" y2="{y(0):.1f}" '
        'stroke="#d8dde6"/>',
        f'<text x="4" y="{y(high) + 4:.1f}" font-size="11">{high:+.0%}</text>',
        f'<text x="4" y="{y(low) + 4:.1f}" font-size="11">{low:+.0%}</text>',
        f'<text x="{MARGIN}" y="{HEIGHT - 8}" font-size="11">good</text>',
        f'<text x="{WIDTH - MARGIN - 20}" y="{HEIGHT - 8}" font-size="11">bad</text>',
    ]
    for point in view.points:
        parts.append(_mark(point, x(point.position), y))
    return (
        f'<svg class="bisect-chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="figure along the commits">'
        f"{''.join(parts)}</svg>"
    )


def _mark(point: BisectPoint, x: float, y: Callable[[float], float]) -> str:
    title = f"<title>{esc(point.commit[:10])} {esc(point.subject)}: {esc(point.outcome)}</title>"
    if point.relative_to_good is None:
        base = HEIGHT - MARGIN
        return (
            f'<path d="M{x - 5:.1f},{base + 6} L{x + 5:.1f},{base - 4} M{x - 5:.1f},{base - 4} '
            f'L{x + 5:.1f},{base + 6}" stroke="#5b6472" stroke-width="2">{title}</path>'
        )
    colour = COLOURS.get(point.outcome, "#1d2430")
    return (
        f'<circle cx="{x:.1f}" cy="{y(point.relative_to_good):.1f}" r="5" fill="{colour}">'
        f"{title}</circle>"
    )


def _steps(view: BisectionView) -> str:
    rows = "".join(
        f"<tr><td><code>{esc(p.commit[:10])}</code></td><td>{esc(p.subject)}</td>"
        f'<td class="num">{p.position}</td><td>{esc(p.outcome)}</td>'
        f'<td class="num">{"–" if p.relative_to_good is None else f"{p.relative_to_good:+.1%}"}'
        f"</td><td>{esc(p.detail)}</td></tr>"
        for p in view.points
    )
    return (
        "<table><thead><tr><th>commit</th><th>subject</th><th>position</th><th>like</th>"
        f"<th>vs good</th><th>evidence</th></tr></thead><tbody>{rows}</tbody></table>"
    )
