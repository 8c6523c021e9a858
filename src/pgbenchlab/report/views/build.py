"""Results database → view model: cells, intervals, comparisons, step scans and advice.

`load_view` reads (through `load`); `build_view` is a pure function of the records that
computes everything an output shows, once, so tests can check every number against the
database, and every output renders the same numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pgbenchlab.analysis.cells import Matched, match_cells
from pgbenchlab.analysis.comparison import ComparisonVerdict, compare
from pgbenchlab.analysis.multiplicity import DEFAULT_CORRECTION, Correction, adjusted
from pgbenchlab.analysis.stats import student_t_quantile, summarize
from pgbenchlab.errors import UserError
from pgbenchlab.plan import stored_verdicts
from pgbenchlab.plan.schema import CONNECTIONS
from pgbenchlab.profiles import PGBENCH, Profile
from pgbenchlab.profiles.counting import TOOL as COUNTING_TOOL
from pgbenchlab.report.views import advice
from pgbenchlab.report.views.capacity import capacity_views
from pgbenchlab.report.views.floors import judged_change
from pgbenchlab.report.views.load import load_campaign, load_runs, load_servers
from pgbenchlab.report.views.metrics import run_values
from pgbenchlab.report.views.model import (
    Axis,
    CampaignView,
    CellView,
    ChangeView,
    Interval,
    Pairs,
    ReportView,
    RunView,
    ServerView,
)
from pgbenchlab.report.views.profiles import cell_profiles, profile_changes
from pgbenchlab.report.views.scalability import scalability
from pgbenchlab.report.views.steps import report_scans
from pgbenchlab.report.views.variants import versions_order
from pgbenchlab.store import Store

CONFIDENCE = 0.95
# Axes in display order; clients is the x axis of most charts and is handled apart.
AXES = (
    Axis("server", "server"),
    Axis("scale", "scale"),
    Axis("workload", "workload"),
    Axis("protocol", "protocol"),
    Axis("rate", "rate limit"),
    Axis("latency_limit", "latency limit"),
    Axis("connect", "connections"),
    Axis("connection", "connection kind"),
    Axis("duration", "duration"),
    Axis("options", "options"),
)


def load_view(
    store: Store, campaign: int, *, baseline: str | None = None, detail: bool = True
) -> ReportView:
    """The view model of one campaign; without ``detail``, no per-second series or histograms."""
    runs = load_runs(store, campaign, detail=detail)
    ids = [r.id for r in runs] if detail else []
    view = build_view(
        load_campaign(store, campaign),
        load_servers(store, campaign),
        runs,
        baseline=baseline,
        profiles=store.profiles_by_run(ids),
        pgbench_profiles=store.profiles_by_run(ids, PGBENCH),
    )
    floors = store.noise_floors(campaign)
    changes = tuple(judged_change(c, floors) for c in view.changes)
    capacity = tuple(capacity_views(store, campaign))
    return replace(view, capacity=capacity, floors=floors, changes=changes)


def build_view(
    campaign: CampaignView,
    servers: Sequence[ServerView],
    runs: Sequence[RunView],
    *,
    baseline: str | None = None,
    confidence: float = CONFIDENCE,
    profiles: Mapping[int, Profile] | None = None,
    pgbench_profiles: Mapping[int, Profile] | None = None,
) -> ReportView:
    """Everything the outputs show, computed here once: the renderers only print it."""
    dims = run_dims(runs)
    counted = [r for r in runs if r.counted]
    cells = tuple(add_efficiency(build_cells(counted, dims, confidence)))
    axes = tuple(a for a in AXES if len({d[a.key] for d in dims.values()}) > 1)
    labels = _server_labels(servers, runs)
    chosen = choose_baseline(labels, servers, baseline)
    correction = stored_verdicts(campaign.plan_text).correction
    pairs = compared_cells(cells, chosen) if chosen else []
    changes = compare_servers(pairs, counted, confidence, correction)
    view = ReportView(
        campaign=campaign,
        servers=tuple(servers),
        differing_settings=differing_settings(servers),
        runs=tuple(runs),
        cells=cells,
        axes=axes,
        series_axis=default_series_axis(axes),
        baseline=chosen,
        changes=changes,
        advice=advice.collect(runs, cells, axes, campaign.missing_shards),
        confidence=confidence,
        correction=correction,
    )
    profiled = cell_profiles(cells, runs, profiles or {}, [a.key for a in axes], pgbench_profiles)
    return replace(
        view,
        scans=tuple(report_scans(view)),
        scalability=scalability(cells, runs, axes),
        profiles=profiled,
        profile_changes=profile_changes(
            profiled, [(p.baseline.cell_id, p.candidate.cell_id) for p in pairs]
        ),
    )


# -- axes --------------------------------------------------------------------------------------


def run_dims(runs: Sequence[RunView]) -> dict[int, dict[str, str]]:
    """Every run's value on every axis, as display text."""
    dims = {r.id: _base_dims(r) for r in runs}
    # "options" names only the options that tell otherwise identical cells apart.
    groups: dict[tuple[str, ...], set[Pairs]] = {}
    for r in runs:
        groups.setdefault(_dims_key(dims[r.id]), set()).add(r.options)
    for r in runs:
        if len(groups[_dims_key(dims[r.id])]) > 1:
            dims[r.id]["options"] = " ".join(f"{k}={v}" for k, v in r.options)
    return dims


