"""Kernel tunables as an axis: the plan's `[matrix.sysctl]`, and `KernelTunables` on a stand-in
/proc/sys (a directory of files) — journal before any change, verified, restored, repaired from
a journal a killed campaign left, refused when not root or unknown. A campaign through the
executor seam records each run's tunables and puts them back. The real kernel's are in
test_tunables_real.py."""

from __future__ import annotations

import errno
import json
import sqlite3
import threading
from pathlib import Path, PurePath, PurePosixPath

import pytest

from pgbenchlab import exporting, plan
from pgbenchlab.analysis.comparison import DEFAULT_THRESHOLD
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.campaign.runner import conduct
from pgbenchlab.cli.runs import table_row
from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import LOCAL_HOST, LocalHost
from pgbenchlab.report.render.run_text import run_lines
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.compare import within_campaign
from pgbenchlab.report.views.run import run_detail
from pgbenchlab.report.views.steps import axis_orders
from pgbenchlab.store import BACKFILLS, Store
from pgbenchlab.store.columns import COLUMN
from pgbenchlab.tunables import PARTNERS, KernelTunables, TunableError
from replay import Replay, ReplayExecutor, StandInServers, client, recorded
from support import QuietReporter, run_errors

PLAN = """
[campaign]
name = "tuned"
[defaults]
duration = "2s"
warmup = "0s"
threads = 1
latency_log = "off"
[[server]]
name = "ext"
dsn = "host=/nonexistent port=5432 user=bench dbname=bench"
init = true
[matrix]
scale = [1]
workload = ["tpcb-like"]
clients = [1]
{sysctl}
"""
AXIS = '[matrix.sysctl]\n"vm.dirty_background_bytes" = [0, 67108864]'


def parse(tmp_path: Path, sysctl: str) -> plan.Plan:
    return plan.parse(PLAN.format(sysctl=sysctl), str(tmp_path / "p.toml"), base=tmp_path)


