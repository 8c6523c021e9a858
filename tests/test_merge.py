"""`pgbenchlab merge`: the results databases of a plan's shards joined into one that reads as if
one machine had run the campaign (every table carried, runs keeping their origin), a merge that
lacks shards marked incomplete, and the refusals (different plans, servers of other versions, a
run in two inputs, shards of different counts, other schema versions, a used output, hostile
inputs: names and links that would lead out of a results directory): one line, exit 2, nothing
written. Synthetic databases written through the real `Store`; the real campaign run in shards
is tests/test_fleet_real.py."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import zstandard

from cli_process import run_cli
from conftest_report import SyntheticPlan, results_of
from pgbenchlab.campaign.fleet import merge_results
from pgbenchlab.errors import StoreError
from pgbenchlab.report.views import compare
from pgbenchlab.results import RunHost, RunOrigin, RunResult
from pgbenchlab.server import ServerFacts
from pgbenchlab.store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    BisectionRecord,
    ProbeRecord,
    Store,
    run_artifacts,
)
from pgbenchlab.store.merge import TABLES, schema_tables

PLAN = SyntheticPlan(
    name="fleet", workloads=("select-only",), clients=(1, 2, 4), repeats=3, telemetry=True
)
PLAN_TEXT = "[campaign]\nname = 'fleet'\n"
BISECTION = BisectionRecord("b", {"good": "a"}, (), (), "running", None, 1.0, 2.0)


def test_the_merge_knows_every_table_of_the_schema(tmp_path: Path) -> None:
    # A migration that adds a table must say how the merge carries it (store.merge.TABLES).
    with Store(tmp_path / "results.db") as store:
        assert schema_tables(store.db) == sorted(TABLES)


def all_results() -> list[RunResult]:
    results = results_of(PLAN, random.Random(PLAN.seed))
    return [replace(r, sysctl=(("vm.swappiness", str(r.sequence)),)) for r in results]


def write_part(
    results_dir: Path,
    runs: Sequence[RunResult],
    origin: RunOrigin | None,
    *,
    digest: str = "d1",
    plan_text: str = PLAN_TEXT,
    machine: str = "m1",
    minor: int = 0,
) -> Path:
    """A results directory holding these runs of the campaign, as the machine stored them."""
    with Store(results_dir / "results.db") as store:
        campaign = store.start_campaign(
            PLAN.name, "fleet.toml", plan_text, digest, {"pgbenchlab": "x"}, {"hostname": machine}
        )
        for server in PLAN.servers:
            version = f"{server.version}.{minor}" if minor else server.version
            version_num = int(server.version.split(".")[0]) * 10000 + minor
            facts = ServerFacts(server.name, "managed", version, version_num, {}, {}, "15", None)
            store.record_server(campaign, facts, {})
        store.record_dataset(campaign, "pg15", 1, "bench", 1.5)
        hosts = (RunHost("pgbench", "local"), RunHost("server", "local"))
        for result in runs:
            run_id = store.record_run(campaign, result, hosts, origin)
            probe = ProbeRecord(run_id, "cell", "start", None, 1, True, "ok", result.tps)
            store.record_probe(campaign, probe)
            kept = run_artifacts(results_dir, PLAN.name, campaign, result.sequence, result.run_key)
            assert kept is not None
            kept.mkdir(parents=True)
            (kept / "stdout.txt.zst").write_bytes(zstandard.compress(result.run_key.encode()))
        store.save_bisection(BISECTION)
        store.finish_campaign(campaign, "finished")
    return results_dir


def shards(tmp_path: Path) -> tuple[Path, Path]:
    """The runs of clients 1 on machine m1 (shard 1/2), the others on m2 (shard 2/2)."""
    results = all_results()
    first = [r for r in results if r.spec.clients == 1]
    second = [r for r in results if r.spec.clients != 1]
    return (
        write_part(tmp_path / "a", first, RunOrigin("m1", "1/2")),
        write_part(tmp_path / "b", second, RunOrigin("m2", "2/2"), machine="m2"),
    )


def counts(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        db.close()


def test_merged_shards_read_as_one_machine_s_campaign(tmp_path: Path) -> None:
    a, b = shards(tmp_path)
    whole = write_part(tmp_path / "whole", all_results(), RunOrigin("m1", None))
    merged = merge_results(tmp_path / "merged", [a, b / "results.db"])
    assert [(m.name, m.inputs, m.runs) for m in merged] == [("fleet", 2, len(all_results()))]
    # Every table carried: as many rows as one machine wrote (the first input's server facts).
    expected = counts(whole / "results.db") | {"bisections": 1, "datasets": 2}
    assert counts(tmp_path / "merged" / "results.db") == expected
    assert sum(1 for n in expected.values() if n) >= 12
    with Store(whole / "results.db") as one, Store(tmp_path / "merged/results.db") as joined:
        assert [r.values for r in joined.run_records(joined.campaign_id("fleet"))] == [
            r.values for r in one.run_records(one.campaign_id("fleet"))
        ]
        changes = compare.within_campaign(joined, "fleet", "pg15", "pg18", 0.02)
        assert changes == compare.within_campaign(one, "fleet", "pg15", "pg18", 0.02)
        assert len({c.cell for c in changes}) == len(PLAN.clients)
        records = joined.run_records(joined.campaign_id("fleet"))
        origins = joined.origins_by_run([r.id for r in records])
        for record in records:
            machine = "m1" if record.values["clients"] == 1 else "m2"
            shard = "1/2" if machine == "m1" else "2/2"
            assert origins[record.id] == RunOrigin(machine, shard)
            assert {h.host for h in joined.run_hosts(record.id)} == {"local"}
            assert joined.run_sysctl(record.id) == {"vm.swappiness": str(record.values["sequence"])}
        campaign = joined.find_campaign("fleet")
        assert campaign is not None and campaign.status == "finished"
        archive = joined.artifacts_dir(campaign)
        assert archive is not None
        kept = sorted(p.name for p in archive.iterdir())
    assert kept == sorted(f"{r.sequence:04d}-{r.run_key}" for r in all_results())


def test_a_campaign_started_anew_and_runs_without_origin(tmp_path: Path) -> None:
    results = all_results()
    a = write_part(tmp_path / "a", results[:1], None, digest="old")  # then --fresh
    write_part(a, results[1:3], None)
    b = write_part(tmp_path / "b", results[3:4], None, machine="m2")
    merge_results(tmp_path / "m", [a, b])
    with Store(tmp_path / "m" / "results.db") as store:
        listed = store.campaign_summaries()
        campaigns = [(s.campaign.name, s.campaign.plan_digest, s.runs) for s in listed]
        assert campaigns == [("fleet", "old", 1), ("fleet", "d1", 3)]  # the joined one latest
        ids = [r.id for r in store.run_records(store.campaign_id("fleet"))]
        machines = [o.machine for o in store.origins_by_run(ids).values()]
    assert sorted(machines) == ["m1", "m1", "m2"]  # the campaign's machine, unsharded


def refused(tmp_path: Path, inputs: list[Path], match: str) -> None:
    out = tmp_path / "merged"
    with pytest.raises(StoreError, match=match):
        merge_results(out, inputs)
    assert not out.exists()
    done = run_cli("merge", "--results", out, *inputs)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and match.split()[0] in done.stderr
    assert not out.exists()


def test_campaigns_whose_plans_differ_are_refused(tmp_path: Path) -> None:
    results = all_results()
    a = write_part(tmp_path / "a", results[:2], None)
    b = write_part(tmp_path / "b", results[2:4], None, digest="d2", plan_text=PLAN_TEXT + "x=1\n")
    refused(tmp_path, [a, b], "different plans")


def test_shards_whose_servers_ran_other_versions_are_refused(tmp_path: Path) -> None:
    results = all_results()
    a = write_part(tmp_path / "a", results[:2], RunOrigin("m1", "1/2"))
    b = write_part(tmp_path / "b", results[2:4], RunOrigin("m2", "2/2"), machine="m2", minor=3)
    refused(tmp_path, [a, b], f"server {PLAN.servers[0].name} ran PostgreSQL")


def test_a_run_in_two_inputs_is_refused(tmp_path: Path) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], None)
    shutil.copytree(a, tmp_path / "copy")
    refused(tmp_path, [a, tmp_path / "copy"], "in both")
    refused(tmp_path, [a, a / "results.db"], "given twice")


def test_other_schema_versions_are_refused(tmp_path: Path) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], None)
    older = tmp_path / "old"
    older.mkdir()
    db = sqlite3.connect(older / "results.db")
    db.executescript("".join(MIGRATIONS[v] for v in range(1, SCHEMA_VERSION)))
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    db.close()
    refused(tmp_path, [a, older], f"schema {SCHEMA_VERSION - 1}")
    refused(tmp_path, [a, tmp_path / "nothing"], "no results database")


def test_the_output_must_be_a_new_directory(tmp_path: Path) -> None:
    a, b = shards(tmp_path)
    out = tmp_path / "used"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not an empty directory"):
        merge_results(out, [a, b])
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    done = run_cli("merge", "--results", tmp_path / "fresh", a, b, "--json")
    assert done.returncode == 0, done.stderr
    assert '"runs": 18' in done.stdout


def test_shards_of_a_plan_that_grew_merge_under_the_grown_plan_incomplete_by_the_new_sets(
    tmp_path: Path,
) -> None:
    """Machine m1 added a test set to the plan (`run` joined it to its shard 1/2), m2 ran its
    shard 2/2 before: the merge takes the grown plan, and lacks the new set's shard 2/2."""
    before = PLAN_TEXT + "[[server]]\nname = 'pg15'\ninstall = '15'\n"
    grown = before + "[[server]]\nname = 'fast'\ninstall = '15'\n"
    a, b = shards(tmp_path)
    for path, text, digest in ((a, grown, "grown"), (b, before, "d1")):
        crafted(path, "UPDATE campaigns SET plan_text = ?, plan_digest = ?", text, digest)
    merged = merge_results(tmp_path / "merged", [b, a])
    assert [(m.name, m.missing) for m in merged] == [("fleet", ("2/2 of test set(s) fast",))]
    with Store(tmp_path / "merged" / "results.db") as store:
        campaign = store.find_campaign("fleet")
        assert campaign is not None and campaign.plan_text == grown
        assert campaign.status == "incomplete"
        assert len(store.run_records(campaign.id)) == len(all_results())
        # the grown plan run into it: shard 1/2 leaves the mark, its shard 2/2 run whole clears it
        store.finish_campaign(campaign.id, "finished", "1/2")
        assert store.find_campaign("fleet").missing_shards == ("2/2 of test set(s) fast",)  # type: ignore[union-attr]
        store.finish_campaign(campaign.id, "finished", "2/2")
        again = store.find_campaign("fleet")
        assert again is not None and (again.status, again.missing_shards) == ("finished", ())
    crafted(b, "UPDATE campaigns SET plan_text = ?", before.replace("'15'", "'16'"))
    refused(tmp_path / "otherwise", [a, b], "different plans")