def _base_dims(r: RunView) -> dict[str, str]:
    duration = f"{r.duration_s} s" if r.duration_s else f"{r.transactions_per_client} tx/client"
    return {
        "server": r.server,
        "scale": str(r.scale),
        "workload": r.workload,
        "clients": str(r.clients),
        "protocol": r.protocol,
        "rate": f"{r.rate:g} tps" if r.rate else "unlimited",
        "latency_limit": f"{r.latency_limit_ms:g} ms" if r.latency_limit_ms else "none",
        "connect": "new per transaction (-C)" if r.connect else "persistent",
        "connection": r.connection,
        "duration": duration,
        "options": "",
    }


def _dims_key(dims: dict[str, str]) -> tuple[str, ...]:
    return (*tuple(dims[a.key] for a in AXES if a.key != "options"), dims["clients"])


def default_series_axis(axes: Sequence[Axis]) -> str | None:
    keys = [a.key for a in axes]
    for preferred in ("server", "protocol", "rate", "connect", "latency_limit"):
        if preferred in keys:
            return preferred
    return keys[0] if keys else None


# -- cells -------------------------------------------------------------------------------------


def build_cells(
    runs: Sequence[RunView], dims: dict[int, dict[str, str]], confidence: float
) -> list[CellView]:
    by_cell: dict[str, list[RunView]] = {}
    for r in runs:
        by_cell.setdefault(r.cell_id, []).append(r)
    servers = list(dict.fromkeys(r.server for r in runs))
    groups = sorted(by_cell.values(), key=lambda group: _cell_order(group[0], servers))
    return [cell_view(group, dims[group[0].id], confidence) for group in groups]


def _cell_order(r: RunView, servers: list[str]) -> tuple[object, ...]:
    """Servers in the order they ran, then numbers by value, clients last."""
    return (
        servers.index(r.server),
        r.scale,
        r.workload,
        r.protocol,
        r.rate or 0.0,
        r.latency_limit_ms or 0.0,
        r.connect,
        CONNECTIONS.index(r.connection) if r.connection in CONNECTIONS else len(CONNECTIONS),
        r.duration_s or 0,
        r.transactions_per_client or 0,
        r.options,
        r.clients,
    )


def cell_view(runs: Sequence[RunView], dims: dict[str, str], confidence: float) -> CellView:
    good = [r for r in runs if r.ok]
    return CellView(
        cell_id=runs[0].cell_id,
        dims=tuple(dims.items()),
        clients=runs[0].clients,
        run_ids=tuple(r.id for r in runs),
        n_ok=len(good),
        n_not_ok=len(runs) - len(good),
        tps=mean_interval([r.tps for r in good if r.tps is not None], confidence),
        latency_avg_ms=_mean(good, lambda r: r.latency_avg_ms),
        p50_ms=_mean(good, lambda r: r.p50_ms),
        p95_ms=_mean(good, lambda r: r.p95_ms),
        p99_ms=_mean(good, lambda r: r.p99_ms),
        p999_ms=_mean(good, lambda r: r.p999_ms),
        max_ms=max((r.max_ms for r in good if r.max_ms is not None), default=None),
        late_share=_mean(good, lambda r: r.late_share),
        skipped_share=_mean(good, lambda r: r.skipped_share),
        rate=runs[0].rate,
        efficiency=None,
        efficiency_base_clients=None,
    )


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """Mean of run-level values with Student's t interval over the repeats (None: no values).

    Runs, not seconds, are the unit: per-second samples are autocorrelated (design, §4).
    """
    if not values:
        return None
    s = summarize(values)
    if s.stddev is None:
        return Interval(s.n, s.mean, None, None, None, None)
    half = student_t_quantile(0.5 + confidence / 2, s.n - 1) * s.stddev / math.sqrt(s.n)
    return Interval(s.n, s.mean, s.mean - half, s.mean + half, s.stddev, s.cv)


def _mean(runs: Sequence[RunView], get: Callable[[RunView], float | None]) -> float | None:
    values = [v for v in map(get, runs) if v is not None]
    return statistics.fmean(values) if values else None


def add_efficiency(cells: Sequence[CellView]) -> list[CellView]:
    """Scaling efficiency: TPS(c) / (TPS(c0) x c / c0), c0 the fewest clients of the line."""
    lines: dict[tuple[tuple[str, str], ...], list[CellView]] = {}
    for c in cells:
        lines.setdefault(tuple(d for d in c.dims if d[0] != "clients"), []).append(c)
    out = {}
    for line in lines.values():
        measured = [c for c in line if c.tps is not None]
        base = min(measured, key=lambda c: c.clients, default=None)
        for c in line:
            out[c.cell_id] = _with_efficiency(c, base)
    return [out[c.cell_id] for c in cells]