def fake_proc(tmp_path: Path, values: dict[str, str]) -> PurePosixPath:
    root = tmp_path / "proc-sys"
    for name, value in values.items():
        path = root / name.replace(".", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return PurePosixPath(root)


class PairedKernel(LocalHost):
    """Files that behave as the kernel's pairs: writing one zeroes its partner, and a 0 for a
    *_bytes tunable is refused (as Linux 6.x does for vm.dirty_background_bytes)."""

    def write_in_place(self, path: PurePath, text: str) -> None:
        if path.name.endswith("_bytes") and text.strip() == "0":
            raise OSError(errno.EINVAL, "Invalid argument")
        super().write_in_place(path, text)
        name = f"vm.{path.name}"
        if name in PARTNERS:
            super().write_in_place(path.parent / PARTNERS[name].split(".")[1], "0\n")


def tunables(tmp_path: Path, names: tuple[str, ...], root: PurePosixPath) -> KernelTunables:
    journal = PurePosixPath(tmp_path / "run" / "j.json")
    return KernelTunables(names, host=PairedKernel(), root=root, journal=journal)


def test_the_axis_makes_one_cell_per_value_and_leaves_other_cells_alone(tmp_path: Path) -> None:
    tuned = parse(tmp_path, AXIS)
    assert [s.sysctl for s in tuned.specs] == [
        (("vm.dirty_background_bytes", "0"),),
        (("vm.dirty_background_bytes", "67108864"),),
    ]
    assert tuned.sysctl_names == ("vm.dirty_background_bytes",)
    assert "vm.dirty_background_bytes=67108864" in tuned.specs[1].label
    plain = parse(tmp_path, "")
    assert (
        "sysctl" not in plain.specs[0].cell.stored()
    )  # cell ids of plans without the axis unchanged
    assert plain.specs[0].cell_id != tuned.specs[0].cell_id


@pytest.mark.parametrize(
    ("axis", "message"),
    [
        ('[matrix.sysctl]\n"dirty bytes" = [1]', "is not a sysctl name"),
        ('[matrix.sysctl]\n"vm.dirty_bytes" = []', "must not be an empty list"),
        ('[matrix.sysctl]\n"vm.dirty_bytes" = [true]', "values must be numbers or text"),
        ("[matrix]\nsysctl = 3", "must be a table"),
    ],
)
def test_axis_mistakes_are_refused(tmp_path: Path, axis: str, message: str) -> None:
    text = PLAN.format(sysctl=axis)
    if axis.startswith("[matrix]"):
        text = text.replace("clients = [1]\n[matrix]", "clients = [1]")
    with pytest.raises(PlanError, match=message):
        plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_refused_when_not_root_or_unknown(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, {"vm.dirty_bytes": "0"})
    with pytest.raises(TunableError, match="kernel tunables are set as root"):
        tunables(tmp_path, ("vm.dirty_bytes",), root).check(euid=1000)
    with pytest.raises(TunableError, match=r"vm\.no_such: no such kernel tunable"):
        tunables(tmp_path, ("vm.no_such",), root).check(euid=0)
    tunables(tmp_path, (), root).check(euid=1000)  # a plan without the axis needs nothing


class FussyKernel(PairedKernel):
    """A kernel that refuses writes to a read-only tunable (EACCES, as /proc/sys does for a
    0444 one, root included), refuses values out of a tunable's range (EINVAL) and clamps
    vm.clamped to 100."""

    def write_in_place(self, path: PurePath, text: str) -> None:
        if path.name == "file-nr":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        if path.name == "swappiness" and int(text) > 200:
            raise OSError(errno.EINVAL, "Invalid argument")
        super().write_in_place(path, str(min(int(text), 100)) if path.name == "clamped" else text)


FUSSY = {
    "fs.file-nr": "1 0 9",
    "vm.swappiness": "60",
    "vm.clamped": "5",
    "vm.dirty_background_bytes": "0",
    "vm.dirty_background_ratio": "10",
}


@pytest.mark.parametrize(
    ("planned", "says"),
    [
        ([("fs.file-nr", "2 0 9")], r"fs\.file-nr: cannot be written here \(Permission denied\)"),
        ([("vm.swappiness", "10"), ("vm.swappiness", "1000")],
         r"vm\.swappiness = 1000: the kernel refuses it \(Invalid argument\)"),
        ([("vm.clamped", "500")], r"vm\.clamped = 500: the kernel keeps 100 instead"),
    ],
)  # fmt: skip
def test_a_value_the_kernel_does_not_take_is_refused_before_any_run(
    tmp_path: Path, planned: list[tuple[str, str]], says: str
) -> None:
    """Each planned value is written and read back under the journal, the values found put
    back at once: a refusal leaves the tunables as they were and the journal empty."""
    root = fake_proc(tmp_path, FUSSY)
    names = tuple(sorted({n for n, _ in planned}))
    kt = KernelTunables(
        names, host=FussyKernel(), root=root, journal=PurePosixPath(tmp_path / "run" / "j.json")
    )
    kt.check(euid=0)
    kt.repair()
    with pytest.raises(TunableError, match=says) as caught:
        kt.try_values(planned)
    assert "\n" not in str(caught.value)
    assert {n: kt.read(n) for n in FUSSY} == FUSSY
    assert Path(kt.journal_path).read_text() == ""
    kt.restore()


def test_values_the_kernel_takes_are_tried_and_put_back_at_once(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, FUSSY)
    journal = PurePosixPath(tmp_path / "run" / "j.json")
    names = ("vm.dirty_background_bytes", "vm.swappiness")
    kt = KernelTunables(names, host=FussyKernel(), root=root, journal=journal)
    kt.repair()
    kt.try_values([("vm.dirty_background_bytes", "67108864"), ("vm.dirty_background_bytes", "0"),
                   ("vm.swappiness", "200")])  # fmt: skip
    assert {n: kt.read(n) for n in FUSSY} == FUSSY
    assert Path(journal).read_text() == ""
    with pytest.raises(TunableError, match="another campaign"):  # still held for the campaign
        KernelTunables(("vm.swappiness",), host=FussyKernel(), root=root, journal=journal).repair()
    kt.restore()


def test_the_journal_is_made_where_it_is_missing_before_any_change(tmp_path: Path) -> None:
    """A fresh boot empties /run: the journal's directory is made before the first change."""
    root = fake_proc(tmp_path, {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"})
    journal = PurePosixPath(tmp_path / "fresh-boot" / "pgbenchlab" / "j.json")
    kt = KernelTunables((), host=PairedKernel(), root=root, journal=journal)
    kt.apply([("vm.dirty_bytes", "67108864")])
    assert json.loads(Path(journal).read_text()) == {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"}
    kt.restore()


def test_journalled_before_changing_verified_and_restored(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"})
    kt = tunables(tmp_path, ("vm.dirty_bytes",), root)
    assert kt.repair() == {}
    assert kt.apply([("vm.dirty_bytes", "67108864")]) == {"vm.dirty_bytes": "67108864"}
    journal = json.loads(Path(kt.journal_path).read_text())
    assert journal == {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"}  # with its partner
    kt.restore()
    assert Path(root / "vm/dirty_bytes").read_text().strip() == "0"
    assert Path(root / "vm/dirty_ratio").read_text().strip() == "20"
    assert Path(kt.journal_path).read_text() == ""


def test_a_journal_left_by_a_killed_campaign_is_restored_at_the_next_start(
    tmp_path: Path,
) -> None:
    root = fake_proc(tmp_path, {"vm.dirty_bytes": "67108864", "vm.dirty_ratio": "0"})
    journal = tmp_path / "run" / "j.json"
    journal.parent.mkdir()
    journal.write_text(json.dumps({"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"}))
    found = tunables(tmp_path, (), root).repair()  # any campaign, with the axis or not
    assert found == {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"}
    assert Path(root / "vm/dirty_ratio").read_text().strip() == "20"
    assert Path(root / "vm/dirty_bytes").read_text().strip() == "0"
    assert journal.read_text() == ""


def test_a_running_campaigns_journal_is_left_to_it(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"})
    running = tunables(tmp_path, ("vm.dirty_bytes",), root)
    running.repair()
    running.apply([("vm.dirty_bytes", "4096")])
    assert tunables(tmp_path, (), root).repair() == {}
    with pytest.raises(TunableError, match="another campaign is changing kernel tunables"):
        tunables(tmp_path, ("vm.dirty_bytes",), root).repair()
    assert Path(root / "vm/dirty_bytes").read_text().strip() == "4096"
    running.restore()


def test_a_campaign_that_only_repairs_holds_the_journal_for_a_moment(tmp_path: Path) -> None:
    """Every campaign's start locks the journal while it repairs: a campaign with tunables
    starting at that instant waits for it, and is not refused as if tunables were in use."""
    root = fake_proc(tmp_path, {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"})
    journal = tmp_path / "run" / "j.json"
    journal.parent.mkdir()
    repairing = LOCAL_HOST.lock(PurePosixPath(journal))
    threading.Timer(0.3, repairing.release).start()
    tuned = tunables(tmp_path, ("vm.dirty_bytes",), root)
    assert tuned.repair() == {}
    assert tuned.journal is not None
    tuned.restore()


def run_tuned(tmp_path: Path, axis: str) -> tuple[PurePosixPath, Path]:
    """A campaign of the plan with this axis through the executor seam, on a stand-in
    /proc/sys: that root and the results database."""
    root = fake_proc(
        tmp_path, {"vm.dirty_background_bytes": "0", "vm.dirty_background_ratio": "10"}
    )
    the_plan = parse(tmp_path, axis)
    kt = tunables(tmp_path, the_plan.sysctl_names, root)
    kt.repair()
    replays = [Replay(recorded("16", "tpcb-progress")) for _ in the_plan.specs]
    outcome = conduct(
        the_plan, tmp_path / "results", QuietReporter(), client("16"),
        StandInServers(the_plan), ReplayExecutor(replays), tunables=kt,
    )  # fmt: skip
    assert outcome.failed == 0, run_errors(outcome)
    return root, tmp_path / "results" / RESULTS_DB


def test_a_campaign_records_each_runs_tunables_and_puts_them_back(tmp_path: Path) -> None:
    root, database = run_tuned(tmp_path, AXIS)
    db = sqlite3.connect(database)
    rows = db.execute(
        "SELECT r.sequence, s.name, s.value FROM run_sysctl s "
        "JOIN runs r ON r.id = s.run_id ORDER BY r.sequence"
    ).fetchall()
    db.close()
    assert rows == [
        (0, "vm.dirty_background_bytes", "0"),
        (1, "vm.dirty_background_bytes", "67108864"),
    ]
    assert Path(root / "vm/dirty_background_bytes").read_text().strip() == "0"
    with Store(database) as store:
        detail = run_detail(store, 2)
    assert detail["sysctl"] == {"vm.dirty_background_bytes": "67108864"}  # show --json
    assert "vm.dirty_background_bytes=67108864" in "\n".join(run_lines("tuned", detail))


THREE = '[matrix.sysctl]\n"vm.dirty_background_bytes" = [67108864, 0, 33554432]'
LABELS = [f"ext vm.dirty_background_bytes={v}" for v in ("67108864", "0", "33554432")]


def test_a_tunable_is_an_axis_of_the_results_as_a_setting_is(tmp_path: Path) -> None:
    _, database = run_tuned(tmp_path, THREE)
    with Store(database) as store:
        view = load_view(store, 1)
        changes = within_campaign(store, None, LABELS[1], LABELS[2], DEFAULT_THRESHOLD)
        rows = exporting.run_rows(store, 1)
        records = store.run_records(1)
    # The report: the server axis carries the variant, no "options" axis; servers per variant.
    assert [(c.dim("server"), c.dim("options")) for c in view.cells] == [(x, "") for x in LABELS]
    assert [a.key for a in view.axes] == ["server"]
    assert [s.label for s in view.servers] == LABELS
    assert {(c.baseline, c.candidate) for c in view.changes} == {
        (LABELS[0], LABELS[1]),
        (LABELS[0], LABELS[2]),
    }
    # A series along the tunable, in plan order, as along a setting axis.
    assert axis_orders(view)["vm.dirty_background_bytes"] == ["67108864", "0", "33554432"]
    assert [s.axis for s in view.scans] == ["vm.dirty_background_bytes"]
    # compare --baseline/--candidate names the variants; runs and export show them.
    assert {c.cell for c in changes} == {"all"} and {c.metric for c in changes} >= {"tps"}
    assert [table_row(r)[1] for r in records] == LABELS
    assert [r["sysctl"] for r in rows] == [{"vm.dirty_background_bytes": v} for v in
        ("67108864", "0", "33554432")]  # fmt: skip
    header = exporting.encode(rows, "csv").decode().splitlines()[0].split(",")
    assert "sysctl" in header and "server_settings" in header


def test_runs_stored_before_the_sysctl_column_get_their_cells_tunables(tmp_path: Path) -> None:
    _, database = run_tuned(tmp_path, AXIS)
    db = sqlite3.connect(database)
    with db:  # as the migration adding the column finds them: one server record, no tunables
        db.execute("UPDATE runs SET sysctl_json = NULL")
        db.execute("UPDATE campaigns SET axis_orders_json = '{}'")
        db.execute("DELETE FROM servers WHERE id > 1")
        db.execute("UPDATE servers SET variant_json = '{}'")
        BACKFILLS[COLUMN["sysctl_json"].since](db)
    db.close()
    with Store(database) as store:
        rows = exporting.run_rows(store, 1)
        record = store.campaign_record(1)
        view = load_view(store, 1)
    assert [r["sysctl"] for r in rows] == [
        {"vm.dirty_background_bytes": "0"},
        {"vm.dirty_background_bytes": "67108864"},
    ]
    assert record is not None
    assert record.axis_orders["vm.dirty_background_bytes"] == ("0", "67108864")
    labels = [f"ext vm.dirty_background_bytes={v}" for v in ("0", "67108864")]
    assert [s.label for s in view.servers] == [c.dim("server") for c in view.cells] == labels
    assert {(c.baseline, c.candidate) for c in view.changes} == {tuple(labels)}
