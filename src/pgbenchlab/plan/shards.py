"""`run --shard K/N`: one machine's part of a plan's runs, so that N identical machines run one
campaign together, each into its own results directory (`pgbenchlab merge` joins them).

The unit dealt out is a point of the matrix (`RunSpec.point`: a cell without its configuration,
the server, its `[matrix.setting]` values and `[matrix.sysctl]` values) with every configuration
and every repeat of it. The runs a comparison of servers or settings sets side by side thus run
on one machine, interleaved in the plan's order, and never compare two machines; `repeats =
"auto"` asks its questions within a shard. Points go to shards by estimated time, longest
first, each to the shard with the least so far (ties: the lowest K, then plan order), so
points of equal time are dealt round-robin in plan order. The partition depends on the plan
alone: every machine computes the same one.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from pgbenchlab.errors import UserError
from pgbenchlab.plan.records import Plan, Shard

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str) -> Shard:
    """ "K/N": part K of N, 1 ≤ K ≤ N."""
    if not _SHARD.fullmatch(text):
        raise UserError(f"--shard {text!r}: give K/N, this machine's part K of N (1/2, 2/2, …)")
    shard = shard_of(text)
    if shard is None:
        raise UserError(f"--shard {text}: K must be from 1 to N (1/2 and 2/2 for two machines)")
    return shard


def shard_of(text: str) -> Shard | None:
    """ "K/N" (as `str(Shard)` writes it) as a shard; None when it is not one, 1 ≤ K ≤ N."""
    found = _SHARD.fullmatch(text)
    if not found:
        return None
    index, count = int(found[1]), int(found[2])
    return Shard(index, count) if 1 <= index <= count else None


def missing_shards(present: Collection[Shard]) -> tuple[Shard, ...]:
    """The shards of one partition (every one of the same N) that are not present."""
    counts = {s.count for s in present}
    if len(counts) != 1:
        assert not counts, f"shards of different counts: {sorted(map(str, present))}"
        return ()
    count = counts.pop()
    return tuple(Shard(k, count) for k in range(1, count + 1) if Shard(k, count) not in present)


def sharded(plan: Plan, shard: Shard) -> Plan:
    """The plan with only the shard's runs (in the plan's order); its identity (digest, files,
    builds) stays the whole plan's, so the shards' results can be merged."""
    timed = [(s.point, s.estimated_seconds()) for s in plan.specs]
    points = len({point for point, _ in timed})
    if shard.count > points:  # a shard would run nothing
        raise UserError(
            f"--shard {shard}: the plan has {points} matrix point(s) (cells without their server "
            f"and settings), too few for {shard.count} shards: use at most {points}"
        )
    assigned = _deal(timed, shard.count)
    mine = tuple(
        spec
        for spec, (point, _) in zip(plan.specs, timed, strict=True)
        if assigned[point] == shard.index
    )
    return replace(plan, specs=mine, shard=shard, all_specs=plan.specs)


def _deal(timed: Sequence[tuple[str, float]], count: int) -> dict[str, int]:
    """Points (with the estimated seconds of each run) dealt to shards 1 … count: longest
    first, each to the shard with the least so far (with count ≤ points, none stays empty)."""
    seconds: dict[str, float] = {}
    for point, run_seconds in timed:
        seconds[point] = seconds.get(point, 0.0) + run_seconds
    loads = [0.0] * count
    assigned: dict[str, int] = {}
    for point in sorted(seconds, key=lambda p: -seconds[p]):  # stable: plan order among equals
        lightest = min(range(count), key=lambda i: (loads[i], i))
        loads[lightest] += seconds[point]
        assigned[point] = lightest + 1
    return assigned
