"""The report's profiles: per cell, its profiled runs merged (stacks summed, transactions
summed, so CPU per transaction stays exact), the top functions by backend type and a flame
graph tree pruned to the report's budget, for the server's processes and then for pgbench;
between a baseline server's cell and a candidate's, what changed in CPU time per committed
transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product
from typing import Any

from pgbenchlab.profiles import PROCESSES, Profile, diff, merged, top_functions
from pgbenchlab.report.views.model import (
    CellProfile,
    CellView,
    ProfileChange,
    RunView,
)

# Flame graph nodes in the whole page (about 12 bytes each in the page's JSON): a campaign with
# many profiled cells (or pgbench's graphs beside the server's) gets coarser graphs, never a
# larger file.
FLAME_NODES = 40_000
MAX_NODES_PER_GRAPH = 2_000
TOP_PER_TYPE = 10


def cell_profiles(
    cells: Sequence[CellView],
    runs: Sequence[RunView],
    profiles: Mapping[int, Profile],
    axes: Sequence[str] = (),
    pgbench: Mapping[int, Profile] | None = None,
) -> tuple[CellProfile, ...]:
    """The profiled cells, labelled by server, the axes that vary, and clients: each cell's
    server profile, followed by its pgbench profile when pgbench was profiled too."""
    shown = {"server", "clients", *axes}
    labels = {c.cell_id: ", ".join(f"{k} {v}" for k, v in c.dims if k in shown) for c in cells}
    clients = {c.cell_id: c for c in _per_cell(runs, pgbench or {}, labels)}
    found: list[CellProfile] = []
    for cell in _per_cell(runs, profiles, labels):
        found.append(cell)
        if cell.cell_id in clients:
            found.append(clients.pop(cell.cell_id))
    return (*found, *clients.values())


def _per_cell(
    runs: Sequence[RunView], profiles: Mapping[int, Profile], labels: Mapping[str, str]
) -> list[CellProfile]:
    found = []
    for cell_id in dict.fromkeys(r.cell_id for r in runs if r.id in profiles):
        chosen = [r for r in runs if r.cell_id == cell_id and r.id in profiles and r.ok]
        rates = {(profiles[r.id].frequency_hz, profiles[r.id].counter) for r in chosen}
        if not chosen or len(rates) != 1:
            continue
        profile = merged([profiles[r.id] for r in chosen])
        found.append(
            CellProfile(
                cell_id,
                labels.get(cell_id) or chosen[0].server,
                tuple(r.id for r in chosen),
                all(not r.counted for r in chosen),
                sum(r.transactions or 0 for r in chosen),
                profile,
                tuple(top_functions(profile, TOP_PER_TYPE)),
            )
        )
    return found


def profile_changes(
    found: Sequence[CellProfile], pairs: Sequence[tuple[str, str]], limit: int = 15
) -> tuple[ProfileChange, ...]:
    """Per candidate cell compared with the baseline's (the pairs: baseline and candidate cell
    ids), the server's profiles and pgbench's each with its own."""
    by_cell = {(c.cell_id, c.profile.process): c for c in found}
    result = []
    for (base_id, cand_id), process in product(pairs, PROCESSES):
        base, cand = by_cell.get((base_id, process)), by_cell.get((cand_id, process))
        comparable = base and cand and base.profile.counted == cand.profile.counted
        if comparable and base and cand and base.transactions and cand.transactions:
            rows = diff(base.profile, base.transactions, cand.profile, cand.transactions)
            result.append(ProfileChange(base, cand, tuple(rows[:limit])))
    return tuple(result)


def flame_tree(profile: Profile, max_nodes: int) -> dict[str, Any]:
    """The stacks as a tree for the page's renderer: names once, nodes as
    [name index, samples, children…]; the smallest branches are folded into their parent until
    at most max_nodes remain (their samples stay, as the parent's own time)."""
    root: dict[str, Any] = {"n": "all", "v": 0, "c": {}}
    for frames, count in profile.stacks():
        node = root
        node["v"] += count
        for frame in frames:
            node = node["c"].setdefault(frame, {"n": frame, "v": 0, "c": {}})
            node["v"] += count
    threshold = _threshold(root, max_nodes)
    names: dict[str, int] = {}

    def encode(node: dict[str, Any]) -> list[Any]:
        index = names.setdefault(node["n"], len(names))
        kids = [encode(k) for k in node["c"].values() if k["v"] >= threshold]
        return [index, node["v"], *kids]

    tree = encode(root)
    return {"names": list(names), "tree": tree}


def _threshold(root: dict[str, Any], max_nodes: int) -> int:
    """The smallest sample count a node needs so that at most max_nodes are kept."""
    values: list[int] = []
    pending = [root]
    while pending:
        node = pending.pop()
        values.append(node["v"])
        pending.extend(node["c"].values())
    if len(values) <= max_nodes:
        return 0
    return sorted(values, reverse=True)[max_nodes - 1] + 1


def nodes_per_graph(graphs: int) -> int:
    return min(MAX_NODES_PER_GRAPH, FLAME_NODES // max(graphs, 1))
