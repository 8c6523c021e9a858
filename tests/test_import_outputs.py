"""`pgbenchlab import outputs` on a tree that real pgbench 13, 15 and 18 wrote, shell-loop
style, against a real PostgreSQL 15: every imported TPS, count and latency is the text pgbench
printed, the percentiles are exact from the -l logs (counted here from the log lines), every
file is recorded with its SHA-256, a re-import is a no-op, a pattern contradicting a report
stores nothing, and the imported campaign is compared with a new real campaign."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from pgbenchlab import builds, installs, osuser, plan
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.errors import UserError
from pgbenchlab.importing import AxisMap, import_outputs
from pgbenchlab.report.views import compare
from pgbenchlab.report.views import run as runview
from pgbenchlab.store import RunRecord, Store
from support import QuietReporter, managed_server, require_installs

pytestmark = pytest.mark.server

FAST = ("--without-readline", "--without-icu", "--without-zlib")  # test_builds_real's 13
TREE_MAP = r"(?P<server>pg\d+)/(?:[^/]*/)?(?:c(?P<clients>\d+)-s(?P<scale>\d+))?"
# The loops a user ran, in each version's directory: -l and -P with the log named after the
# output and stderr in it too (two repeats for 15), -P without -l (stderr to a file of its own;
# 2 s, as pgbench never prints the last interval), neither, and -l without -P in a directory of
# its own with the default log name.
LOOPS = """
set -e
for r in $REPEATS; do for c in 1 2; do
  "$PGBENCH" -n -S -c $c -j $c -T 1 -P 1 -l --log-prefix=c$c-s1-r$r > c$c-s1-r$r.txt 2>&1
done; done
mkdir plain && "$PGBENCH" -n -S -c 2 -j 2 -T 2 -P 1 > plain/c2-s1.txt 2> plain/c2-s1.err
mkdir bare && "$PGBENCH" -n -c 1 -T 1 > bare/c1-s1.txt 2> bare/c1-s1.err
mkdir run-1 && cd run-1 && "$PGBENCH" -n -c 2 -j 2 -T 1 -l > out.txt 2>/dev/null
"""
NEW_CAMPAIGN = """
[campaign]
name = "this-week"
repeats = 2
[defaults]
duration = "1s"
warmup = "0s"
protocol = "simple"  # pgbench's default, as the old loops ran
[[server]]
name = "pg15"
install = "15"
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1, 2]
"""


@dataclass(frozen=True)
class Tree:
    root: Path
    versions: tuple[str, ...]


def pgbench_13(cache: Path) -> Path:
    """pgbench 13 as test_builds_real builds it (a hit in the suite's build cache)."""
    recipe = builds.BuildRecipe("pg13", "debian:postgresql-13", configure=FAST)
    return builds.ensure(recipe, root=cache).binary("pgbench")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Iterator[Tree]:
    require_installs("15", "embedded")
    found = installs.discover()
    pgbenches = {
        "13": pgbench_13(build_cache),
        "15": installs.resolve("15", found).binary("pgbench"),
        "18": installs.resolve("embedded", found).binary("pgbench"),
    }
    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve("15", found), account)
    root = tmp_path_factory.mktemp("shell-loops")
    with managed_server("import15", install) as server:
        env = {**os.environ, **server.endpoint.libpq_env(), "PG_COLOR": "never"}
        init = [str(pgbenches["15"]), "-i", "-q", "-s", "1"]
        subprocess.run(init, env=env, check=True, capture_output=True)
        versions = []
        for version, pgbench in pgbenches.items():
            where = root / f"pg{version}"
            where.mkdir()
            repeats = "1 2" if version == "15" else "1"
            loop_env = env | {"PGBENCH": str(pgbench), "REPEATS": repeats}
            subprocess.run(["bash", "-c", LOOPS], cwd=where, env=loop_env, check=True)
            versions.append(version)
        yield Tree(root, tuple(versions))


def text_of(record: RunRecord, store: Store) -> str:
    detail = runview.load(store, record.id)
    assert detail.output_kept
    return detail.pgbench_output


def printed(text: str, pattern: str) -> Decimal | None:
    match = re.search(pattern, text, re.MULTILINE)
    return None if match is None else Decimal(match.group(1))


