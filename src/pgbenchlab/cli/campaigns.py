"""`pgbenchlab campaigns`: the campaigns in a results database."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pgbenchlab import jsontext
from pgbenchlab.cli.common import (
    EXIT_OK,
    Subparsers,
    add_command,
    add_json_option,
    add_results_option,
    open_store,
    print_table,
)
from pgbenchlab.store import CampaignRecord, CampaignSummary

# The plan's whole text and the machine facts are for `show`-like readers, not a listing.
JSON_SKIP = ("plan_text", "machine")


@dataclass(frozen=True)
class CampaignsOptions:
    results: Path
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CampaignsOptions:
        return cls(results=args.results, json=args.json)


def add_arguments(subparsers: Subparsers) -> None:
    parser = add_command(
        subparsers,
        "campaigns",
        "list the campaigns in a results database",
        CampaignsOptions.from_args,
        run,
    )
    add_results_option(parser)
    add_json_option(parser)


def run(options: CampaignsOptions) -> int:
    with open_store(options.results) as store:
        summaries = store.campaign_summaries()
    if options.json:
        print(jsontext.dumps([as_json(s) for s in summaries], indent=2))
        return EXIT_OK
    table = [["id", "name", "status", "runs", "started", "description"]]
    for s in summaries:
        c = s.campaign
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.started_at))
        about = " ".join(c.description.split())  # one line per campaign
        table.append([str(c.id), c.name, status_text(c), str(s.runs), started, about])
    print_table(table)
    return EXIT_OK


def status_text(campaign: CampaignRecord) -> str:
    """The status, and the shards an incomplete merge lacks: "incomplete (2/3 missing)"."""
    missing = campaign.missing_shards
    return f"{campaign.status} ({', '.join(missing)} missing)" if missing else campaign.status


def as_json(summary: CampaignSummary) -> dict[str, Any]:
    """The campaign's stored fields (its plan's text and the machine's facts left out) and
    its number of runs."""
    found = {k: v for k, v in asdict(summary.campaign).items() if k not in JSON_SKIP}
    return found | {"runs": summary.runs}
