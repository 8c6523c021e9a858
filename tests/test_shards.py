"""`run --shard K/N`: the partition of a plan's runs (every run in exactly one shard, whole
matrix points with every configuration and repeat, one shard is the whole plan, the plan's
identity kept) and the option's refusals (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_process import run_cli
from pgbenchlab import plan
from pgbenchlab.errors import UserError

PLAN = """
[campaign]
name = "fleet"
repeats = 2
order = "{order}"
seed = 4
[defaults]
duration = "5s"
warmup = "0s"
[[server]]
name = "pg15"
install = "15"
[[server]]
name = "pg18"
install = "18"
[matrix]
scale = [1, 10]
workload = ["select-only", {{ builtin = "tpcb-like", duration = "20s" }}]
clients = [1, 2, 4]
[matrix.setting]
work_mem = ["4MB", "64MB"]
"""
POINTS = 2 * 2 * 3  # scale × workload × clients: servers and settings stay together


def parse(order: str = "interleaved") -> plan.Plan:
    return plan.parse(
        PLAN.format(order=order), "fleet.toml", base=Path("/nonexistent"), cpu_count=2
    )


@pytest.mark.parametrize("order", ["interleaved", "random", "sequential"])
def test_every_run_is_in_exactly_one_shard_with_its_whole_point(order: str) -> None:
    whole = parse(order)
    point = {s.run_key: s.point for s in whole.specs}
    for count in (1, 2, 3, 5, POINTS):
        shards = [plan.sharded(whole, plan.Shard(k, count)) for k in range(1, count + 1)]
        keys = [s.run_key for shard in shards for s in shard.specs]
        assert sorted(keys) == sorted(s.run_key for s in whole.specs)  # all, and each once
        for shard in shards:
            # the runs of its points, all of them (every server, setting and repeat), in order
            points = {point[s.run_key] for s in shard.specs}
            assert [s for s in whole.specs if point[s.run_key] in points] == list(shard.specs)
            assert shard.digest == whole.digest and shard.files == whole.files
            assert shard.shard is not None and shard.shard.count == count


def test_one_shard_is_the_whole_plan() -> None:
    whole = parse()
    one = plan.sharded(whole, plan.parse_shard("1/1"))
    assert one.specs == whole.specs
    assert one.digest == whole.digest


def test_points_are_dealt_by_estimated_time() -> None:
    whole = parse()
    seconds: dict[int, float] = {}
    for k in (1, 2, 3):
        shard = plan.sharded(whole, plan.Shard(k, 3))
        seconds[k] = shard.estimated_seconds()
    # tpcb-like points take four times as long: each shard gets its share of both kinds.
    assert max(seconds.values()) <= 1.2 * min(seconds.values())
    again = {k: plan.sharded(parse(), plan.Shard(k, 3)).specs for k in (1, 2, 3)}
    assert all(again[k] == plan.sharded(whole, plan.Shard(k, 3)).specs for k in again)


def test_more_shards_than_points_is_refused() -> None:
    with pytest.raises(UserError, match="12 matrix point"):
        plan.sharded(parse(), plan.Shard(13, 13))


@pytest.mark.parametrize("text", ["0/2", "3/2", "x", "1/0", "", "1/2/3", "-1/2"])
def test_a_shard_must_be_k_of_n(text: str) -> None:
    with pytest.raises(UserError, match="--shard"):
        plan.parse_shard(text)


def test_shard_option_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(PLAN.format(order="interleaved"))
    for bad in ("0/2", "3/2", "x"):
        done = run_cli("run", path, "--shard", bad, "--results", tmp_path / "r")
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "--shard" in done.stderr
        assert not (tmp_path / "r").exists()
    dry = run_cli("run", path, "--shard", "2/4", "--dry-run", "-q")
    assert dry.returncode == 0, dry.stderr
    shard = plan.sharded(parse(), plan.Shard(2, 4))
    assert f"\n{len(shard.specs)} runs, order interleaved" in dry.stdout


def test_stored_shards_and_the_ones_a_merge_lacks() -> None:
    assert plan.shard_of("2/3") == plan.Shard(2, 3)
    assert [plan.shard_of(t) for t in ("0/2", "3/2", "x", "", "../1")] == [None] * 5
    present = {plan.Shard(2, 3)}
    assert [str(s) for s in plan.missing_shards(present)] == ["1/3", "3/3"]
    assert plan.missing_shards({plan.Shard(1, 2), plan.Shard(2, 2)}) == ()
    assert plan.missing_shards(set()) == ()  # nothing run: no partition known
