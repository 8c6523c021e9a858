"""A campaign run in two shards (`run --shard 1/2`, `2/2`) into two results directories, as two
machines would, then joined by `pgbenchlab merge`: the merged campaign holds every run with its
shard and machine, and `runs`, `compare` and `report` read it as one campaign; each shard
resumes on its own; one shard merged alone is incomplete until the other's runs are made into
it. Real embedded PostgreSQL and pgbench, runs of 20 transactions per client."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from cli_process import run_cli
from pgbenchlab import plan
from pgbenchlab.analysis.comparison import ComparisonVerdict
from pgbenchlab.campaign import remove_clusters
from support import INDEX_AGAINST_SEQSCAN, require_installs

pytestmark = pytest.mark.server

# Sequential scans make select-only some fifty times slower at scale 1: a change far beyond the
# noise of runs this short.
PLAN = f"""
[campaign]
name = "fleet"
repeats = 2
[defaults]
transactions = 20
warmup = "0s"
checkpoint = false
{INDEX_AGAINST_SEQSCAN}[matrix]
scale = [1]
workload = ["select-only"]
clients = [1, 2]
"""


VERDICTS = {str(v) for v in ComparisonVerdict}


def cli_ok(*args: str | Path) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_shards_run_apart_merge_into_one_campaign(tmp_path: Path) -> None:
    require_installs("embedded")
    path = tmp_path / "fleet.toml"
    path.write_text(PLAN)
    parts = [tmp_path / "one", tmp_path / "two"]
    try:
        for k, results in enumerate(parts, start=1):
            cli_ok("run", path, "--shard", f"{k}/2", "-q", "--results", results)
        # A shard run again resumes: its runs are stored, nothing runs.
        again = run_cli("run", path, "--shard", "1/2", "--json", "--results", parts[0])
        assert again.returncode == 0, again.stderr
        events = [json.loads(line) for line in again.stdout.splitlines() if line.startswith("{")]
        started = next(e for e in events if e["event"] == "campaign_started")
        assert (started["todo"], started["done"]) == (0, 4)
    finally:
        for results in parts:
            remove_clusters(results)
    merged = tmp_path / "merged"
    cli_ok("merge", "--results", merged, *parts)

    runs = json.loads(cli_ok("runs", "--json", "--results", merged))
    whole = plan.load(path)
    assert sorted(r["run_key"] for r in runs) == sorted(s.run_key for s in whole.specs)
    assert {r["status"] for r in runs} == {"ok"}
    assert {r["machine"] for r in runs} == {socket.gethostname()}
    assert sorted({r["shard"] for r in runs}) == ["1/2", "2/2"]
    for shard in ("1/2", "2/2"):  # a point's servers and repeats stay on one machine
        mine = [r for r in runs if r["shard"] == shard]
        assert len(mine) == 4 and len({r["clients"] for r in mine}) == 1
    detail = json.loads(cli_ok("show", str(runs[-1]["id"]), "--json", "--results", merged))
    assert detail["origin"] == {"machine": runs[-1]["machine"], "shard": runs[-1]["shard"]}

    changes = json.loads(
        cli_ok("compare", "--baseline", "index", "--candidate", "seqscan", "--json",
               "--results", merged)
    )["changes"]  # fmt: skip
    tps = [c for c in changes if c["metric"] == "tps"]
    assert len(tps) == 2  # both client counts, each compared on the machine that ran it
    for change in tps:  # two repeats a side: the verdict may still ask for more runs
        assert (change["baseline_n"], change["candidate_n"]) == (2, 2)
        assert change["verdict"] in VERDICTS and change["relative_change"] < -0.5, change
    markdown = cli_ok("report", "--format", "markdown", "--results", merged)
    assert "seqscan" in markdown and "index" in markdown

    # One shard merged alone is incomplete, naming the other; once the other shard's runs are
    # made into it (the campaign resumes), it is finished.
    partial = tmp_path / "partial"
    assert "incomplete: shard 2/2 missing" in cli_ok("merge", "--results", partial, parts[0])
    (campaign,) = json.loads(cli_ok("campaigns", "--json", "--results", partial))
    assert (campaign["status"], campaign["missing_shards"]) == ("incomplete", ["2/2"])
    try:
        cli_ok("run", path, "--shard", "2/2", "-q", "--results", partial)
    finally:
        remove_clusters(partial)
    (campaign,) = json.loads(cli_ok("campaigns", "--json", "--results", partial))
    assert (campaign["status"], campaign["missing_shards"]) == ("finished", [])
    assert len(json.loads(cli_ok("runs", "--json", "--results", partial))) == 8