def test_shards_of_different_counts_are_refused(tmp_path: Path) -> None:
    results = all_results()
    a = write_part(tmp_path / "a", results[:3], RunOrigin("m1", "2/2"))
    b = write_part(tmp_path / "b", results[3:6], RunOrigin("m2", "1/3"), machine="m2")
    refused(tmp_path, [a, b], "shards of different counts")
    c = write_part(tmp_path / "c", results[6:9], None, machine="m3")  # the whole plan: 1/1
    refused(tmp_path, [a, c], "shards of different counts")


def test_a_merge_lacking_shards_is_incomplete_and_names_them(tmp_path: Path) -> None:
    results = all_results()
    a = write_part(tmp_path / "a", results[:3], RunOrigin("m1", "2/3"))
    out = tmp_path / "merged"
    done = run_cli("merge", "--results", out, a)
    assert done.returncode == 0, done.stderr
    assert "incomplete: shards 1/3, 3/3 missing" in done.stdout
    with Store(out / "results.db") as store:
        campaign = store.find_campaign("fleet")
        assert campaign is not None
        assert (campaign.status, campaign.missing_shards) == ("incomplete", ("1/3", "3/3"))
    listed = run_cli("campaigns", "--results", out)
    assert "incomplete (1/3, 3/3 missing)" in listed.stdout, listed.stdout
    (row,) = json.loads(run_cli("campaigns", "--json", "--results", out).stdout)
    assert (row["status"], row["missing_shards"]) == ("incomplete", ["1/3", "3/3"])
    runs = run_cli("runs", "--results", out)
    assert runs.returncode == 0 and "shards 1/3, 3/3 missing" in runs.stdout, runs.stdout
    report = run_cli("report", "--format", "markdown", "--results", out)
    assert "(incomplete)" in report.stdout and "shards 1/3, 3/3 missing" in report.stdout
    # The missing shards merged in later: complete.
    b = write_part(tmp_path / "b", results[3:6], RunOrigin("m2", "1/3"), machine="m2")
    c = write_part(tmp_path / "c", results[6:9], RunOrigin("m3", "3/3"), machine="m3")
    merge_results(tmp_path / "all", [out, b, c])
    with Store(tmp_path / "all" / "results.db") as store:
        campaign = store.find_campaign("fleet")
        assert campaign is not None
        assert (campaign.status, campaign.missing_shards) == ("finished", ())


