"""`repeats = "auto"`: the campaign adds rounds until its answers are decided.

Syntax, in `[campaign]`: `repeats = "auto"` with optional `min_repeats` (3), `max_repeats` (20)
and `precision` ("10%"). The word keeps `repeats` one value, a number or "auto", as the
README shows it; the three knobs have defaults, so `repeats = "auto"` alone is a complete
answer, and they are refused next to a number rather than silently ignored.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from pgbenchlab.analysis.comparison import DEFAULT_RESOLUTION, DEFAULT_THRESHOLD
from pgbenchlab.analysis.multiplicity import DEFAULT_CORRECTION, Correction
from pgbenchlab.errors import PlanError
from pgbenchlab.plan.values import Context, positive_int

AUTO_KEYS = ("min_repeats", "max_repeats", "precision")
DEFAULT_MIN_REPEATS = 3
DEFAULT_MAX_REPEATS = 20


@dataclass(frozen=True)
class AutoRepeats:
    """Rounds from ``min_repeats`` up to ``max_repeats``; an interval is answered once within
    ±``precision``, a change once beyond ±``threshold``."""

    min_repeats: int = DEFAULT_MIN_REPEATS
    max_repeats: int = DEFAULT_MAX_REPEATS
    precision: float = DEFAULT_RESOLUTION
    threshold: float = DEFAULT_THRESHOLD
    decide: tuple[str, ...] = ("tps",)  # the metrics every answer needs (`store.metrics`)
    equivalence: float | None = None  # a comparison also closes once shown within ±this


@dataclass(frozen=True)
class Verdicts:
    """How the plan's comparisons are judged, in `[campaign]`: `decide` (the metrics an answer
    of `repeats = "auto"` needs, names checked against the store's registry before a run),
    `equivalence` (a margin such as "1%": a comparison is also answered once shown within it,
    and the report says so) and `correction` (holm or bh: how many cells' verdicts are
    adjusted)."""

    decide: tuple[str, ...] = ("tps",)
    equivalence: float | None = None
    correction: Correction = DEFAULT_CORRECTION


def stored_verdicts(plan_text: str) -> Verdicts:
    """A stored plan's verdict rules (the defaults when its text no longer parses: a report
    reads plans written by older versions too)."""
    try:
        campaign = tomllib.loads(plan_text).get("campaign", {})
        return parse_verdicts(campaign if isinstance(campaign, dict) else {}, Context("plan"))
    except (tomllib.TOMLDecodeError, PlanError):
        return Verdicts()


def parse_verdicts(campaign: dict[str, Any], ctx: Context) -> Verdicts:
    decide = campaign.get("decide", ["tps"])
    if isinstance(decide, str):
        decide = [decide]
    if not decide or not all(isinstance(d, str) and d.strip() for d in decide):
        raise ctx.fail("campaign.decide", f'give metric names such as ["tps"]; got {decide!r}')
    margin = campaign.get("equivalence")
    equivalence = None if margin is None else parse_share(margin, ctx, "campaign.equivalence")
    correction = str(campaign.get("correction", DEFAULT_CORRECTION.value))
    if correction not in {c.value for c in Correction}:
        raise ctx.fail("campaign.correction", f"holm or bh; got {correction!r}")
    return Verdicts(tuple(d.strip() for d in decide), equivalence, Correction(correction))


def parse_repeats(campaign: dict[str, Any], ctx: Context) -> tuple[int, AutoRepeats | None]:
    """The campaign's repeats (the first rounds, for auto its minimum) and the auto rule."""
    value = campaign.get("repeats", 1)
    given = [k for k in AUTO_KEYS if k in campaign]
    if value != "auto":
        given += ["decide"] if "decide" in campaign else []
        if given:
            raise ctx.fail(f"campaign.{given[0]}", 'needs repeats = "auto"')
        return positive_int(value, ctx, "campaign.repeats"), None
    low = positive_int(
        campaign.get("min_repeats", DEFAULT_MIN_REPEATS), ctx, "campaign.min_repeats"
    )
    high = positive_int(
        campaign.get("max_repeats", DEFAULT_MAX_REPEATS), ctx, "campaign.max_repeats"
    )
    if high < low:
        raise ctx.fail("campaign.max_repeats", f"{high} is below min_repeats ({low})")
    precision = parse_share(campaign.get("precision", "10%"), ctx, "campaign.precision")
    if precision <= DEFAULT_THRESHOLD:
        raise ctx.fail(
            "campaign.precision",
            f"must be wider than the {DEFAULT_THRESHOLD:.0%} threshold under which a change is "
            "noise; got " + f"{precision:.1%}",
        )
    verdicts = parse_verdicts(campaign, ctx)
    return low, AutoRepeats(
        low, high, precision, decide=verdicts.decide, equivalence=verdicts.equivalence
    )


def parse_share(value: Any, ctx: Context, key: str) -> float:
    """ "2%" or 0.02: a share between 0 and 1."""
    text = str(value).strip()
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ctx.fail(key, f'give a share such as "5%" or 0.05; got {value!r}') from None
    if isinstance(value, bool) or not 0 < share < 1:
        raise ctx.fail(key, f"must be between 0 and 100 %; got {value!r}")
    return share
