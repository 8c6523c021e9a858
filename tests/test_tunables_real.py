"""Kernel tunables on the real kernel: vm.dirty_background_bytes set for real runs, recorded,
and put back — after a campaign, after SIGTERM, and after a kill -9 at the next start; refused
for the unprivileged test account. vm.dirty_background_bytes is written as root here; writing
it zeroes vm.dirty_background_ratio, so the ratio is checked to come back too."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from cli_process import run_cli
from pgbenchlab import osuser, plan
from pgbenchlab.analysis.slo import parse_slo
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.campaign.capacity import CapacityOptions, search_capacity
from pgbenchlab.cli import main
from pgbenchlab.plan import RunSpec
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import Store
from support import QuietReporter, one_cell_plan, require_installs, run_errors
from test_faults import CLI

# The only file of the two-at-a-time pass that changes a kernel tunable (the sysfs tests and the
# quick studies, which share the tunables journal, run alone).
pytestmark = pytest.mark.server

T = TypeVar("T")
BYTES = Path("/proc/sys/vm/dirty_background_bytes")
RATIO = Path("/proc/sys/vm/dirty_background_ratio")
CHANGED = "67108864"


def tuned_plan(name: str, values: str, duration: str = "1s") -> str:
    return knob_plan(name, f'[matrix.sysctl]\n"vm.dirty_background_bytes" = [{values}]\n', duration)


def knob_plan(name: str, knobs: str, duration: str = "1s") -> str:
    """One embedded server's select-only cell at the kernel's knobs (a [matrix.sysctl] or
    [matrix.sysfs] table): short runs without the checkpoint before each."""
    defaults = f'duration = "{duration}"\ncheckpoint = false\n'
    return one_cell_plan(name, defaults=defaults, tables=knobs)


def kernel() -> tuple[str, str]:
    return BYTES.read_text().strip(), RATIO.read_text().strip()


@pytest.fixture
def original() -> Iterator[tuple[str, str]]:
    """The kernel's values before the test, put back whatever happens (the non-zero one: it
    zeroes the other)."""
    if os.geteuid() != 0:
        pytest.skip("kernel tunables are set as root: test NOT run")
    before = kernel()
    yield before
    for path, value in zip((BYTES, RATIO), before, strict=True):
        if value != "0":
            path.write_text(value)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a CLI whose journal is this test's own."""
    yield {**os.environ, "PGBENCHLAB_SYSCTL_JOURNAL": str(tmp_path / "run" / "journal.json")}