# -- hostile inputs: results directories from another machine ---------------------------------


def crafted(path: Path, sql: str, *values: str) -> None:
    """The input's database changed as a hostile machine would."""
    db = sqlite3.connect(path / "results.db")
    try:
        db.execute(sql, values)
        db.commit()
    finally:
        db.close()


def outside_secret(tmp_path: Path) -> Path:
    """A directory outside every results directory, holding what must never be copied."""
    secret = tmp_path / "secret"
    secret.mkdir(exist_ok=True)
    (secret / "stdout.txt.zst").write_bytes(zstandard.compress(b"SECRET"))
    return secret


def nothing_leaked(tmp_path: Path) -> None:
    copies = [p for p in tmp_path.rglob("*") if p.name == "stdout.txt.zst" and p.is_file()]
    assert [p for p in copies if p.read_bytes() == zstandard.compress(b"SECRET")] == [
        tmp_path / "secret" / "stdout.txt.zst"
    ]


@pytest.mark.parametrize("name", ["../x", "..", ".hidden", "a/../../b", "x\0y"])
def test_a_campaign_name_that_is_no_plain_name_is_refused(tmp_path: Path, name: str) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    # The name's artifacts directory, where a campaign of that name would keep them.
    os.rename(a / "artifacts" / "fleet-1", tmp_path / "secret")
    crafted(a, "UPDATE campaigns SET name = ?", name)
    refused(tmp_path, [a], "campaign name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "secret"]


def test_a_run_key_that_is_no_plain_name_is_refused(tmp_path: Path) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    crafted(a, "UPDATE runs SET run_key = '../../../secret' WHERE id = 1")
    refused(tmp_path, [a], "run key")


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("UPDATE servers SET name = '../../x' WHERE id = 1", "server name"),
        ("UPDATE runs SET server = 'a/b' WHERE id = 2", "server name"),
        ("UPDATE bisections SET name = '../b'", "bisection name"),
    ],
)
def test_other_names_that_are_no_plain_names_are_refused(
    tmp_path: Path, sql: str, what: str
) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    crafted(a, sql)
    refused(tmp_path, [a], what)


