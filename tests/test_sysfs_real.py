"""Block-device and memory knobs that are files under /sys (`[matrix.sysfs]`) on the real
kernel: the read-ahead of the disk holding the test's files and the transparent huge pages
mode set for real runs, read back, recorded, and put back — after a campaign, after SIGTERM,
and after a kill -9 at the next start (they share the sysctls' journal)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.store import Store
from pgbenchlab.tunables import normal
from support import QuietReporter, require_installs, run_errors
from test_tunables_real import cut_while_measuring, knob_plan, start

# alone: one of its campaigns holds the machine's tunables journal, as the tunables tests' do
pytestmark = [pytest.mark.server, pytest.mark.alone]

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def read_ahead_of(path: Path) -> Path:
    """The read_ahead_kb of the disk holding path (a partition's is its disk's)."""
    device = os.stat(path).st_dev
    found = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}").resolve()
    for candidate in (found, found.parent):
        if (candidate / "queue" / "read_ahead_kb").exists():
            return candidate / "queue" / "read_ahead_kb"
    pytest.fail(f"no read_ahead_kb for the disk of {path} ({found})")


def knobs_plan(name: str, read_ahead: Path, values: str, thp: str, duration: str = "1s") -> str:
    knobs = (
        f'[matrix.sysfs]\n"{read_ahead.relative_to("/sys")}" = [{values}]\n'
        f'"kernel/mm/transparent_hugepage/enabled" = ["{thp}"]\n'
    )
    return knob_plan(name, knobs, duration)


@dataclass(frozen=True)
class Knobs:
    """The read-ahead file of the test's disk, both knobs' values before the test, and a value
    of each other than those."""

    read_ahead: Path
    before: dict[Path, str]
    ahead: str
    thp: str


@pytest.fixture
def knobs(tmp_path: Path) -> Iterator[Knobs]:
    """The knobs of the test (their values put back whatever happens)."""
    if os.geteuid() != 0:
        pytest.skip("sysfs knobs are set as root: test NOT run")
    require_installs("embedded")
    read_ahead = read_ahead_of(tmp_path)
    before = {path: normal(path.read_text()) for path in (read_ahead, THP)}
    ahead = other(before[read_ahead], ("256", "512"))
    yield Knobs(read_ahead, before, ahead, other(before[THP], ("never", "madvise")))
    for path, value in before.items():
        path.write_text(value)


def other(value: str, choices: tuple[str, ...]) -> str:
    return next(c for c in choices if c != value)


def test_applied_read_back_recorded_and_restored(
    tmp_path: Path, results_dir: Path, knobs: Knobs
) -> None:
    read_ahead, before, ahead, thp = knobs.read_ahead, knobs.before, knobs.ahead, knobs.thp
    text = knobs_plan("knobs", read_ahead, f"{ahead}, {before[read_ahead]}", thp)
    outcome = run_campaign(plan.parse(text, "p.toml", base=tmp_path), results_dir, QuietReporter())
    assert outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        recorded = [store.run_sysctl(r.id) for r in store.run_records(outcome.campaign_id)]
    assert sorted(r[str(read_ahead)] for r in recorded) == sorted([ahead, before[read_ahead]])
    assert all(r[str(THP)] == thp for r in recorded)
    assert {path: normal(path.read_text()) for path in before} == before


def test_put_back_after_sigterm_and_after_kill_9_at_the_next_start(
    tmp_path: Path, results_dir: Path, knobs: Knobs
) -> None:
    read_ahead, before, ahead, thp = knobs.read_ahead, knobs.before, knobs.ahead, knobs.thp
    env = {**os.environ, "PGBENCHLAB_SYSCTL_JOURNAL": str(tmp_path / "run" / "journal.json")}
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(knobs_plan("cut", read_ahead, ahead, thp, duration="3s"))
    for how in (signal.SIGTERM, signal.SIGKILL):
        proc = start(plan_path, results_dir, env)
        during = cut_while_measuring(
            proc, how, lambda: (normal(read_ahead.read_text()), normal(THP.read_text()))
        )
        assert during == (ahead, thp)
        now = {path: normal(path.read_text()) for path in before}
        assert (now == before) == (how == signal.SIGTERM), (how, now)
    left = json.loads(Path(env["PGBENCHLAB_SYSCTL_JOURNAL"]).read_text())
    assert left == {str(path): value for path, value in before.items()}
    # The next campaign, one that sets no knob, puts back what the killed one left.
    plain = tmp_path / "plain.toml"
    plain.write_text(knobs_plan("plain", read_ahead, "1", "x").split("[matrix.sysfs]")[0])
    proc = start(plain, results_dir, env)
    proc.communicate(timeout=300)
    assert proc.returncode == 0
    assert {path: normal(path.read_text()) for path in before} == before
