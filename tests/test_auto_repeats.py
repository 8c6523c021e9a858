"""`repeats = "auto"`: the plan's syntax, the questions, and whole campaigns through the executor
seam (tests/replay.py) with pgbench's TPS drawn per server from seeded noise: rounds added only
while an answer is open, stopped by decisions, the maximum or the budget, and a resumed
campaign making the same decisions from what is stored."""

from __future__ import annotations

import math
import random
import re
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab import dataset, plan
from pgbenchlab.campaign import RESULTS_DB, Outcome
from pgbenchlab.campaign.rounds import Question, answer, open_cells, questions, round_specs
from pgbenchlab.campaign.runner import conduct
from pgbenchlab.errors import PlanError, UserError
from pgbenchlab.invocation.command import Call, Completed
from pgbenchlab.plan import AutoRepeats, DatasetOptions
from pgbenchlab.server import Server
from replay import Replay, ReplayExecutor, StandInServers, client, recorded
from support import QuietReporter

PLAN = """
[campaign]
name = "auto"
repeats = "auto"
{auto}

[defaults]
duration = "2s"
warmup = "0s"
threads = 1
latency_log = "off"

[[server]]
name = "a"
dsn = "host=/nonexistent port=5432 user=bench dbname=bench"
init = true

[[server]]
name = "b"
dsn = "host=/nonexistent port=5433 user=bench dbname=bench"
init = true

[matrix]
scale = [1]
workload = ["tpcb-like"]
clients = [1, 2]
"""


def parse(tmp_path: Path, text: str) -> plan.Plan:
    return plan.parse(text, str(tmp_path / "auto.toml"), base=tmp_path)


def the_plan(tmp_path: Path, auto: str = "") -> plan.Plan:
    return parse(tmp_path, PLAN.format(auto=auto))


# -- the plan ---------------------------------------------------------------------------------


def test_auto_has_defaults_and_its_first_rounds_are_the_specs(tmp_path: Path) -> None:
    found = the_plan(tmp_path)
    assert found.auto == AutoRepeats(3, 20, 0.10)
    assert found.repeats == 3 and len(found.specs) == 4 * 3
    tuned = the_plan(tmp_path, 'min_repeats = 2\nmax_repeats = 8\nprecision = "5%"')
    assert tuned.auto == AutoRepeats(2, 8, 0.05) and len(tuned.specs) == 8


@pytest.mark.parametrize(
    ("lines", "key"),
    [
        ('repeats = 3\nprecision = "5%"', "campaign.precision"),
        ("max_repeats = 2", "campaign.max_repeats"),
        ('precision = "1%"', "campaign.precision"),
        ('precision = "lots"', "campaign.precision"),
        ('repeats = "many"', "campaign.repeats"),
    ],
)
def test_auto_mistakes_are_refused_with_the_key(tmp_path: Path, lines: str, key: str) -> None:
    text = PLAN.format(auto=lines)
    if lines.startswith("repeats"):
        text = text.replace('repeats = "auto"\n', "")
    with pytest.raises(PlanError, match=re.escape(key)):
        parse(tmp_path, text)


def test_budget_needs_auto_repeats(tmp_path: Path) -> None:
    from pgbenchlab.cli.run import RunCommandOptions, parse_budget, run

    assert parse_budget("2h") == 7200 and parse_budget("90min") == 5400
    with pytest.raises(UserError, match="--budget"):
        parse_budget("soon")
    fixed = tmp_path / "fixed.toml"
    fixed.write_text(PLAN.format(auto="").replace('repeats = "auto"', "repeats = 2"))
    options = RunCommandOptions(fixed, tmp_path / "r", True, False, True, False, budget_s=60.0)
    with pytest.raises(UserError, match='repeats = "auto"'):
        run(options)
    assert not (tmp_path / "r").exists()


# -- the questions ----------------------------------------------------------------------------