def test_a_symbolic_link_in_an_input_s_archive_is_refused(tmp_path: Path) -> None:
    secret = outside_secret(tmp_path)
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    run_dir = next((a / "artifacts" / "fleet-1").iterdir())
    (run_dir / "stdout.txt.zst").unlink()
    (run_dir / "stdout.txt.zst").symlink_to(secret / "stdout.txt.zst")
    refused(tmp_path, [a], "symbolic link")
    shutil.rmtree(run_dir)
    run_dir.symlink_to(secret)  # a run's directory
    refused(tmp_path, [a], "symbolic link")
    run_dir.unlink()
    shutil.rmtree(a / "artifacts")
    (a / "artifacts").symlink_to(secret.parent)  # the whole archive, leading out
    refused(tmp_path, [a], "leads out")
    nothing_leaked(tmp_path)


def test_a_named_pipe_in_an_input_s_archive_is_refused(tmp_path: Path) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    os.mkfifo(next((a / "artifacts" / "fleet-1").iterdir()) / "pipe")  # copying it would hang
    refused(tmp_path, [a], "not a regular file")


def test_a_refused_merge_leaves_an_empty_output_directory_as_it_was(tmp_path: Path) -> None:
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    crafted(a, "UPDATE campaigns SET name = '../x'")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(StoreError, match="campaign name"):
        merge_results(out, [a])
    assert list(out.iterdir()) == []


def test_readers_never_follow_stored_names_out_of_the_results_directory(tmp_path: Path) -> None:
    # A results directory from elsewhere, read as it is (no merge): a run's archive is a link
    # to a directory outside, another's run key climbs out through a directory made for it.
    secret = outside_secret(tmp_path)
    a = write_part(tmp_path / "a", all_results()[:3], RunOrigin("m1", "1/1"))
    runs = sorted((a / "artifacts" / "fleet-1").iterdir())
    shutil.rmtree(runs[0])
    runs[0].symlink_to(secret)
    (a / "artifacts" / "fleet-1" / "0002-").mkdir()
    crafted(a, "UPDATE runs SET run_key = '/../../../../secret' WHERE sequence = 2")
    for run_id in (1, 2):
        shown = run_cli("show", str(run_id), "--results", a)
        assert shown.returncode == 0, shown.stderr
        assert "SECRET" not in shown.stdout
    page = run_cli("report", "--results", a, "-o", tmp_path / "report.html")
    assert page.returncode == 0, page.stderr
    assert "SECRET" not in (tmp_path / "report.html").read_text()