def test_applied_recorded_and_restored_on_a_real_run(
    tmp_path: Path, results_dir: Path, original: tuple[str, str]
) -> None:
    require_installs("embedded")
    the_plan = plan.parse(tuned_plan("tuned", f"0, {CHANGED}"), "p.toml", base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        recorded = [store.run_sysctl(r.id) for r in store.run_records(outcome.campaign_id)]
        view = load_view(store, outcome.campaign_id, detail=False)
    assert recorded == [
        {"vm.dirty_background_bytes": "0"},
        {"vm.dirty_background_bytes": CHANGED},
    ]
    # The report's server axis (and compare's) holds the tunable, as it holds a setting.
    assert [c.dim("server") for c in view.cells] == [
        f"pg vm.dirty_background_bytes={v}" for v in ("0", CHANGED)
    ]
    assert kernel() == original


def start(plan_path: Path, results: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [*CLI, "run", str(plan_path), "--results", str(results), "--json"]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def cut_while_measuring(proc: subprocess.Popen[str], how: int, read: Callable[[], T]) -> T:
    """Signal the campaign as its run measures; what ``read`` read at that moment."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if json.loads(line).get("phase") == "measuring":
            during = read()
            proc.send_signal(how)
            break
    proc.communicate(timeout=120)
    return during


def dirty_background_bytes() -> str:
    return kernel()[0]


def test_restored_after_sigterm(
    tmp_path: Path, results_dir: Path, original: tuple[str, str], journal: dict[str, str]
) -> None:
    require_installs("embedded")
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tuned_plan("term", CHANGED, duration="5s"))
    proc = start(plan_path, results_dir, journal)
    assert cut_while_measuring(proc, signal.SIGTERM, dirty_background_bytes) == CHANGED
    assert proc.returncode == 130
    assert kernel() == original
    assert Path(journal["PGBENCHLAB_SYSCTL_JOURNAL"]).read_text() == ""


def test_repaired_at_the_next_start_after_kill_9(
    tmp_path: Path, results_dir: Path, original: tuple[str, str], journal: dict[str, str]
) -> None:
    require_installs("embedded")
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tuned_plan("killed", CHANGED, duration="5s"))
    proc = start(plan_path, results_dir, journal)
    assert cut_while_measuring(proc, signal.SIGKILL, dirty_background_bytes) == CHANGED
    assert kernel()[0] == CHANGED  # nothing could put it back
    left = json.loads(Path(journal["PGBENCHLAB_SYSCTL_JOURNAL"]).read_text())
    assert left == {
        "vm.dirty_background_bytes": original[0],
        "vm.dirty_background_ratio": original[1],
    }
    # The next campaign, one that sets no tunable, repairs it before it starts.
    plain = tmp_path / "plain.toml"
    plain.write_text(tuned_plan("plain", "").split("[matrix.sysctl]")[0])
    argv = [*CLI, "run", str(plain), "--results", str(results_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=journal)
    assert done.returncode == 0, done.stderr
    assert "restored the kernel tunables a killed campaign had changed" in done.stderr
    assert kernel() == original


class CutWhileMeasuring(QuietReporter):
    """Notes the tunable and the journal as the first run measures, then sends this process
    SIGINT (as Ctrl-C)."""

    def __init__(self, journal: Path) -> None:
        super().__init__()
        self.journal = journal
        self.during: tuple[str, str] | None = None

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring" and self.during is None:
            self.during = (BYTES.read_text().strip(), self.journal.read_text())
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()


@pytest.mark.parametrize("before", ["killed campaign", "fresh boot"])
def test_capacity_repairs_and_keeps_the_journal_as_run_does(
    tmp_path: Path,
    results_dir: Path,
    original: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    before: str,
) -> None:
    """A killed campaign left the tunable changed and its journal full: capacity puts it back
    before it starts, then journals its own change. After a fresh boot (/run emptied) the
    journal's directory is made. Either way the journal holds the values found while the
    search's run measures, and an interrupted search puts them back."""
    require_installs("embedded")
    journal = tmp_path / "run" / "pgbenchlab" / "journal.json"
    monkeypatch.setenv("PGBENCHLAB_SYSCTL_JOURNAL", str(journal))
    found = {"vm.dirty_background_bytes": original[0], "vm.dirty_background_ratio": original[1]}
    if before == "killed campaign":
        journal.parent.mkdir(parents=True)
        journal.write_text(json.dumps(found))
        BYTES.write_text("33554432")  # as the killed campaign left it
    the_plan = plan.parse(
        tuned_plan("searched", CHANGED).replace(
            "clients = [1]", 'clients = [1]\nlatency_limit = "500ms"'
        ),
        "p.toml",
        base=tmp_path,
    )
    reporter = CutWhileMeasuring(journal)
    options = CapacityOptions(parse_slo("p99 <= 500ms"), trial_s=1)
    cut = search_capacity(the_plan, options, results_dir, reporter)
    assert cut.outcome.interrupted
    restored = [
        text for kind, text in reporter.events if kind == "note" and "restored" in str(text)
    ]
    assert bool(restored) == (before == "killed campaign"), reporter.events
    assert reporter.during is not None
    during, journalled = reporter.during
    assert during == CHANGED and json.loads(journalled) == found
    assert kernel() == original
    assert journal.read_text() == ""


@pytest.mark.parametrize(
    ("command", "axis", "says"),
    [
        ("run", '"kernel.ostype" = ["Linux2"]', "kernel.ostype: cannot be written here"),
        ("capacity", '"kernel.ostype" = ["Linux2"]', "kernel.ostype: cannot be written here"),
        ("run", '"vm.swappiness" = [1000]', "vm.swappiness = 1000: the kernel refuses it"),
        ("capacity", '"vm.swappiness" = [1000]', "vm.swappiness = 1000: the kernel refuses it"),
        ("capacity", '"vm.no_such" = [1]', "vm.no_such: no such kernel tunable"),
    ],
)
def test_a_tunable_or_value_the_kernel_does_not_take_is_refused_before_any_run(
    tmp_path: Path,
    original: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    axis: str,
    says: str,
) -> None:
    """A read-only tunable (0444: EACCES for root too) and a value out of the kernel's range
    (vm.swappiness above 200: EINVAL) passed the check and failed every run
    with [Errno 22]; now each is refused in one line before anything is written."""
    require_installs("embedded")
    monkeypatch.setenv("PGBENCHLAB_SYSCTL_JOURNAL", str(tmp_path / "run" / "journal.json"))
    plan_path = tmp_path / "plan.toml"
    text = tuned_plan("refused", "0").replace('"vm.dirty_background_bytes" = [0]', axis)
    plan_path.write_text(text + "[defaults.x]\n".replace("[defaults.x]\n", ""))
    ostype = Path("/proc/sys/kernel/ostype").read_text()
    swappiness = Path("/proc/sys/vm/swappiness").read_text()
    slo = ["--slo", "p99 <= 100ms"] if command == "capacity" else []
    results = tmp_path / "results"
    code = main([command, str(plan_path), *slo, "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert says in err and len(err.splitlines()) == 1, err
    assert not results.exists()
    assert kernel() == original and Path("/proc/sys/kernel/ostype").read_text() == ostype
    assert Path("/proc/sys/vm/swappiness").read_text() == swappiness


@pytest.mark.parametrize("command", [["run"], ["capacity", "--slo", "p99 <= 100ms"]])
def test_refused_for_the_unprivileged_account(
    original: tuple[str, str], command: list[str]
) -> None:
    require_installs("embedded")
    account = pwd.getpwnam(osuser.SERVICE_USER)
    home = Path(tempfile.mkdtemp(prefix="pgbl-sysctl-", dir="/var/tmp"))
    try:
        home.chmod(0o755)
        plan_path = home / "plan.toml"
        plan_path.write_text(tuned_plan("unprivileged", CHANGED))
        plan_path.chmod(0o644)
        switch = (
            f"import os; os.setgid({account.pw_gid}); os.setgroups([]); os.setuid({account.pw_uid})"
        )
        done = run_cli(*command, plan_path, "--results", home / "results", cwd=home, before=switch)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr
        assert len(lines) == 1 and "kernel tunables are set as root" in lines[0]
        assert not (home / "results").exists()
        assert kernel() == original
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=True)
