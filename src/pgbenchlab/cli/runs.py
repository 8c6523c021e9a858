"""`pgbenchlab runs`: one line per run of a campaign."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pgbenchlab import jsontext
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    fmt,
    open_store,
    print_table,
)
from pgbenchlab.report.views.variants import run_variant, server_label
from pgbenchlab.results import missing_shards_text
from pgbenchlab.store import CampaignRecord, RunRecord, run_as_dict

HEADER = [
    "id",
    "server",
    "scale",
    "workload",
    "clients",
    "repeat",
    "status",
    "tps",
    "lat avg ms",
    "p99 ms",
    "latency from",
]


@dataclass(frozen=True)
class RunsOptions:
    results: Path
    campaign: str | None
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunsOptions:
        return cls(results=args.results, campaign=args.campaign, json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "runs",
        "list the runs of a campaign (the latest by default)",
        RunsOptions.from_args,
        run,
    )
    add_results_option(parser)
    parser.add_argument("--campaign", help="campaign name (default: the latest)")
    add_json_option(parser)


def run(options: RunsOptions) -> int:
    with open_store(options.results) as store:
        campaign = store.campaign_record(store.campaign_id(options.campaign))
        assert campaign is not None  # campaign_id found it
        records = store.run_records(campaign.id)
        origins = store.origins_by_run([r.id for r in records])
    # Where each run was made: runs stored before schema 13 have no record.
    made = [origins.get(r.id) for r in records]
    places = [(o.machine, o.shard) if o else (None, None) for o in made]
    if options.json:
        rows = [
            run_as_dict(r) | {"machine": machine, "shard": shard}
            for r, (machine, shard) in zip(records, places, strict=True)
        ]
        print(jsontext.dumps(rows, indent=2))
        print_incomplete(campaign, sys.stderr)
        return EXIT_OK
    # A campaign made on several machines or in shards (`merge`) says where each run was made.
    several = len(set(places)) > 1
    extra = ["machine", "shard"] if several else []
    print_table(
        [
            HEADER + extra,
            *(
                table_row(r) + ([str(m or "-"), str(s or "-")] if several else [])
                for r, (m, s) in zip(records, places, strict=True)
            ),
        ]
    )
    print_incomplete(campaign, sys.stdout)
    return EXIT_OK


def print_incomplete(campaign: CampaignRecord, stream: TextIO) -> None:
    """Below the runs of an incomplete merge: the shards whose runs are not here."""
    if campaign.missing_shards:
        missing = missing_shards_text(campaign.missing_shards)
        note = f'campaign "{campaign.name}" is incomplete: {missing} (merge their results in)'
        print(note, file=stream)


def table_row(r: RunRecord) -> list[str]:
    return [
        str(r.id),
        server_label(r.spec.server, run_variant(r)),  # as the report's "server" axis
        str(r.spec.scale),
        r.spec.workload,
        str(r.spec.clients),
        str(r.repeat),
        r.status,
        fmt(r.tps, ",.0f"),
        fmt(r.latency_avg_ms, ".3f"),
        fmt(r.p99_ms, ".3f"),
        r.latency_source or "-",
    ]