def test_servers_are_compared_with_the_first_cell_by_cell(tmp_path: Path) -> None:
    first = [s for s in the_plan(tmp_path).specs if s.repeat == 1]
    asked = questions(first, ["a", "b"])
    assert [q.label for q in asked] == [
        "b s=1 tpcb-like c=1 prepared against server=a",
        "b s=1 tpcb-like c=2 prepared against server=a",
    ]
    by_cell = {(s.server, s.clients): s.cell_id for s in first}
    assert asked[0].cells == (by_cell["a", 1], by_cell["b", 1])


def test_a_setting_axis_is_compared_and_a_lone_cell_asks_for_precision(tmp_path: Path) -> None:
    text = PLAN.format(auto="").replace("clients = [1, 2]", "clients = [1]")
    managed = 'install = "embedded"\nsetting = { work_mem = ["4MB", "64MB"] }'
    text = text.replace(
        'dsn = "host=/nonexistent port=5433 user=bench dbname=bench"\ninit = true', managed
    )
    first = [s for s in parse(tmp_path, text).specs if s.repeat == 1]
    labels = [q.label for q in questions(first, ["a", "b"])]
    assert labels == [
        "b work_mem=64MB s=1 tpcb-like c=1 prepared against setting work_mem=4MB",
        "a s=1 tpcb-like c=1 prepared",
    ]


def test_a_kernel_tunable_axis_is_compared_too(tmp_path: Path) -> None:
    text = PLAN.format(auto="").replace("clients = [1, 2]", "clients = [1]")
    text += '[matrix.sysctl]\n"vm.dirty_bytes" = [0, 67108864]\n'
    first = [s for s in parse(tmp_path, text).specs if s.repeat == 1]
    labels = [q.label for q in questions(first, ["a", "b"])]
    assert labels == [
        "a vm.dirty_bytes=67108864 s=1 tpcb-like c=1 prepared against sysctl vm.dirty_bytes=0",
        "b vm.dirty_bytes=0 s=1 tpcb-like c=1 prepared against server=a",
        "b vm.dirty_bytes=67108864 s=1 tpcb-like c=1 prepared against server=a",
        "b vm.dirty_bytes=67108864 s=1 tpcb-like c=1 prepared against sysctl vm.dirty_bytes=0",
    ]


def test_open_cells_follow_the_answers_and_rounds_keep_sequence_numbers(tmp_path: Path) -> None:
    auto = AutoRepeats(3, 20, 0.10)
    decided = {"x": {1: 100.0, 2: 101.0, 3: 99.0}, "y": {1: 50.0, 2: 51.0, 3: 49.5}}
    question = Question("y against x", ("x", "y"))
    assert answer(question, decided, auto, math.inf).decided
    assert not answer(question, decided, auto, 3).decided  # the rounds before 3 only
    assert open_cells([answer(question, decided, auto, 3)]) == {"x", "y"}
    first = [s for s in the_plan(tmp_path).specs if s.repeat == 1]
    later = round_specs(first, 5, {first[1].cell_id})
    assert [(s.repeat, s.sequence, s.cell_id) for s in later] == [(5, 17, first[1].cell_id)]


# -- whole campaigns --------------------------------------------------------------------------


class NoisyServers(ReplayExecutor):
    """pgbench's TPS per server: a level times seeded log-normal noise; a run may be
    interrupted (Ctrl-C) at a given call."""

    def __init__(self, levels: dict[str, float], noise: float, interrupt_at: int = 0) -> None:
        super().__init__([])
        self.levels, self.noise, self.interrupt_at = levels, noise, interrupt_at
        self.rng = random.Random(18)
        self.calls = 0

    def prepare_dataset(
        self,
        server: Server,
        scale: int,
        *,
        pgbench: Path,
        work_dir: Path,
        force: bool,
        options: DatasetOptions = dataset.DEFAULTS,
    ) -> dataset.Prepared:
        return dataset.Prepared(server.endpoint.with_dbname(server.name), 0.5)

    def pgbench(self, call: Call) -> Completed:
        self.calls += 1
        tps = self.levels[call.argv[-1]] * math.exp(self.rng.gauss(0, self.noise))
        base = recorded("16", "tpcb-progress")
        stdout = re.sub(r"tps = [\d.]+", f"tps = {tps:.6f}", base.stdout)
        self.replays.append(
            Replay(replace(base, stdout=stdout), interrupt=self.calls == self.interrupt_at)
        )
        return super().pgbench(call)


