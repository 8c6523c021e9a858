"""Read a campaign from the results database (and the kept raw files) into view-model records.

This is the only part of the report that does I/O on the results; everything downstream is a
pure function of the records read here, so a report can be regenerated at any time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import zstandard

from pgbenchlab import builds, findings
from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.redaction import redact_settings
from pgbenchlab.report.views.display_bins import display_histogram
from pgbenchlab.report.views.model import (
    CampaignView,
    EventView,
    HistogramView,
    Pairs,
    RunView,
    SecondView,
    ServerView,
    TelemetrySeries,
)
from pgbenchlab.report.views.setup import setup_facts
from pgbenchlab.report.views.telemetry_series import charted, drawn_series, wanted
from pgbenchlab.report.views.text import affinity_text
from pgbenchlab.report.views.variants import run_variant, server_label
from pgbenchlab.store import (
    RUN_COLUMNS,
    CampaignRecord,
    RunDiagnosis,
    RunRecord,
    ServerStorage,
    Store,
    run_artifacts,
)
from pgbenchlab.store.metrics import METRICS

# Spec keys shown as axes of their own or implied by others; the rest tell cells apart as
# "options" when they differ (threads, vacuum, warmup, ...).
AXIS_SPEC_KEYS = frozenset(
    {
        "server",
        "server_settings",
        "scale",
        "workload",
        "clients",
        "protocol",
        "rate",
        "latency_limit_ms",
        "connect",
        "connection",
        "duration_s",
        "transactions",
        "profile",
        "sysctl",
    }
)
RAW_STDOUT = "stdout.txt.zst"
MAX_RAW_OUTPUT = 64_000  # characters of pgbench's report kept per run: it is short unless -r


def load_campaign(store: Store, campaign_id: int) -> CampaignView:
    c = store.campaign_record(campaign_id)
    if c is None:
        raise LookupError(f"no campaign {campaign_id} in {store.path}")
    return CampaignView(
        id=c.id,
        name=c.name,
        status=c.status,
        plan_path=c.plan_path,
        plan_text=c.plan_text,
        started_at=c.started_at,
        finished_at=c.finished_at,
        pgbenchlab_version=c.pgbenchlab_version,
        pgbench_version=c.pgbench_version,
        machine=flatten(c.machine),
        description=c.description,
        axis_orders=tuple(c.axis_orders.items()),
        missing_shards=c.missing_shards,
        joined=tuple((p.changed_at, p.added) for p in store.plan_changes(c.id)),
    )


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> Pairs:
    """Nested facts as ("vm.swappiness", "60") pairs, absent values left out."""
    pairs: list[tuple[str, str]] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            pairs.extend(flatten(value, f"{prefix}{key}."))
        elif value is not None:
            pairs.append((f"{prefix}{key}", str(value)))
    return tuple(pairs)


def load_servers(store: Store, campaign_id: int) -> tuple[ServerView, ...]:
    servers = []
    storage = store.server_storage(campaign_id)
    gaps = store.major_gaps(campaign_id)
    setup = setup_facts(store, campaign_id)
    for s in store.server_records(campaign_id):
        # Masked again on the way out: databases written before settings were masked on the way in.
        variant = redact_settings(s.variant)
        settings = redact_settings(s.settings)
        servers.append(
            ServerView(
                label=server_label(s.name, variant),
                name=s.name,
                variant=tuple((str(k), str(v)) for k, v in sorted(variant.items())),
                kind=s.kind,
                version=s.version,
                version_num=s.version_num,
                install=s.install,
                data_dir=s.data_dir,
                settings=tuple((str(k), str(v)) for k, v in sorted(settings.items())),
                build=tuple(builds.describe(s.build)) if s.build else (),
                storage=storage_text(storage.get(s.name)),
                description=s.description,
                telemetry_gaps=tuple(sorted(gaps.get(s.name, {}).items())),
                setup=setup.get(s.name, ()),
            )
        )
    return tuple(servers)


def storage_text(found: ServerStorage | None) -> str | None:
    """The file system and its mount options ("ext4, rw,relatime (rw)"): what tells data
    directories on other file systems apart."""
    if found is None or found.fs_type is None:
        return None
    return found.fs_type + (f", {found.mount_options}" if found.mount_options else "")


def load_runs(store: Store, campaign_id: int, *, detail: bool = True) -> tuple[RunView, ...]:
    """The campaign's runs; with ``detail`` also their seconds, histograms, events and output."""
    records = store.run_records(campaign_id)
    ids = [r.id for r in records]
    diagnoses = store.diagnoses_by_run(ids)
    waits = {
        run_id: tuple((f"{w.wait_event_type}:{w.wait_event}", w.samples) for w in found)
        for run_id, found in store.wait_events_by_run(ids).items()
    }
    if not detail:
        return tuple(run_view(r, diagnoses.get(r.id), waits=waits.get(r.id, ())) for r in records)
    seconds = store.seconds_by_run(ids)
    histograms = store.histograms_by_run(ids)
    events = store.events_by_run(ids)
    affinity = store.affinity_by_run(ids)
    telemetry, left_out = _telemetry_by_run(store, records)
    campaign = store.campaign_record(campaign_id)
    return tuple(
        run_view(
            r,
            diagnoses.get(r.id),
            seconds=tuple(
                SecondView(
                    s.t, s.tps, s.latency_mean_ms, s.latency_min_ms, s.latency_max_ms, s.lag_ms
                )
                for s in seconds.get(r.id, ())
            ),
            histogram=parse_histogram(histograms.get((r.id, "latency"))),
            service_histogram=parse_histogram(histograms.get((r.id, "service"))),
            events=tuple(EventView(e.t, e.kind, e.detail) for e in events.get(r.id, ())),
            telemetry=telemetry.get(r.id, ()),
            telemetry_left_out=r.id in left_out,
            pgbench_output=_raw_output(store.path.parent, campaign, r) if campaign else None,
            cpu_affinity=tuple(affinity_text(a) for a in affinity.get(r.id, ())),
            waits=waits.get(r.id, ()),
        )
        for r in records
    )


