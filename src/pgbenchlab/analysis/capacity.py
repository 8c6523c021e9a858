"""The capacity search as a pure decision: the probes so far → the next probe, or the answer.

1. **start**: a short closed-loop run (no -R); its TPS ``T`` is near the most the server does.
2. **grow**: open-loop trials from ``start_fraction × T``, the rate × ``growth`` after each pass
   (÷ ``growth`` after a fail while nothing passed), until a pass and a fail bracket the answer.
3. **bisect**: short trials at the geometric middle of (highest pass, lowest fail above it) until
   lowest fail ÷ highest pass ≤ 1 + ``tolerance``.
4. **confirm**: full-length runs at the highest pass; ``required`` of ``confirmations`` must pass
   (stopping as soon as that is decided). When they fail, that rate is a fail and the search
   steps down: it confirms at ``step_down`` × the rate, at most ``attempts`` rates in all.

The answer is the confirmed rate with its bracket: itself (the highest pass) and the lowest
rate that failed. Probes, at most (`SearchSettings.max_probes`): 1 start + ``max_grow`` grow
trials + the bisections one grow step needs + ``attempts`` × ``confirmations``; with the
defaults 1 + 7 + 4 + 4 × 3 = 24. A search whose first confirmation passes takes about 10:
1 + 2 to 3 + 4 + 2 to 3.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

START, GROW, BISECT, CONFIRM = "start", "grow", "bisect", "confirm"
ROLES = (START, GROW, BISECT, CONFIRM)
IDENTITY_PREFIX = "# pgbenchlab capacity "
# How probes are judged, in the search's identity: 1, searches stored before the identity said
# (skipped transactions left out of the latency percentiles: a probe could pass with them);
# then each version's change below. Another number is another campaign: a search judged one
# way is never continued the other way.
RULES_CHANGES = {
    2: "every latency bound counts a skipped transaction as over it",
    3: "every latency bound counts a failed transaction as over it too",
}
VERDICT_RULES = max(RULES_CHANGES)


def rules_since(version: int) -> str:
    """What changed in the verdict rules since that version, in one phrase."""
    return "; ".join(text for v, text in sorted(RULES_CHANGES.items()) if v > version)


@dataclass(frozen=True)
class SearchSettings:
    tolerance: float = 0.05  # the bracket's relative width where bisection stops
    growth: float = 2.0  # the grow step's factor
    start_fraction: float = 0.5  # the first trial's rate, as a share of the start run's TPS
    confirmations: int = 3  # n full-length runs at the found rate ...
    required: int = 2  # ... of which k must pass
    max_grow: int = 7  # grow trials at most (up and down)
    attempts: int = 4  # confirmations of different rates at most
    step_down: float = 0.85  # after a failed confirmation, confirm at this share of its rate
    min_rate: float = 1.0  # below this no rate meets the SLO

    @property
    def bisections(self) -> int:
        """Bisections that shrink one grow step to the tolerance (geometric middles)."""
        halvings = math.log(math.log(self.growth) / math.log1p(self.tolerance), 2)
        return max(0, math.ceil(halvings))

    @property
    def max_probes(self) -> int:
        return 1 + self.max_grow + self.bisections + self.attempts * self.confirmations


@dataclass(frozen=True)
class SearchIdentity:
    """The SLO and the search's settings, as the capacity campaign's stored plan carries them
    on its last line: a changed SLO or search is a changed campaign, and views read them back."""

    slo: str
    trial_s: int
    settings: SearchSettings
    verdict_rules: int = VERDICT_RULES

    @property
    def line(self) -> str:
        fields = {"slo": self.slo, "trial_s": self.trial_s, **asdict(self.settings)}
        return IDENTITY_PREFIX + json.dumps(
            fields | {"verdict_rules": self.verdict_rules}, sort_keys=True
        )

    @classmethod
    def read(cls, plan_text: str) -> SearchIdentity | None:
        lines = [line for line in plan_text.splitlines() if line.startswith(IDENTITY_PREFIX)]
        if not lines:
            return None
        try:
            fields = json.loads(lines[-1].removeprefix(IDENTITY_PREFIX))
            slo, trial_s = fields.pop("slo"), fields.pop("trial_s")
            rules = int(fields.pop("verdict_rules", 1))
            return cls(str(slo), int(trial_s), SearchSettings(**fields), rules)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None  # a comment of the user's that only looks like ours


@dataclass(frozen=True)
class CapacityProbe:
    """One stored probe: its role, its offered rate (None for the closed-loop start), whether
    it met the SLO, and the start run's TPS."""

    role: str
    rate: float | None
    passed: bool
    tps: float | None = None


@dataclass(frozen=True)
class Next:
    role: str
    rate: float | None  # None: closed loop
    full_length: bool  # confirmations run the plan's duration; the others a short trial


