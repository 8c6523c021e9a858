"""Equivalence (two one-sided tests), its error rates under peeking, the adjustment of many
cells' verdicts, and the margin against a build-to-build floor: pure functions, fixed seeds
(docs/statistics.md §7 and §8 give the numbers these tests keep)."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace

import pytest

from pgbenchlab.analysis.comparison import ComparisonVerdict, compare
from pgbenchlab.analysis.equivalence import (
    EquivalenceVerdict,
    floor_note,
    sequential_tost,
    tost,
)
from pgbenchlab.analysis.multiplicity import Correction, adjusted
from pgbenchlab.errors import UserError


def lognormal(rng: random.Random, n: int, level: float, cv: float) -> list[float]:
    return [level * math.exp(rng.gauss(0, cv)) for _ in range(n)]


def test_tight_identical_runs_are_equivalent_and_a_3_percent_change_is_not() -> None:
    rng = random.Random(1)
    base = lognormal(rng, 8, 100_000, 0.002)
    same = tost(base, lognormal(rng, 8, 100_000, 0.002), margin=0.01)
    assert same.verdict is EquivalenceVerdict.EQUIVALENT, same.text()
    assert same.ci_low is not None and same.ci_high is not None
    assert -0.01 < same.ci_low < same.ci_high < 0.01
    assert same.p_value is not None and same.p_value < 0.05
    assert same.text().startswith("equivalent within ±1%")
    changed = tost(base, lognormal(rng, 8, 103_000, 0.002), margin=0.01)
    assert changed.verdict is EquivalenceVerdict.NOT_EQUIVALENT, changed.text()
    assert changed.p_beyond is not None and changed.p_beyond < 0.05


def test_an_open_answer_says_how_many_more_runs_would_decide_it() -> None:
    rng = random.Random(2)
    base, cand = lognormal(rng, 4, 1000, 0.03), lognormal(rng, 4, 1000, 0.03)
    found = tost(base, cand, margin=0.01)
    assert found.verdict is EquivalenceVerdict.NOT_DECIDED
    assert found.more is not None and found.more > 4
    assert f"about {found.more} more runs per side" in found.text("runs per side")
    # If the estimate and the noise hold, that many runs decide it most of the time.
    logs = [math.log(v) for v in base], [math.log(v) for v in cand]
    sd = math.sqrt(sum(statistics.variance(x) for x in logs) / 2)
    n, wins = 4 + found.more, 0
    for seed in range(200):
        again = random.Random(seed)
        one = lognormal(again, n, 1000, sd)
        two = lognormal(again, n, 1000 * (1 + found.relative_change), sd)
        wins += tost(one, two, margin=0.01).decided
    assert wins >= 0.7 * 200, wins


def test_swapping_sides_mirrors_the_interval_and_keeps_the_verdict() -> None:
    rng = random.Random(3)
    base, cand = lognormal(rng, 6, 50, 0.004), lognormal(rng, 6, 50.2, 0.004)
    one, two = tost(base, cand, margin=0.02), tost(cand, base, margin=0.02)
    assert one.verdict is two.verdict
    assert one.ci_low is not None and two.ci_high is not None
    assert math.log1p(one.ci_low) == pytest.approx(-math.log1p(two.ci_high))


def peeking(change: float, cv: float, margin: float, rounds: int, seed: int, cells: int) -> dict:
    """Paired rounds (drift shared by both sides) looked at after every round from the 3rd,
    stopping at the first equivalence verdict: the share of each verdict."""
    rng = random.Random(seed)
    calls = dict.fromkeys(EquivalenceVerdict, 0)
    for _ in range(cells):
        pairs: list[tuple[float, float]] = []
        verdict = EquivalenceVerdict.NOT_DECIDED
        for r in range(1, rounds + 1):
            drift = rng.gauss(0, 0.05)
            base = math.exp(drift + rng.gauss(0, cv))
            pairs.append((base, (1 + change) * math.exp(drift + rng.gauss(0, cv))))
            if r >= 3 and (found := sequential_tost(pairs, margin=margin)).decided:
                verdict = found.verdict
                break
        calls[verdict] += 1
    return {v: n / cells for v, n in calls.items()}


def test_identical_configurations_are_called_equivalent_under_peeking() -> None:
    shares = peeking(0.0, 0.005, 0.01, rounds=40, seed=11, cells=1000)
    assert shares[EquivalenceVerdict.EQUIVALENT] >= 0.95, shares


def test_a_3_percent_change_is_rarely_called_equivalent_within_1_percent() -> None:
    shares = peeking(0.03, 0.01, 0.01, rounds=40, seed=12, cells=1000)
    assert shares[EquivalenceVerdict.EQUIVALENT] <= 0.05, shares
    assert shares[EquivalenceVerdict.NOT_EQUIVALENT] >= 0.95, shares


def test_a_change_on_the_margin_is_called_equivalent_at_most_at_the_nominal_rate() -> None:
    shares = peeking(0.01, 0.005, 0.01, rounds=60, seed=13, cells=600)
    assert shares[EquivalenceVerdict.EQUIVALENT] <= 0.05, shares


def test_holm_and_benjamini_hochberg_match_the_published_adjustments() -> None:
    p = [0.01, 0.04, 0.03, 0.005]  # R: p.adjust(p, "holm") and p.adjust(p, "BH")
    assert adjusted(p, Correction.HOLM) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjusted(p, Correction.BH) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjusted([], Correction.HOLM) == []


def test_holm_keeps_false_calls_across_twenty_identical_cells_rare() -> None:
    """20 A/A cells of 5 runs at CV 6 % (no threshold band, pure significance): alone, a
    campaign calls some cell changed most of the time; Holm keeps it near 5 %."""
    rng = random.Random(21)
    campaigns, alone, held = 300, 0, 0
    for _ in range(campaigns):
        found = [
            compare(
                lognormal(rng, 5, 1, 0.06),
                lognormal(rng, 5, 1, 0.06),
                higher_is_better=True,
                threshold=0.0,
            )
            for _ in range(20)
        ]
        changed = [c.verdict in (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED)
                   for c in found]  # fmt: skip
        alone += any(changed)
        p = adjusted([c.p_value or 1.0 for c in found], Correction.HOLM)
        held += any(ok and q < 0.05 for ok, q in zip(changed, p, strict=True))
    assert alone / campaigns > 0.4, alone
    assert held / campaigns <= 0.07, held


def test_a_margin_below_the_build_floor_is_refused_in_one_line() -> None:
    with pytest.raises(UserError, match=r"below the build-to-build floor of ±1\.3%") as raised:
        floor_note(0.01, 0.013, "tps")
    assert "\n" not in str(raised.value)
    assert "floor of ±1.3%" in floor_note(0.02, 0.013, "tps")
    assert "no build-to-build floor was measured" in floor_note(0.01, None, "tps")


def test_a_p_value_of_zero_survives_the_adjustment() -> None:
    """Runs without spread that differ (counted instructions, say) give p = 0: a call that no
    adjustment may undo."""
    from pgbenchlab.report.views.compare import CellChange, CompareRules, corrected

    exact = CellChange("all", "tps", 3, 3, 100.0, 90.0, -0.1, -0.1, -0.1, 0.0,
                       ComparisonVerdict.REGRESSED, None, "-10%")  # fmt: skip
    others = [replace(exact, cell=f"c{i}", p_value=0.5, verdict=ComparisonVerdict.NOT_ENOUGH_DATA)
              for i in range(5)]  # fmt: skip
    found = corrected([exact, *others], CompareRules())
    assert found[0].verdict is ComparisonVerdict.REGRESSED and found[0].adjusted_p == 0.0
