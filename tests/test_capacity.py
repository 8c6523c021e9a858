"""`pgbenchlab capacity`: a real search against a rate ceiling the test makes, interrupted and
resumed from what is stored; and the refusals of what cannot be searched.

The ceiling: every transaction takes the same advisory lock and sleeps 10 ms, so transactions
run one at a time and no server does more than 100 per second, however many clients. On this
machine a transaction takes 10.2–11 ms (96–98 TPS closed loop), far below what a loaded 2-core
machine does with select-only (thousands), so the ceiling holds under load. The SLO
(``skipped <= 1%`` with -L 500 ms) is loose on latency: a rate fails when the backlog grows
through the run, which it does as soon as the offered rate passes what the lock serves. A
single queue with Poisson arrivals fills slowly just under its ceiling (a short trial at
0.95 × ceiling may still see its latency climb), so the found rate sits a little under 100:
about 89–93 here.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.analysis.capacity import START, SearchSettings
from pgbenchlab.analysis.slo import parse_slo
from pgbenchlab.campaign.capacity import CapacityOptions, search_capacity
from pgbenchlab.cli import main
from pgbenchlab.report.views.capacity import capacity_views
from pgbenchlab.store import Store
from support import QuietReporter, require_installs

CEILING_TPS = 100.0  # one transaction at a time, each at least 10 ms

PLAN = """
[campaign]
name = "ceiling"

[defaults]
duration = "{duration}"
warmup = "0s"
vacuum = "none"
checkpoint = false

[[server]]
name = "pg18"
install = "embedded"

[matrix]
scale = [1]
workload = [{{ script = "ceiling.sql" }}]
clients = [2]
{extra}
"""


def write_plan(
    where: Path, *, duration: str = "4s", extra: str = 'latency_limit = "500ms"'
) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "ceiling.sql").write_text("SELECT pg_advisory_xact_lock(1), pg_sleep(0.01);\n")
    path = where / "ceiling.toml"
    path.write_text(PLAN.format(duration=duration, extra=extra))
    return path


class InterruptAfter(QuietReporter):
    """Sends this process SIGINT (as Ctrl-C) once `probes` probes are stored."""

    def __init__(self, probes: int) -> None:
        super().__init__()
        self.left = probes

    def note(self, text: str) -> None:
        super().note(text)
        if text.startswith("    "):  # a probe's line, printed once it is stored
            self.left -= 1
            if self.left == 0:
                os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.server
def test_a_search_finds_the_ceiling_and_resumes_after_an_interruption(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    the_plan = plan.load(write_plan(tmp_path))
    options = CapacityOptions(parse_slo("skipped <= 1%"), SearchSettings(), trial_s=3)

    cut = search_capacity(the_plan, options, results_dir, InterruptAfter(3))
    assert cut.outcome.interrupted
    with Store(results_dir / "results.db") as store:
        before = [p.run_id for p in store.probe_records(cut.outcome.campaign_id)]
    assert len(before) == 3

    done = search_capacity(the_plan, options, results_dir, QuietReporter())
    assert not done.outcome.interrupted and done.outcome.failed == 0
    with Store(results_dir / "results.db") as store:
        (view,) = capacity_views(store, done.outcome.campaign_id)
    probes = [p.run_id for p in view.points]
    assert probes[:3] == before  # kept, not run again
    assert len(probes) <= options.settings.max_probes
    assert view.points[0].role == START

    answer = view.answer
    assert answer is not None and answer.rate is not None, view.points
    assert answer.highest_pass is not None and answer.lowest_fail is not None
    assert answer.highest_pass <= answer.rate < answer.lowest_fail  # within its bracket
    # Nothing above the ceiling passes; half of it passes with room to spare; the bracket is
    # around the ceiling, a bisection step or a confirmation step-down wide.
    assert CEILING_TPS / 2 <= answer.highest_pass < CEILING_TPS
    assert answer.lowest_fail <= CEILING_TPS * 1.2
    for point in view.open_loop:
        if point.offered is not None and point.offered > CEILING_TPS:
            assert not point.passed, point

    clients = {p.offered: p.clients for p in view.points if p.offered}
    assert all(c >= min(64, rate * 0.5 * 2) for rate, c in clients.items())  # Little's law

    again = search_capacity(the_plan, options, results_dir, QuietReporter())
    assert again.outcome.ran == 0  # a finished search answers from what is stored


@pytest.mark.parametrize(
    ("slo", "extra", "duration", "says"),
    [
        ("p99 10ms", "", "4s", "--slo: cannot read 'p99 10ms'"),
        ("p97 <= 10ms", "", "4s", "unknown metric 'p97'"),
        ("p99 <= 10ms", "rate = [100]", "4s", "capacity searches the rate itself"),
        ("skipped <= 1%", "", "4s", "the SLO bounds no latency"),
    ],
)
def test_what_cannot_be_searched_is_refused_before_anything_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    slo: str,
    extra: str,
    duration: str,
    says: str,
) -> None:
    path = write_plan(tmp_path, duration=duration, extra=extra)
    results = tmp_path / "results"
    code = main(["capacity", str(path), "--slo", slo, "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert says in err and len(err.splitlines()) == 1, err
    assert not results.exists()


def test_a_workload_of_a_fixed_transaction_count_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_plan(tmp_path)
    text = path.read_text().replace('duration = "4s"', "transactions = 100")
    path.write_text(text)
    results = tmp_path / "results"
    code = main(["capacity", str(path), "--slo", "p99 <= 10ms", "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "cannot be rate-limited" in err and len(err.splitlines()) == 1
    assert not results.exists()