def run(
    tmp_path: Path,
    executor: NoisyServers,
    auto: str = "",
    budget_s: float | None = None,
) -> tuple[Outcome, QuietReporter]:
    the_plan_ = the_plan(tmp_path, auto)
    reporter = QuietReporter()
    servers = StandInServers(the_plan_)
    outcome = conduct(
        the_plan_, tmp_path / "results", reporter, client("16"), servers, executor,
        budget_s=budget_s,
    )  # fmt: skip
    return outcome, reporter


def rounds_run(tmp_path: Path) -> list[tuple[str, int]]:
    db = sqlite3.connect(tmp_path / "results" / RESULTS_DB)
    try:
        rows = db.execute("SELECT server, repeat FROM latest_runs WHERE status = 'ok'")
        return sorted((str(s), int(r)) for s, r in rows)
    finally:
        db.close()


def test_a_clear_change_is_decided_at_the_minimum(tmp_path: Path) -> None:
    outcome, _ = run(tmp_path, NoisyServers({"a": 1000, "b": 700}, 0.02))
    assert outcome.ran == 12
    assert outcome.answers[0].startswith("repeats auto: 2 of 2 answer(s) decided; every")
    assert len(outcome.answers) == 1


def test_rounds_are_added_only_while_answers_are_open(tmp_path: Path) -> None:
    """Identical servers: "within noise" needs an interval inside ±10 %, which the sequence
    reaches after a few more rounds; every round runs both sides of each open comparison."""
    outcome, reporter = run(tmp_path, NoisyServers({"a": 1000, "b": 1000}, 0.02))
    found = rounds_run(tmp_path)
    last = max(r for _, r in found)
    assert 3 < last < 20
    assert ("note", "round 4: 4 run(s) for the open answers") in reporter.events
    assert sum(s == "a" for s, _ in found) == sum(s == "b" for s, _ in found)
    assert "every answer decided" in outcome.answers[0]


def test_the_maximum_ends_it_and_says_what_would_close_the_open_answers(tmp_path: Path) -> None:
    outcome, _ = run(tmp_path, NoisyServers({"a": 1000, "b": 1000}, 0.05), "max_repeats = 4")
    assert max(r for _, r in rounds_run(tmp_path)) == 4
    assert "max_repeats (4) reached" in outcome.answers[0]
    assert outcome.answers[1].startswith("open: b s=1 tpcb-like c=1 prepared against server=a")
    assert re.search(r"about \d+ more round\(s\) would likely close it", outcome.answers[1])


def test_the_budget_stops_before_a_round_it_cannot_pay(tmp_path: Path) -> None:
    outcome, reporter = run(tmp_path, NoisyServers({"a": 1000, "b": 1000}, 0.05), budget_s=1e-6)
    assert outcome.ran == 12
    assert "the budget allows no round of 4 run(s) more" in outcome.answers[0]
    assert ("note", outcome.answers[0]) in reporter.events


def test_an_interrupted_campaign_resumes_with_the_same_decisions(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    whole.mkdir()
    run(whole, NoisyServers({"a": 1000, "b": 1000}, 0.02))
    expected = rounds_run(whole)
    assert max(r for _, r in expected) > 4
    first, _ = run(tmp_path, NoisyServers({"a": 1000, "b": 1000}, 0.02, interrupt_at=14))
    assert first.interrupted and not first.answers
    again = NoisyServers({"a": 1000, "b": 1000}, 0.02)
    again.calls, again.rng = 14, random.Random(18)
    for _ in range(13):  # the same noise as the uninterrupted campaign from call 14 on
        again.rng.gauss(0, 0.02)
    second, _ = run(tmp_path, again)
    assert second.ran == len(expected) - 13
    assert rounds_run(tmp_path) == expected
    assert "every answer decided" in second.answers[0]
