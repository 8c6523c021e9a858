"""The capacity search's decision function against synthetic oracles, and the SLO's parser and
verdicts: pure, no server."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import replace

import pytest

from pgbenchlab.analysis.capacity import (
    CONFIRM,
    GROW,
    START,
    VERDICT_RULES,
    CapacityAnswer,
    CapacityProbe,
    SearchIdentity,
    SearchSettings,
    decide,
)
from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.analysis.slo import RunFigures, SloError, backlog_growth, judge, parse_slo
from pgbenchlab.campaign.resume import plan_difference

Oracle = Callable[[float, bool], bool]  # (rate, full length) → passed


def search(
    start_tps: float, oracle: Oracle, settings: SearchSettings
) -> tuple[CapacityAnswer, list[CapacityProbe]]:
    probes: list[CapacityProbe] = []
    while True:
        step = decide(probes, settings)
        if isinstance(step, CapacityAnswer):
            return step, probes
        assert len(probes) < settings.max_probes, probes
        if step.role == START:
            probes.append(CapacityProbe(START, None, True, start_tps))
        else:
            assert step.rate is not None
            assert step.full_length == (step.role == CONFIRM)
            probes.append(CapacityProbe(step.role, step.rate, oracle(step.rate, step.full_length)))


def threshold(truth: float) -> Oracle:
    return lambda rate, _full: rate <= truth


def test_the_documented_bound() -> None:
    settings = SearchSettings()
    assert settings.bisections == 4
    assert settings.max_probes == 24


@pytest.mark.parametrize("truth", [3.7, 95.0, 180.0, 1234.0, 52_000.0])
@pytest.mark.parametrize("start_tps", [60.0, 400.0, 9000.0])
def test_the_bracket_holds_the_truth(truth: float, start_tps: float) -> None:
    settings = SearchSettings()
    answer, probes = search(start_tps, threshold(truth), settings)
    if truth * 64 < start_tps / 2 or truth > start_tps / 2 * 64:
        return  # out of the grow range: the search says so (next test)
    assert answer.rate is not None, answer
    assert answer.highest_pass is not None and answer.lowest_fail is not None
    assert answer.rate <= truth < answer.lowest_fail
    assert answer.lowest_fail / answer.highest_pass <= 1 + settings.tolerance
    assert len(probes) <= settings.max_probes
    assert sum(p.role == CONFIRM for p in probes) == settings.required  # all passed: stop at k


def test_nothing_meets_the_slo() -> None:
    settings = SearchSettings()
    answer, probes = search(1000.0, lambda _r, _f: False, settings)
    assert answer.rate is None and answer.highest_pass is None
    assert len(probes) <= settings.max_probes


def test_everything_meets_the_slo_up_to_the_grow_limit() -> None:
    settings = SearchSettings()
    answer, probes = search(100.0, lambda _r, _f: True, settings)
    assert answer.rate == max(p.rate or 0 for p in probes)
    assert answer.lowest_fail is None
    assert sum(p.role == GROW for p in probes) == settings.max_grow


def test_a_failed_confirmation_steps_down() -> None:
    """Short trials pass up to 200, full-length runs only up to 150: the confirmations at the
    trials' answer fail, and the search steps down until a confirmation passes."""
    settings = SearchSettings()
    answer, probes = search(400.0, lambda r, full: r <= (150 if full else 200), settings)
    assert answer.rate is not None and answer.rate <= 150
    assert answer.lowest_fail is not None and answer.lowest_fail > 150
    confirmed = [p.rate for p in probes if p.role == CONFIRM]
    assert len(set(confirmed)) >= 2 and confirmed == sorted(confirmed, reverse=True)
    assert len(probes) <= settings.max_probes


@pytest.mark.parametrize("seed", range(20))
def test_noisy_oracles_stay_within_the_bound(seed: int) -> None:
    """Near the truth a trial's verdict is a coin toss: the search still ends within its
    documented number of probes, never confirming a rate far above the truth."""
    rng = random.Random(seed)
    truth = 200.0

    def noisy(rate: float, _full: bool) -> bool:
        if abs(rate / truth - 1) < 0.1:
            return rng.random() < 0.5
        return rate < truth

    settings = SearchSettings()
    answer, probes = search(350.0, noisy, settings)
    assert len(probes) <= settings.max_probes
    if answer.rate is not None:
        assert answer.rate <= truth * 1.1


def test_resuming_is_deciding_again() -> None:
    """The decision reads only the stored probes: cut anywhere, it continues the same way."""
    settings = SearchSettings()
    _, probes = search(400.0, threshold(180.0), settings)
    for cut in range(len(probes)):
        step = decide(probes[:cut], settings)
        assert not isinstance(step, CapacityAnswer)
        assert (step.role, step.rate) == (probes[cut].role, probes[cut].rate)


