"""`pgbenchlab campaigns`: the campaigns in a results database."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
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

# The plan's whole text and the machine facts are for `show`-like readers, not a listing.
JSON_SKIP = ("plan_text", "machine_json")


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
        campaigns = [dict(c) for c in store.campaigns()]
    if options.json:
        print(jsontext.dumps([as_json(c) for c in campaigns], indent=2))
        return EXIT_OK
    table = [["id", "name", "status", "runs", "started", "description"]]
    for c in campaigns:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(c["started_at"]))
        about = " ".join(str(c["description"]).split())  # one line per campaign
        table.append([str(c["id"]), c["name"], status_text(c), str(c["runs"]), started, about])
    print_table(table)
    return EXIT_OK


def status_text(campaign: dict[str, Any]) -> str:
    """The status, and the shards an incomplete merge lacks: "incomplete (2/3 missing)"."""
    missing = json.loads(campaign["missing_shards_json"])
    return f"{campaign['status']} ({', '.join(missing)} missing)" if missing else campaign["status"]


def as_json(campaign: dict[str, Any]) -> dict[str, Any]:
    """The campaign's columns, JSON ones decoded (`files_json` becomes `files`)."""
    row = {}
    for key, value in campaign.items():
        if key in JSON_SKIP:
            continue
        if key.endswith("_json"):
            row[key.removesuffix("_json")] = json.loads(value)
        else:
            row[key] = value
    return row