def _with_efficiency(cell: CellView, base: CellView | None) -> CellView:
    if base is None or cell.tps is None or base.tps is None or base.tps.mean <= 0:
        return cell
    ideal = base.tps.mean * cell.clients / base.clients
    return replace(cell, efficiency=cell.tps.mean / ideal, efficiency_base_clients=base.clients)


# -- servers and comparisons --------------------------------------------------------------------


def _server_labels(servers: Sequence[ServerView], runs: Sequence[RunView]) -> list[str]:
    labels = [s.label for s in servers]
    labels += [r.server for r in runs if r.server not in labels]
    return list(dict.fromkeys(labels))


def choose_baseline(
    labels: Sequence[str], servers: Sequence[ServerView], wanted: str | None
) -> str | None:
    """The baseline server label: as asked (label or unique name), else the oldest major when
    the servers differ by major (an archaeology reads forward from it), else the first server;
    none with a single server. A baseline that names no server is a mistake, with one server
    too."""
    versions = versions_order([(s.label, s.version_num) for s in servers])
    oldest = [label for label in versions if label in labels][:1]
    chosen = (oldest or labels)[0] if wanted is None and labels else wanted
    if wanted is not None and wanted not in labels:
        named = [s.label for s in servers if s.name == wanted]
        if len(named) != 1:
            raise UserError(
                f"no server {wanted!r} to use as baseline; choose one of: {', '.join(labels)}"
            )
        chosen = named[0]
    return chosen if len(labels) >= 2 else None


def differing_settings(servers: Sequence[ServerView]) -> tuple[str, ...]:
    """Setting names whose value (or presence) differs between the servers."""
    if len(servers) < 2:
        return ()
    tables = [dict(s.settings) for s in servers]
    names = sorted({k for t in tables for k in t})
    return tuple(n for n in names if len({t.get(n) for t in tables}) > 1)


def compared_cells(cells: Sequence[CellView], baseline: str) -> list[Matched[CellView]]:
    """Every candidate cell with the baseline server's cell of the same other axes."""
    base = [c for c in cells if c.dim("server") == baseline]
    others = [c for c in cells if c.dim("server") != baseline]
    return match_cells(base, others, _dims, ignore=("server",))


def compare_servers(
    pairs: Sequence[Matched[CellView]],
    runs: Sequence[RunView],
    confidence: float,
    correction: Correction = DEFAULT_CORRECTION,
) -> tuple[ChangeView, ...]:
    """Each pair's TPS and p99 compared, the changes adjusted across them all
    (`analysis.multiplicity`)."""
    by_id = {r.id: r for r in runs}
    found: list[tuple[ChangeView, float]] = []
    for pair in pairs:
        if simulated(pair.baseline, by_id) or simulated(pair.candidate, by_id):
            continue  # its TPS and latency are the simulator's: its instructions compare
        for metric, higher_is_better in (("tps", True), ("p99", False)):
            change = _change(pair, by_id, metric, higher_is_better, confidence)
            if change is not None:
                found.append(change)
    p_adjusted = adjusted([p for _, p in found], correction)
    return tuple(
        _held(change, p, 1 - confidence, correction, len(found))
        for (change, _), p in zip(found, p_adjusted, strict=True)
    )


def _held(
    change: ChangeView, p: float, alpha: float, correction: Correction, many: int
) -> ChangeView:
    """A change significant alone but not once adjusted is not enough data, and says why."""
    if change.verdict not in (ComparisonVerdict.IMPROVED, ComparisonVerdict.REGRESSED):
        return change
    if p < alpha:
        return change
    reason = f"{change.reason}; not significant across the {many} comparisons "
    reason += f"({correction.described}: adjusted p={p:.2g})"
    return replace(change, verdict=ComparisonVerdict.NOT_ENOUGH_DATA, reason=reason)


def simulated(cell: CellView, by_id: Mapping[int, RunView]) -> bool:
    """A cell counted under a CPU simulator (`count = "instructions"`)."""
    return any(by_id[i].instructions_tool == COUNTING_TOOL for i in cell.run_ids if i in by_id)


def _dims(cell: CellView) -> Pairs:
    return cell.dims


def _change(
    pair: Matched[CellView],
    by_id: dict[int, RunView],
    metric: str,
    higher_is_better: bool,
    confidence: float,
) -> tuple[ChangeView, float] | None:
    cell, base = pair.candidate, pair.baseline
    cand_values = run_values(cell, by_id, metric)
    base_values = run_values(base, by_id, metric)
    if not cand_values or not base_values:
        return None
    result = compare(
        base_values, cand_values, higher_is_better=higher_is_better, confidence=confidence
    )
    return ChangeView(
        candidate=cell.dim("server"),
        baseline=base.dim("server"),
        cell_id=cell.cell_id,
        baseline_cell_id=base.cell_id,
        metric=metric,
        relative_change=result.relative_change,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        verdict=result.verdict,
        reason=result.reason,
    ), 1.0 if result.p_value is None else result.p_value
