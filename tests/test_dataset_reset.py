"""`[dataset] reset`: how each run finds its dataset. The plan key and its refusals, the run
column that records it (migration 31), the report's spread table and `show`'s line; and for
real, a tpcb-like cell whose data directory is restored from its snapshot before each repeat,
verified, with a tampered image caught."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from conftest_report import FakeServer, SyntheticPlan, write_synthetic
from pgbenchlab import installs, plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError
from pgbenchlab.plan import DatasetOptions, RunSpec
from pgbenchlab.report.render.run_text import tps_text
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.spread import reset_mode, spread_table
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.server import SUPERUSER
from pgbenchlab.server.snapshot import FILES, RECORD, SNAPSHOTS
from pgbenchlab.store import Store
from pgbenchlab.store.schema import MIGRATIONS
from support import QuietReporter, require_installs, run_errors
from test_faults import data_dir, db_rows
from test_plan_hosts import HOSTS
from test_plan_hosts import parse as parse_with_hosts


def plan_text(
    name: str, dataset: str, *, server: str = 'install = "embedded"', extra: str = ""
) -> str:
    return f"""
[campaign]
name = "{name}"
repeats = 3
[defaults]
duration = "1s"
warmup = "0s"
vacuum = "none"
{extra}
[dataset]
{dataset}
[[server]]
name = "pg"
{server}
[matrix]
scale = [1]
workload = ["tpcb-like"]
clients = [1]
"""


def parse(text: str, tmp_path: Path) -> plan.Plan:
    return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


# -- the plan key --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dataset", "server", "message"),
    [
        ('reset = "snap"', 'install = "embedded"', 'must be one of reuse, snapshot, init; got '
         "'snap'; did you mean \"snapshot\"?"),
        ("reset = 1", 'install = "embedded"', "must be one of reuse, snapshot, init; got 1"),
        ('reset = "snapshot"', 'dsn = "host=db dbname=bench"',
         "server pg is external (dsn); use reset = \"reuse\" or \"init\""),
        ('reset = "snapshot"\ntablespace = "/srv/ts"', 'install = "embedded"',
         "not the tablespace in /srv/ts: use reset = \"reuse\" or \"init\" with tablespaces"),
    ],
)  # fmt: skip
def test_a_wrong_reset_is_refused_in_one_line(
    dataset: str, server: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(PlanError) as raised:
        parse(plan_text("bad", dataset, server=server), tmp_path)
    text = str(raised.value)
    assert "dataset.reset: " in text and text.endswith(message) and "\n" not in text


def test_a_snapshot_of_a_server_on_a_host_is_refused(tmp_path: Path) -> None:
    text = HOSTS + plan_text("remote", 'reset = "snapshot"', server='host = "db1"')
    with pytest.raises(PlanError, match=r'server pg runs on \[\[host\]\] db1; use reset = "reuse"'):
        parse_with_hosts(text, tmp_path)
    parse_with_hosts(HOSTS + plan_text("remote", 'reset = "init"', server='host = "db1"'), tmp_path)


def test_reset_is_how_runs_find_a_dataset_not_how_it_is_made(tmp_path: Path) -> None:
    assert DatasetOptions(reset="snapshot").identity == ""  # the same database, pgbench_s1
    made = DatasetOptions(fillfactor=90).identity
    assert made == "5b776ef3"  # as before reset existed: the same datasets found again
    assert DatasetOptions(fillfactor=90, reset="init").identity == made
    assert resets(plan_text("s", 'reset = "snapshot"'), tmp_path) == {"snapshot"}
    assert resets(plan_text("r", ""), tmp_path) == {"reuse"}
    # a cell that runs pgbench -i before each run is an init cell whatever the plan's reset
    # says, and an external server may then be named (nothing of it is imaged)
    per_run = plan_text(
        "e", 'reset = "snapshot"', server='dsn = "host=db"\ninit = true', extra='reinit = "per-run"'
    )
    assert resets(per_run, tmp_path) == {"init"}


def resets(text: str, tmp_path: Path) -> set[str]:
    parsed = parse(text, tmp_path)
    return {parsed.reset_of(spec) for spec in parsed.specs}


# -- the record and its outputs ------------------------------------------------------------------


def test_a_database_of_version_30_gains_the_reset_column(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, 31)))
    db.execute("PRAGMA user_version = 30")
    db.close()
    spec = parse(plan_text("m", 'reset = "snapshot"'), tmp_path).specs[0]
    with Store(path) as store:
        campaign = store.start_campaign("m", "p.toml", "", "d", {"pgbenchlab": "0"}, {})
        store.record_run(campaign, _result(spec, 0, "snapshot (copy)"))
        store.record_run(campaign, _result(spec, 1, None))
        assert [r["reset"] for r in store.run_records(campaign)] == ["snapshot (copy)", None]


def _result(spec: RunSpec, sequence: int, reset: str | None) -> RunResult:
    return RunResult(
        run_key=f"{spec.run_key}-{sequence}", cell_id=spec.cell_id, sequence=sequence, repeat=1,
        status=RunStatus.FAILED, spec=spec.stored_cell, argv=(), started_at=0.0,
        finished_at=1.0, pgbench_version="18", error="none", reset=reset,
    )  # fmt: skip


def test_show_says_how_the_dataset_started_unless_reused() -> None:
    run = {"tps": 100.0, "warmup_tps": None, "vacuum_s": None, "checkpoint_s": 0.5}
    assert tps_text(run | {"reset": "reuse"}) == "100 tps; before it CHECKPOINT 0.50 s"
    assert tps_text(run | {"reset": None}) == "100 tps; before it CHECKPOINT 0.50 s"
    assert tps_text(run | {"reset": "snapshot (reflink)"}) == (
        "100 tps; before it the dataset restored from its snapshot (a reflink copy), "
        "CHECKPOINT 0.50 s"
    )
    assert "the dataset made again by pgbench -i" in tps_text(run | {"reset": "init"})
    assert [reset_mode(r) for r in (None, "reuse", "init", "snapshot (copy)")] == [
        "reuse", "reuse", "init", "snapshot"
    ]  # fmt: skip


def test_the_report_sets_the_spread_of_each_reset_side_by_side(tmp_path: Path) -> None:
    servers = (FakeServer("reused", "18.1"), FakeServer("restored", "18.1"))
    synthetic = SyntheticPlan(servers=servers, workloads=("tpcb-like",), clients=(1, 2))
    path = write_synthetic(tmp_path, synthetic)
    with Store(path) as store:
        assert spread_table(load_view(store, 1)) is None  # every run reused its dataset
        store.db.execute("UPDATE runs SET reset = 'snapshot (copy)' WHERE server = 'restored'")
        store.db.commit()
        found = spread_table(load_view(store, 1))
    assert found is not None
    assert [row[:3] for row in found.rows] == [
        ("reused · 1 client", "reuse", "3"),
        ("restored · 1 client", "snapshot", "3"),
        ("reused · 2 clients", "reuse", "3"),
        ("restored · 2 clients", "snapshot", "3"),
    ]
    assert all(row[4].endswith("%") and " … " in row[5] for row in found.rows)  # CV, interval


# -- for real ------------------------------------------------------------------------------------


class WatchTheDataset(QuietReporter):
    """At each run's start (its dataset ready, before anything ran on it): pgbench_history's
    rows and the cluster's system identifier; at each run's end, the rows it left. Before the
    third run, one relation file of the image altered."""

    def __init__(self, data: Path) -> None:
        super().__init__()
        self.data = data
        self.at_start: list[tuple[int, int]] = []
        self.at_end: list[int] = []
        self.tampered = ""

    def run_started(self, spec: RunSpec, index: int, total: int) -> None:
        super().run_started(spec, index, total)
        if index == 3:
            self.tampered = tamper(self.data / SNAPSHOTS / FILES)

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "vacuum":  # the dataset is ready: the run's hygiene comes next
            rows = self.read("SELECT count(*) FROM pgbench_history")
            identifier = self.read("SELECT system_identifier FROM pg_control_system()")
            self.at_start.append((rows, identifier))

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        super().run_finished(spec, result)
        if result.status == RunStatus.OK:
            self.at_end.append(self.read("SELECT count(*) FROM pgbench_history"))

    def read(self, sql: str) -> int:
        """One number from the run's database, over the server's own socket."""
        lines = (self.data / "postmaster.pid").read_text().splitlines()
        where = f"host={lines[4]} port={lines[3]} user={SUPERUSER} dbname=pgbench_s1"
        with psycopg.connect(where) as conn:
            row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


def tamper(files: Path) -> str:
    """One byte changed in the image's largest relation file (pgbench_accounts): its path
    under the data directory."""
    relations = (p for p in (files / "base").rglob("*") if p.is_file())
    largest = max(relations, key=lambda p: p.stat().st_size)
    with largest.open("r+b") as file:
        file.seek(4096 + 100)
        byte = file.read(1)
        file.seek(4096 + 100)
        file.write(bytes([byte[0] ^ 0xFF]))
    return str(largest.relative_to(files))


@pytest.mark.server
def test_each_repeat_starts_from_the_snapshot_and_a_tampered_image_fails_its_run(
    tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_installs("embedded")
    text = plan_text("snap", 'reset = "snapshot"')
    reporter = WatchTheDataset(data_dir(results_dir, "snap"))
    outcome = run_campaign(parse(text, tmp_path), results_dir, reporter)
    runs = db_rows(results_dir, "SELECT id, status, error, reset FROM runs ORDER BY id")
    assert [r["status"] for r in runs] == ["ok", "ok", "failed"], [r["error"] for r in runs]
    assert outcome.failed == 1
    # the first run's image taken once its dataset was built, the second restored from it: each
    # starts with an empty history though the run before wrote into it, in the same cluster
    assert [rows for rows, _ in reporter.at_start] == [0, 0]
    assert all(rows > 0 for rows in reporter.at_end) and len(reporter.at_end) == 2
    identifiers = {str(identifier) for _, identifier in reporter.at_start}
    record = data_dir(results_dir, "snap") / SNAPSHOTS / RECORD
    assert identifiers == {json.loads(record.read_text())["system_identifier"]}
    copied = runs[0]["reset"]
    assert copied in ("snapshot (copy)", "snapshot (reflink)") and runs[1]["reset"] == copied
    # the altered image: the run fails naming the file, the runs before kept
    error = runs[2]["error"]
    assert f"relation files differ: {reporter.tampered}" in error, error
    assert f"remove {data_dir(results_dir, 'snap') / SNAPSHOTS} to take" in error
    capsys.readouterr()
    assert main(["show", str(runs[1]["id"]), "--results", str(results_dir)]) == 0
    assert "the dataset restored from its snapshot" in capsys.readouterr().out
    assert main(["report", "--format", "markdown", "--results", str(results_dir)]) == 0
    report = capsys.readouterr().out
    assert "### Repeat-to-repeat spread by dataset reset" in report
    assert "| 1 client | snapshot | 2 |" in report, report


@pytest.fixture
def xfs_mount(tmp_path: Path) -> Iterator[Path]:
    """An XFS file system (reflinks on, mkfs.xfs's default) in a sparse file, loop-mounted for
    the test where the server account reaches it (not under pytest's private tmp_path), and
    unmounted after it. Root only; skipped (failed under CI) otherwise."""
    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None:
        pytest.skip("an XFS loop mount needs root and xfsprogs: reflink test NOT run")
    image = tmp_path / "xfs.img"
    with image.open("wb") as file:
        file.truncate(XFS_IMAGE_BYTES)
    subprocess.run(["mkfs.xfs", "-q", str(image)], check=True)
    mount = Path(tempfile.mkdtemp(prefix="pgbl-xfs-", dir="/var/tmp"))
    mount.chmod(0o755)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        mount.chmod(0o777)  # the server account makes its cluster inside
        yield mount
    finally:
        subprocess.run(["umount", "--detach-loop", str(mount)], check=True)
        mount.rmdir()


XFS_IMAGE_BYTES = 320 << 20  # mkfs.xfs's smallest file system is 300 MiB


@pytest.mark.server
def test_on_a_file_system_that_makes_reflinks_the_image_and_each_restore_share_extents(
    tmp_path: Path, results_dir: Path, xfs_mount: Path
) -> None:
    """The data directory on XFS: the image is a reflink copy, and so is every restore (the
    relation files' extents shared, as filefrag shows), the runs recording it."""
    require_installs("embedded")
    data = xfs_mount / "pg"
    server = f'install = "embedded"\ndata_dir = "{data}"'
    try:
        outcome = run_campaign(
            parse(plan_text("reflinked", 'reset = "snapshot"', server=server), tmp_path),
            results_dir,
            QuietReporter(),
        )
        assert outcome.failed == 0, run_errors(outcome)
        runs = db_rows(results_dir, "SELECT reset FROM runs ORDER BY id")
        assert [r["reset"] for r in runs] == ["snapshot (reflink)"] * 3
        image = data / SNAPSHOTS / FILES
        relation = max(
            (p for p in (image / "base").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
        )
        restored = data / relation.relative_to(image)
        for path in (relation, restored):
            extents = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True)
            assert "shared" in extents.stdout, extents.stdout
    finally:
        assert main(["clean", "--results", str(results_dir)]) == 0


def test_an_installation_without_pg_controldata_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prebuilt binaries ship no pg_controldata, which every restore needs: the plan check
    says so (here an installation of the embedded server's binaries without it)."""
    found = installs.resolve("embedded", installs.discover())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("postgres", "initdb", "pg_ctl"):
        (bin_dir / program).symlink_to(found.bin_dir / program)
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(
        plan_text("nocontrol", 'reset = "snapshot"', server=f'install = "{bin_dir}"')
    )
    results = tmp_path / "results"
    assert main(["run", str(plan_file), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "error: server pg: installation explicit-18 has no pg_controldata" in err, err
    assert not results.exists()