def stored(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(repr(value))


def log_latencies(files: list[Path]) -> list[int]:
    """Every successful transaction's latency (µs), read here from the log lines."""
    return [int(line.split()[2]) for f in files for line in f.read_text().splitlines()]


def nearest_rank(values: list[int], p: str) -> float:
    ordered = sorted(values)
    rank = max(1, -(-Fraction(p) * len(ordered) // 100))
    return ordered[int(rank) - 1] / 1000


def test_every_figure_is_what_pgbench_printed(tree: Tree, tmp_path: Path) -> None:
    results = tmp_path / "results"
    outcome = import_outputs(results, tree.root, AxisMap.parse(TREE_MAP), "loops")
    assert outcome.unread == ()
    with Store(results / RESULTS_DB) as store:
        campaign = store.find_campaign("loops")
        assert campaign is not None and campaign.status == "imported"
        runs = store.run_records(campaign.id)
        assert len(runs) == len(tree.versions) * 5 + 2  # 15 ran its -l -P loop twice
        files = {f.path: f for f in store.imported_files(campaign.id)}
        for record in runs:
            text = text_of(record, store)  # the output as the shell loop wrote it
            tps_line = r"^tps = ([\d.]+) \((?:without initial|excluding) connection"
            assert stored(record["tps"]) == printed(text, tps_line)
            assert record["transactions"] == int(
                printed(text, r"^number of transactions actually processed: (\d+)$") or -1
            )
            average = printed(text, r"^latency average = ([\d.]+) ms")
            assert Decimal(repr(record.report.latency_avg_ms)) == average
            deviation = printed(text, r"^latency stddev = ([\d.]+) ms$")
            assert stored(record["latency_stddev_ms"]) == deviation
            assert stored(record["latency_avg_ms"]) == (average if deviation else None)
            connection = r"^(?:initial connection time|average connection time) = ([\d.]+) ms$"
            assert stored(record["connection_time_ms"]) == printed(text, connection)
        for path, file in files.items():
            digest = hashlib.sha256((tree.root / path).read_bytes()).hexdigest()
            assert file.sha256 == digest, path
        by_output = {f.path: f.run for f in files.values() if f.role == "output"}
        logs = [f for f in files.values() if f.role == "log"]
        assert {f.role for f in files.values()} == {"output", "log", "stderr"}
        assert len({f.run for f in logs}) == len(tree.versions) * 3 + 2  # each run with -l
        for output, run_id in by_output.items():
            record = store.run_record(int(run_id or 0))
            assert record is not None
            paths = sorted(tree.root / f.path for f in logs if f.run == run_id)
            if not paths:
                assert record["latency_source"] is None, output
                continue
            latencies = log_latencies(paths)
            assert len(paths) == record["threads"] and record["latency_samples"] == len(latencies)
            assert record["latency_source"] == "full log"
            for p in STANDARD_PERCENTILES:
                column = "p999_ms" if p == "99.9" else f"p{p}_ms"
                assert record[column] == nearest_rank(latencies, p), (output, p)
            assert record["min_ms"] == min(latencies) / 1000
            assert record["max_ms"] == max(latencies) / 1000
        seconds = store.seconds_by_run([r.id for r in runs])
        for version in tree.versions:
            bare = by_output[f"pg{version}/bare/c1-s1.txt"]
            assert bare not in seconds  # no -P, no log: no series
            plain = by_output[f"pg{version}/plain/c2-s1.txt"]  # -P 1 lines in c2-s1.err
            err = (tree.root / f"pg{version}/plain/c2-s1.err").read_text()
            tps = [s.tps for s in seconds[int(plain or 0)]]
            assert tps and tps == [float(t) for t in re.findall(r", ([\d.]+) tps,", err)]
    # 14+ name the server (18's pgbench: "server 15.18"); 13's report names no version
    servers = {s.facts.name: s.facts.version for s in outcome.campaign.servers}
    assert servers["pg15"].startswith("15.") and servers["pg18"].startswith("15.")
    assert servers["pg13"] == "unknown"
    clients = {r.spec.server: r.pgbench_version for r in outcome.campaign.runs}
    assert clients["pg18"].startswith("pgbench (PostgreSQL) 18.")
    assert clients["pg13"].startswith("unknown")


def test_reimport_is_a_no_op_and_a_contradiction_stores_nothing(
    tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    args = ["import", "outputs", str(tree.root), "--map", TREE_MAP, "--results", str(results)]
    assert main([*args, "--name", "first"]) == 0
    assert "campaign 'first'" in capsys.readouterr().out
    assert main([*args, "--name", "again"]) == 0
    assert "already imported as campaign 'first'" in capsys.readouterr().out
    wrong = AxisMap.parse(r"(?:c\d-s1-r(?P<clients>\d))?")  # the repeat read as the clients
    said = "pg13/c2-s1-r1.txt: --map gives clients=1 but pgbench's report says 2"
    with pytest.raises(UserError, match=said):
        import_outputs(results, tree.root, wrong, "bad")
    with Store(results / RESULTS_DB) as store:
        assert [s.campaign.name for s in store.campaign_summaries()] == ["first"]


def test_an_imported_campaign_compares_with_a_new_one(
    tree: Tree, tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = r"(?:c(?P<clients>\d+)-s(?P<scale>\d+))?"
    import_outputs(results_dir, tree.root / "pg15", AxisMap.parse(only), "2019-upgrade")
    the_plan = plan.parse(NEW_CAMPAIGN, str(tmp_path / "new.toml"), base=tmp_path)
    run_campaign(the_plan, results_dir, QuietReporter())
    with Store(results_dir / RESULTS_DB) as store:
        changes = compare.across_campaigns(store, "2019-upgrade", "this-week", 0.02)
    tps = {c.cell: c for c in changes if c.metric == "tps"}
    assert set(tps) == {  # the imported tpcb-like and 2 s runs have no match
        "workload=select-only, clients=1, duration=1 s",
        "workload=select-only, clients=2, duration=1 s",
    }
    tps = {key.split(", ")[1]: change for key, change in tps.items()}
    assert tps["clients=1"].baseline_n == 2 and tps["clients=2"].baseline_n == 2
    assert all(c.ci_low is not None and c.ci_high is not None for c in tps.values())
    argv = ["compare", "2019-upgrade", "this-week", "--results", str(results_dir)]
    assert main(argv) == 0
    assert "clients=2" in capsys.readouterr().out
    for command in (["campaigns"], ["runs", "--campaign", "2019-upgrade"], ["show", "1"]):
        assert main([*command, "--results", str(results_dir)]) == 0
    page = tmp_path / "report.html"
    report = ["report", "--campaign", "2019-upgrade", "-o", str(page)]
    assert main([*report, "--results", str(results_dir)]) == 0
    assert "2019-upgrade" in page.read_text()
