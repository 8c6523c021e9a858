"""Noise floors measured by a campaign: with `restart = "each-round"` every managed server is
restarted and the page cache dropped before each round (`between_rounds`); when the campaign
ends, each cell's floors are computed from its stored runs (`analysis.floors`) and recorded in
place of those recorded before (`record_floors`): the spread across rounds (run to run, or
restart to restart when the rounds restarted) and, for the copies of a rebuilt build
(`rebuild = N`), their offset (build to build), on every copy's cell.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pgbenchlab.analysis.floors import build_offset, spread
from pgbenchlab.campaign.events import Reporter
from pgbenchlab.campaign.rounds import Values, by_metric
from pgbenchlab.campaign.servers import ServerPool
from pgbenchlab.plan import Plan, RunSpec
from pgbenchlab.plan.schema import PROFILED_EXTRA
from pgbenchlab.store import BUILD_FLOOR, RESTART_FLOOR, RUN_FLOOR, NoiseFloor, Store
from pgbenchlab.store.metrics import DEFAULT_METRICS, metrics

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def restart_problems(plan: Plan, euid: int | None = None) -> list[str]:
    """Why this process cannot restart between rounds: dropping the page cache needs root."""
    if plan.restart == "never" or (os.geteuid() if euid is None else euid) == 0:
        return []
    return [
        f'restart = "{plan.restart}" drops the page cache between rounds, which needs root: '
        "run pgbenchlab as root or remove restart"
    ]


def between_rounds(servers: ServerPool, reporter: Reporter, round_: int) -> None:
    """Every started server stopped (each starts again at its next run) and the page cache
    dropped, written back first."""
    for problem in servers.stop_all():
        reporter.note(problem)
    os.sync()
    DROP_CACHES.write_text("1\n")
    reporter.note(f"round {round_}: page cache dropped, servers started afresh")


def record_floors(store: Store, campaign_id: int, plan: Plan) -> None:
    """The campaign's floors as its stored runs give them, when its plan measures some."""
    if not plan.measures_floors:
        return
    wanted = metrics(tuple(dict.fromkeys((*DEFAULT_METRICS, *plan.verdicts.decide))))
    extra = {(s.cell_id, s.repeat) for s in plan.specs if s.options.profile == PROFILED_EXTRA}
    stored = store.run_values(campaign_id, wanted)  # less the profiled extra repeats
    values = [v for v in stored if (v.cell_id, v.repeat) not in extra]
    known = by_metric(values, [m.name for m in wanted])
    store.replace_noise_floors(campaign_id, cell_floors(plan, known))


def cell_floors(plan: Plan, known: Mapping[str, Values]) -> list[NoiseFloor]:
    """Each cell's spread across its rounds, then each rebuilt cell's build-to-build offset."""
    first = {s.cell_id: s for s in plan.specs if s.repeat == 1}
    restarted = plan.restart != "never"
    kind = RESTART_FLOOR if restarted else RUN_FLOOR
    after = ", each after a restart and the page cache dropped" if restarted else ""
    found = []
    for metric, cells in known.items():
        for cell_id, by_round in cells.items():
            spec = first.get(cell_id)
            figure = spread(list(by_round.values()))
            if spec is not None and figure is not None:
                how = f"spread of {len(by_round)} runs across rounds{after}"
                found.append(NoiseFloor(metric, kind, figure, spec.server, how, cell_id))
        for copy_of, copies in copy_cells(plan, first.values()):
            found += build_floors(metric, cells, copy_of, copies)
    return found


def copy_cells(plan: Plan, first: Iterable[RunSpec]) -> list[tuple[str, list[RunSpec]]]:
    """The cells of a rebuilt server's copies that share everything but the copy (first copy
    first), with the server they copy."""
    groups: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[RunSpec]] = {}
    order = plan.server_names
    for spec in sorted(first, key=lambda s: order.index(s.server)):
        copy_of = "" if plan.is_group(spec.server) else plan.server(spec.server).copy_of
        if copy_of:
            groups.setdefault((copy_of, spec.point, spec.variant), []).append(spec)
    return [(key[0], specs) for key, specs in groups.items() if len(specs) >= 2]


def build_floors(
    metric: str, cells: Values, copy_of: str, copies: Sequence[RunSpec]
) -> list[NoiseFloor]:
    """The largest offset of a copy from the first, paired by round, on every copy's cell."""
    base = cells.get(copies[0].cell_id, {})
    offsets = []
    for other in copies[1:]:
        theirs = cells.get(other.cell_id, {})
        found = build_offset([(base[r], theirs[r]) for r in sorted(base) if r in theirs])
        if found is not None:
            offsets.append((found, other.server))
    if not offsets:
        return []
    offset, server = max(offsets, key=lambda o: o[0].floor)
    how = (
        f"{server} against {copies[0].server}: {offset.change:+.1%} over {offset.rounds} "
        f"paired round(s), 95 % interval ±{offset.half_width:.1%}"
    )
    return [
        NoiseFloor(metric, BUILD_FLOOR, offset.floor, copy_of, how, spec.cell_id) for spec in copies
    ]
