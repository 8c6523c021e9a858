"""How much of the per-transaction log the runner asks pgbench for."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign.measure import LOG_LINES_PER_SECOND, sampling_rate


def spec(options: str = "") -> plan.RunSpec:
    text = f"""
[defaults]
duration = "10s"
{options}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [4]
"""
    return plan.parse(text, "sampling.toml", base=Path(".")).specs[0]


@pytest.mark.parametrize("warmup_tps", [None, 100.0, float(LOG_LINES_PER_SECOND)])
def test_auto_logs_every_transaction_within_the_budget(warmup_tps: float | None) -> None:
    assert sampling_rate(spec(), warmup_tps) == 1.0


@pytest.mark.parametrize("warmup_tps", [6_000.0, 65_000.0, 1e6])
def test_auto_samples_down_to_the_budget_above_it(warmup_tps: float) -> None:
    rate = sampling_rate(spec(), warmup_tps)
    assert rate is not None and rate < 1.0
    lines_per_second = rate * warmup_tps
    assert lines_per_second == pytest.approx(LOG_LINES_PER_SECOND, rel=0.05)


def test_a_target_rate_sets_the_sampling_before_any_warmup() -> None:
    rate = sampling_rate(spec("rate = 20000\n"), warmup_tps=None)
    assert rate == pytest.approx(LOG_LINES_PER_SECOND / 20_000, rel=0.05)


@pytest.mark.parametrize(("mode", "expected"), [("full", 1.0), ("off", None), ("0.25", 0.25)])
def test_an_explicit_latency_log_wins(mode: str, expected: float | None) -> None:
    option = f'latency_log = "{mode}"\n' if mode != "0.25" else "latency_log = 0.25\n"
    assert sampling_rate(spec(option), warmup_tps=65_000.0) == expected