@dataclass(frozen=True)
class CapacityAnswer:
    """The search's result: the confirmed rate (None when none was), its bracket."""

    rate: float | None
    highest_pass: float | None
    lowest_fail: float | None
    reason: str


def decide(probes: Sequence[CapacityProbe], settings: SearchSettings) -> Next | CapacityAnswer:
    """What to run next given every probe so far (in order), or the answer."""
    if not probes:
        return Next(START, None, full_length=False)
    start_tps = probes[0].tps
    if not start_tps or start_tps <= 0:
        return CapacityAnswer(None, None, None, "the closed-loop start run gave no throughput")
    trials = [p for p in probes[1:] if p.role != CONFIRM]
    passes, fails = rate_verdicts(probes, settings)
    high = min(fails, default=None)
    low = max((r for r in passes if high is None or r < high), default=None)
    last = _last_confirmation(probes, settings)
    if last is not None:
        return _after_confirmation(*last, probes, high, settings)
    if low is None or high is None:
        grows = sum(p.role == GROW for p in trials)
        return _grow(trials, low, high, start_tps, grows, settings)
    middle = _round(math.sqrt(low * high))
    if high / low > 1 + settings.tolerance and low < middle < high:
        return Next(BISECT, middle, full_length=False)
    return Next(CONFIRM, low, full_length=True)


def _after_confirmation(
    rate: float,
    outcome: bool | None,
    probes: Sequence[CapacityProbe],
    high: float | None,
    settings: SearchSettings,
) -> Next | CapacityAnswer:
    if outcome is None:
        return Next(CONFIRM, rate, full_length=True)
    if outcome:
        done = f"{settings.required} of {settings.confirmations} full-length runs passed"
        return CapacityAnswer(rate, rate, high, done)
    lower = _round(rate * settings.step_down)
    if len(_confirmations(probes)) >= settings.attempts or lower < settings.min_rate:
        tries = len(_confirmations(probes))
        return CapacityAnswer(None, None, high, f"no rate passed its confirmation in {tries} tries")
    return Next(CONFIRM, lower, full_length=True)


def _grow(
    trials: list[CapacityProbe],
    low: float | None,
    high: float | None,
    start_tps: float,
    grows: int,
    settings: SearchSettings,
) -> Next | CapacityAnswer:
    if low is None and high is not None and high / settings.growth < settings.min_rate:
        return CapacityAnswer(None, None, high, f"no rate from {settings.min_rate:g}/s met the SLO")
    if grows >= settings.max_grow:
        if low is None:
            return CapacityAnswer(None, None, high, "no rate tried met the SLO")
        return Next(CONFIRM, low, full_length=True)  # above every rate tried: confirm the top
    if not trials:
        return Next(GROW, _round(settings.start_fraction * start_tps), full_length=False)
    rate = low * settings.growth if low is not None else (high or start_tps) / settings.growth
    return Next(GROW, _round(rate), full_length=False)


def rate_verdicts(
    probes: Sequence[CapacityProbe], settings: SearchSettings
) -> tuple[set[float], set[float]]:
    """The rates that passed and failed: a rate's confirmations, once decided, overrule its
    trials; a trial fail overrules a trial pass at the same rate."""
    passes: set[float] = set()
    fails: set[float] = set()
    for probe in probes:
        if probe.rate is not None and probe.role != CONFIRM:
            (passes if probe.passed else fails).add(probe.rate)
    passes -= fails
    for rate, results in _confirmations(probes).items():
        outcome = _outcome(results, settings)
        if outcome is not None:
            passes.discard(rate)
            fails.discard(rate)
            (passes if outcome else fails).add(rate)
    return passes, fails


def _confirmations(probes: Sequence[CapacityProbe]) -> dict[float, list[bool]]:
    """Each confirmed rate's results, in the order of the confirmation attempts."""
    runs: dict[float, list[bool]] = {}
    for probe in probes:
        if probe.role == CONFIRM and probe.rate is not None:
            runs.setdefault(probe.rate, []).append(probe.passed)
    return runs


def _outcome(results: list[bool], settings: SearchSettings) -> bool | None:
    """True once k passed, False once more than n − k failed, None while undecided."""
    passed = sum(results)
    if passed >= settings.required:
        return True
    if len(results) - passed > settings.confirmations - settings.required:
        return False
    return None


def _last_confirmation(
    probes: Sequence[CapacityProbe], settings: SearchSettings
) -> tuple[float, bool | None] | None:
    """The rate of the latest confirmation attempt and its outcome so far."""
    runs = _confirmations(probes)
    if not runs:
        return None
    rate = list(runs)[-1]
    return rate, _outcome(runs[rate], settings)


def _round(rate: float) -> float:
    """Rates as pgbench takes them and people read them: three significant digits."""
    return float(f"{rate:.3g}") if rate >= 100 else round(rate, 1)