# The SLO ---------------------------------------------------------------------------------------


def test_the_slo_parses_metrics_units_and_shares() -> None:
    slo = parse_slo("p99 <= 10ms, late <= 1%, skipped <= 0.1%, p99.9 < 0.05s, mean <= 800us")
    assert [(b.metric, b.limit) for b in slo.bounds] == [
        ("p99", 10.0),
        ("late", 0.01),
        ("skipped", 0.001),
        ("p99.9", 50.0),
        ("mean", 0.8),
    ]
    assert slo.latency_bound_ms == 50.0
    assert parse_slo(slo.text) == slo
    assert parse_slo("p50 <= 1us, p99 <= 1234.567ms, p90 <= 3600s").text == (
        "p50 <= 0.001ms, p99 <= 1234.567ms, p90 <= 3600000ms"
    )  # whole microseconds, written back exactly


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # A share needs its % sign: "late <= 1" read as a fraction was 100 %.
        ("late <= 1", "'late <= 1': a share needs its % sign: write late <= 1%"),
        ("skipped <= 0.01", "write skipped <= 0.01%"),
        # One spelling per percentile.
        ("p999 <= 10ms", "unknown metric 'p999': write p99.9"),
        # Below what pgbench measures (-L and the log: whole microseconds) is no limit to it.
        ("p99 <= 0.0001ms", "finer than pgbench measures (whole microseconds:"),
        ("p99 <= 0.5us", "finer than pgbench measures"),
        ("p99 <= 1.5us", "finer than pgbench measures"),
        ("p99 <= 0ms", "must be above 0"),
        ("late <= 0%", "must be above 0"),
        # Absurd bounds.
        ("p99 <= 100000000000000000000000000000000ms", "over an hour"),
        ("p99 <= 1e32ms", "not a number with a unit"),
        ("p99 <= 2h", "not a number with a unit"),
        ("late <= 101%", "at most 100%"),
    ],
)
def test_the_slo_grammar_is_strict(text: str, says: str) -> None:
    with pytest.raises(SloError, match=re.escape(says)) as caught:
        parse_slo(text)
    assert "\n" not in str(caught.value)


def test_a_stored_slo_of_an_older_search_still_reads() -> None:
    """Older searches stored what they were given: p999, a share below resolution."""
    old = parse_slo("p999 <= 10ms, p50 <= 0.0001ms", stored=True)
    assert [(b.metric, b.limit) for b in old.bounds] == [("p99.9", 10.0), ("p50", 0.0001)]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("p99 10ms", "cannot read"),
        ("p98 <= 10ms", "unknown metric 'p98'"),
        ("tps >= 100", "cannot read"),
        ("p99 <= 10", "time unit"),
        ("late <= 5", "% sign"),
        ("late <= 200%", "at most 100%"),
        ("p99 <= 10ms, p99 <= 5ms", "twice"),
        ("p99 <= tenms", "not a number"),
    ],
)
def test_bad_slos_are_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(SloError, match=says) as caught:
        parse_slo(text)
    assert "\n" not in str(caught.value)


def figures(**overrides: object) -> RunFigures:
    values: dict[str, object] = {
        "offered": 100.0,
        "achieved": 99.0,
        "transactions": 1000,
        "skipped": 0,
        "failed": 0,
        "late": 5,
        "latency_ms": {"99": 8.0, "99.9": 12.0, "mean": 2.0},
        "latency_series_ms": [0.5, 0.4, 0.6, 0.5, 0.5, 0.4],
        "clients": 4,
    }
    return RunFigures(**(values | overrides))  # type: ignore[arg-type]


def test_verdicts() -> None:
    slo = parse_slo("p99 <= 10ms, late <= 1%, skipped <= 0.1%")
    assert judge(slo, figures()).passed
    assert "p99 11ms > 10ms" in judge(slo, figures(latency_ms={"99": 11.0})).text
    assert "late 2.00% > 1.00%" in judge(slo, figures(late=20)).text
    assert "skipped" in judge(slo, figures(skipped=5)).text
    growing = judge(slo, figures(latency_series_ms=[0.5, 20, 45, 70, 95, 120]))
    assert not growing.passed and "backlog grew" in growing.text
    assert not judge(slo, figures(ok=False, error="pgbench exited 1")).passed
    assert "clients 99% busy" in judge(slo, figures(late=50, latency_ms={"mean": 40.0})).text