def _other_load(found: RunDiagnosis | None) -> float | None:
    """The share of the host's CPUs other processes used, as the diagnosis recorded it."""
    other_load = None if found is None else found.details.get("other_load_share")
    return None if other_load is None else float(other_load)


# The registry's columns a RunView holds as stored; it derives these three from theirs.
DERIVED = frozenset({"server", "connect", "argv"})
VIEW_COLUMNS = tuple(
    c.key for c in RUN_COLUMNS if c.key in {f.name for f in fields(RunView)} - DERIVED
)


def run_view(r: RunRecord, diagnosis: RunDiagnosis | None = None, **extra: Any) -> RunView:
    options = tuple(
        (str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True))
        for k, v in sorted(r.spec.stored().items())
        if k not in AXIS_SPEC_KEYS
    )
    report = r.report
    return RunView(
        id=r.id,
        **{key: r[key] for key in VIEW_COLUMNS},
        server=server_label(r.spec.server, run_variant(r)),
        server_name=r.spec.server,
        connect=r.spec.connect,
        options=options,
        late_share=_share(report.late_pct if report else None),
        skipped_share=_share(report.skipped_pct if report else None),
        retried=report.retried if report else None,
        retries=report.retries if report else None,
        argv=r.argv,
        stored_warnings=findings.from_stored(r.warnings),
        profiled=r.spec.profile,
        diagnosis=diagnosis.verdict if diagnosis else None,
        diagnosis_evidence=diagnosis.evidence if diagnosis else (),
        other_load_share=_other_load(diagnosis),
        figures=_figures(r),
        pgbench_output=extra.pop("pgbench_output", None),
        **extra,
    )


def _figures(r: RunRecord) -> tuple[tuple[str, float], ...]:
    """The run's value of every metric it has (`store.metrics`)."""
    found = ((m.name, r[m.column]) for m in METRICS.values())
    return tuple((name, float(v)) for name, v in found if isinstance(v, int | float))


def _share(percent: Any) -> float | None:
    """pgbench's printed percentage as a fraction; its "nan" (nothing to divide) as None."""
    if not isinstance(percent, int | float) or not math.isfinite(percent):
        return None
    return float(percent) / 100


def _telemetry_by_run(
    store: Store, records: tuple[RunRecord, ...]
) -> tuple[dict[int, tuple[TelemetrySeries, ...]], set[int]]:
    """The telemetry series the detail of each run `charted` picks draws (only those rows are
    read: a thousand runs' would take seconds), and the runs whose telemetry is left out."""
    recorded = store.telemetry_facts_by_run([r.id for r in records])
    chosen = charted(
        (r.id, r.repeat, r.sequence, recorded[r.id].duration_s) for r in records if r.id in recorded
    )
    found = store.telemetry_points(chosen, wanted())
    series = {run: drawn_series(found.get(run, ()), recorded[run].host_cpus) for run in chosen}
    return series, set(recorded) - set(chosen)


def parse_histogram(text: str | None) -> HistogramView | None:
    """A stored histogram on display bins; None if absent or not a format this reads."""
    if not text:
        return None
    try:
        return display_histogram(LatencyHistogram.from_json(text))
    except ValueError:
        return None


def _raw_output(results_dir: Path, campaign: CampaignRecord, run: RunRecord) -> str | None:
    """pgbench's own report as it printed it, if the raw files were kept (inside the results
    directory: stored names never lead out of it)."""
    kept = run_artifacts(results_dir, campaign.name, campaign.id, run.sequence, run.run_key)
    if kept is None:
        return None
    path = kept / RAW_STDOUT
    try:
        data = zstandard.ZstdDecompressor().decompress(path.read_bytes(), max_output_size=1 << 24)
    except (OSError, zstandard.ZstdError):
        return None
    return data.decode(errors="replace")[:MAX_RAW_OUTPUT]
