"""`repeats = "auto"` deciding on the plan's metrics (`decide`) and stopping on an equivalence
(`equivalence`), through the executor seam (tests/replay.py): TPS and the latency average drawn
per server from seeded noise."""

from __future__ import annotations

import math
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab.campaign.rounds import Question, answer, answer_all
from pgbenchlab.errors import NotReady, PlanError
from pgbenchlab.invocation.command import Call, Completed
from pgbenchlab.plan import AutoRepeats
from test_auto_repeats import NoisyServers, parse, rounds_run, run

PLAN_WORDS = 'repeats = "auto"'


class TwoMetrics(NoisyServers):
    """TPS as NoisyServers draws it, and pgbench's latency average per server: a level
    times its own seeded noise."""

    def __init__(self, tps: dict[str, float], latency_ms: dict[str, float], noise: float) -> None:
        super().__init__(tps, 0.01)
        self.latency_ms, self.latency_noise = latency_ms, noise
        self.latency_rng = random.Random(5)

    def pgbench(self, call: Call) -> Completed:
        latency = self.latency_ms[call.argv[-1]]
        latency *= math.exp(self.latency_rng.gauss(0, self.latency_noise))
        completed = super().pgbench(call)
        stdout = re.sub(r"latency average = [\d.]+", f"latency average = {latency:.4f}",
                        completed.stdout)  # fmt: skip
        return replace(completed, stdout=stdout)


def test_a_non_tps_metric_named_in_decide_keeps_the_rounds_going(tmp_path: Path) -> None:
    """TPS differs clearly (decided at the minimum), the latency average is as noisy as 8 %:
    with decide = ["tps"] the campaign stops at round 3, with the latency average it goes on."""
    levels, latency = {"a": 1000.0, "b": 700.0}, {"a": 1.0, "b": 1.0}
    tps_only = tmp_path / "tps"
    tps_only.mkdir()
    outcome, _ = run(tps_only, TwoMetrics(levels, latency, 0.08), 'decide = ["tps"]')
    assert max(r for _, r in rounds_run(tps_only)) == 3, outcome.answers
    both = tmp_path / "both"
    both.mkdir()
    outcome, _ = run(both, TwoMetrics(levels, latency, 0.08), 'decide = ["tps", "latency_avg"]')
    assert max(r for _, r in rounds_run(both)) > 3, outcome.answers
    assert any("latency_avg" in line for line in outcome.answers), outcome.answers


def test_an_equivalence_margin_closes_identical_servers_sooner(tmp_path: Path) -> None:
    """Identical servers at 1 % noise: within noise needs the 95 % sequence inside ±3 %; an
    equivalence within ±5 % needs its 90 % sequence inside ±5 %, reached rounds earlier."""
    levels, latency = {"a": 1000.0, "b": 1000.0}, {"a": 1.0, "b": 1.0}
    plain, margin = tmp_path / "plain", tmp_path / "margin"
    plain.mkdir()
    margin.mkdir()
    run(plain, TwoMetrics(levels, latency, 0.01), 'precision = "3%"')
    outcome, _ = run(
        margin, TwoMetrics(levels, latency, 0.01), 'precision = "3%"\nequivalence = "5%"'
    )
    without = max(r for _, r in rounds_run(plain))
    with_margin = max(r for _, r in rounds_run(margin))
    assert with_margin < without, (with_margin, without)
    assert "every answer decided" in outcome.answers[0]


def test_decide_and_equivalence_are_parsed_and_checked(tmp_path: Path) -> None:
    from test_auto_repeats import PLAN

    found = parse(tmp_path, PLAN.format(auto='decide = ["tps", "p99"]\nequivalence = "1%"'))
    assert found.auto is not None
    assert found.auto.decide == ("tps", "p99") and found.auto.equivalence == 0.01
    assert found.verdicts.correction == "holm"
    bh = parse(tmp_path, PLAN.format(auto='correction = "bh"'))
    assert bh.verdicts.correction == "bh"
    with pytest.raises(PlanError, match=r"campaign\.correction"):
        parse(tmp_path, PLAN.format(auto='correction = "bonferroni"'))
    with pytest.raises(PlanError, match=r"campaign\.equivalence"):
        parse(tmp_path, PLAN.format(auto='equivalence = "lots"'))
    fixed = PLAN.format(auto='decide = ["tps"]').replace(PLAN_WORDS, "repeats = 2")
    with pytest.raises(PlanError, match=r"campaign\.decide"):
        parse(tmp_path, fixed)


def test_a_metric_decide_does_not_know_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from pgbenchlab.campaign.preflight import check_before_start
    from test_auto_repeats import PLAN

    found = parse(tmp_path, PLAN.format(auto='decide = ["tps", "cpu_per_lunch"]'))
    with pytest.raises(NotReady, match="decide names 'cpu_per_lunch', not a metric"):
        check_before_start(found)


def test_every_metric_must_be_decided_for_an_answer() -> None:
    question = Question("b against server=a", ("a", "b"))
    tps = {"a": {1: 1000.0, 2: 1010, 3: 990}, "b": {1: 700.0, 2: 707, 3: 693}}
    latency = {"a": {1: 1.0, 2: 1.3, 3: 0.8}, "b": {1: 1.1, 2: 0.8, 3: 1.2}}
    auto = AutoRepeats(decide=("tps", "latency_avg"))
    assert answer(question, tps, auto, math.inf).decided
    assert not answer(question, latency, auto, math.inf, "latency_avg").decided
    both = answer_all(question, {"tps": tps, "latency_avg": latency}, auto, math.inf)
    assert not both.decided
    assert both.text.startswith("TPS regressed") and "latency_avg" in both.text


def test_decide_takes_a_columns_name_too(tmp_path: Path) -> None:
    """decide = ["latency_avg_ms"] is the metric latency_avg: a clear change on both metrics
    is decided at the minimum."""
    levels, latency = {"a": 1000.0, "b": 700.0}, {"a": 1.0, "b": 1.5}
    executor = TwoMetrics(levels, latency, 0.02)
    outcome, _ = run(tmp_path, executor, 'decide = ["tps", "latency_avg_ms"]')
    assert "every answer decided" in outcome.answers[0], outcome.answers
    assert max(r for _, r in rounds_run(tmp_path)) == 3