def test_failed_transactions_count_as_over_every_latency_bound() -> None:
    """A transaction that failed (an error pgbench counted, its retries exhausted) has no
    latency line either, and served no one within the bound: a p99 over those that ran passes
    while 1.5 % of the scheduled failed and 0.9 % ran late."""
    ran, failed, late = 9850, 150, 90
    histogram = LatencyHistogram.from_values([10_000] * (ran - late) + [60_000] * late)
    slo = parse_slo("p99 <= 50ms")
    run = figures(
        transactions=ran, failed=failed, late=late, latency_ms={"99": 10.0, "mean": 10.5},
        histogram=histogram, latency_limit_ms=50.0,
    )  # fmt: skip
    assert judge(slo, replace(run, failed=0)).passed
    verdict = judge(slo, run)
    assert "p99 over every bound: 150 failed of 10000 scheduled transactions (1.50%)" in (
        verdict.text
    )
    # 100 of 9,995 that ran over 50 ms: p99 over the 10,000 scheduled falls among them
    over = LatencyHistogram.from_values([10_000] * 9895 + [60_000] * 100)
    both = judge(slo, replace(run, failed=3, skipped=2, transactions=9995, histogram=over))
    assert "p99 60ms > 50ms (2 skipped and 3 failed transactions counted as over)" in both.text


def test_skipped_transactions_count_as_over_every_latency_bound() -> None:
    """The stored answer of issue 27: -L at the SLO's bound, 1.61 % of scheduled transactions
    skipped (no latency line) and 0.98 % of those that ran late: p99 over those that ran passed,
    yet about 2.6 % of the scheduled transactions were over 50 ms."""
    ran, skipped, late = 9839, 161, 96
    values = [10_000] * (ran - late) + [60_000] * late  # µs: 96 over 50 ms
    histogram = LatencyHistogram.from_values(values)
    slo = parse_slo("p99 <= 50ms")
    run = figures(
        offered=14500.0, achieved=13668.0, transactions=ran, skipped=skipped, late=late,
        latency_ms={"99": 10.0, "mean": 10.5}, histogram=histogram, latency_limit_ms=50.0,
    )  # fmt: skip
    assert judge(slo, replace(run, skipped=0)).passed  # p99 of those that ran: 10 ms
    verdict = judge(slo, run)
    assert not verdict.passed
    assert "p99 over every bound: 161 skipped of 10000 scheduled transactions (1.61%)" in (
        verdict.text
    )
    # Fewer skipped: p99 over the scheduled falls among those that ran, read at its rank there.
    few = judge(slo, replace(run, skipped=5))
    assert "p99 60ms > 50ms (5 skipped transactions counted as over)" in few.text
    assert judge(slo, replace(run, skipped=2, late=5, transactions=9998,
        histogram=LatencyHistogram.from_values([10_000] * 9998))).passed  # fmt: skip
    # A mean has no value with transactions missing from it.
    assert (
        "mean unknown: 161 skipped transactions have no latency"
        in judge(parse_slo("mean <= 50ms"), run).text
    )
    # Without a histogram the rank among those that ran cannot be read: unknown, a fail.
    assert "p99 unknown" in judge(slo, replace(run, skipped=5, histogram=None)).text


def test_backlog_growth_ignores_a_stationary_queue() -> None:
    assert backlog_growth([3.0, 5.0, 2.0, 4.0, 3.0, 5.0]) is None
    assert backlog_growth([1.0, 2.0]) is None
    assert backlog_growth([1.0, 30.0, 60.0]) is not None  # 3 % behind the offered load
    assert backlog_growth([1.0, 8.0, 16.0]) is None  # under 2 %: a queue still filling
    assert backlog_growth([1.0, 30.0, 60.0], floor_ms=100) is None


def test_the_search_identity_round_trips_and_ignores_look_alikes() -> None:
    identity = SearchIdentity("p99 <= 10ms", 5, SearchSettings(tolerance=0.1))
    assert SearchIdentity.read(f"[campaign]\nname = 'x'\n{identity.line}\n") == identity
    assert identity.verdict_rules == VERDICT_RULES
    # A search stored before its identity carried the verdict rules: the first rules.
    older = identity.line.replace(f', "verdict_rules": {VERDICT_RULES}', "")
    assert "verdict_rules" not in older
    found = SearchIdentity.read(older)
    assert found is not None and found.verdict_rules == 1 and found.line != identity.line
    assert SearchIdentity.read("# pgbenchlab capacity is great\n") is None
    # Continuing a search of older rules is refused saying why, not as any changed plan.
    judged_before = identity.line.replace(
        f'"verdict_rules": {VERDICT_RULES}', f'"verdict_rules": {VERDICT_RULES - 1}'
    )
    why = plan_difference(f"x\n{judged_before}\n", f"x\n{identity.line}\n", {}, {})
    assert why == (
        f"its probes were judged by older verdict rules ({VERDICT_RULES - 1}; now "
        f"{VERDICT_RULES}: every latency bound counts a failed transaction as over it too), "
        "so a pass may hide transactions over the SLO"
    )
    assert SearchIdentity.read("[campaign]\n") is None
