"""A build with a deliberate hot loop (tests/patches/0002-profile-hot-loop.patch: a noinline
function spinning at the start of every query) against its base, both profiled: the function
is on top of the patched server's profile and of the difference per transaction. The plan
profiles them, so both are built with frame pointers and debug info (their own cache keys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.report import write_report
from pgbenchlab.report.views.profile import compare_profiles, run_profile
from pgbenchlab.store import Store
from support import QuietReporter, base_and_patched, one_cell_plan, run_errors
from test_builds_real import FAST

# -O0 builds in about half the time; at -O0 nothing is inlined, so the call chain is plain.
UNOPTIMISED = FAST.replace("]", ', "CFLAGS=-O0"]')

# alone: perf sample shares
pytestmark = [pytest.mark.server, pytest.mark.alone]

PATCH = Path(__file__).parent / "patches" / "0002-profile-hot-loop.patch"
CAMPAIGN = one_cell_plan(
    "hot",
    campaign="repeats = 1\n",
    defaults='duration = "3s"\nprofile = "on"\n',
    servers=base_and_patched("hot", PATCH, UNOPTIMISED),
)


@pytest.mark.timeout(2400)  # two builds from source when the cache lacks them
def test_a_patched_hot_loop_tops_the_profile_and_the_diff(
    tmp_path: Path,
    results_dir: Path,
    build_cache: Path,
) -> None:
    the_plan = plan.parse(CAMPAIGN, str(tmp_path / "hot.toml"), base=tmp_path)
    assert all(b.profiling for b in the_plan.needed_builds)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.ran == 2 and outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        runs = {r["server"]: r.id for r in store.run_records(outcome.campaign_id)}
        servers = {s.name: s.build for s in store.server_records(outcome.campaign_id)}
        base, hot = run_profile(store, runs["base"]), run_profile(store, runs["hot"])
    for build in servers.values():
        assert build is not None and build["profiling"] is True
        assert "-fno-omit-frame-pointer -g" in " ".join(build["configure_applied"])
    # Built with frame pointers and a symbol table: whole stacks, every function named.
    assert hot.profile.symbols == "" and base.profile.symbols == ""
    assert hot.profile.complete_share is not None and hot.profile.complete_share > 0.9
    backend = [t for t in hot.top if t.backend_type == "client backend"]
    assert backend[0].function == "profile_test_spin" and backend[0].self_share > 0.3
    spin = next(t for t in backend if t.function == "standard_ExecutorRun")
    assert spin.total_share >= backend[0].self_share  # its caller, from whole stacks
    assert all(t.function != "profile_test_spin" for t in base.top)
    rows = compare_profiles(base, hot).rows
    assert rows[0].function == "profile_test_spin" and rows[0].self_a_us == 0
    assert rows[0].self_change_us > 2 * max(abs(r.self_change_us) for r in rows[1:3])
    # The report's differential view of hot against its base names it first.
    page = write_report(results_dir / RESULTS_DB, output=tmp_path / "report.html")
    assert isinstance(page, Path)
    differential = page.read_text().split('<table class="profile-diff">', 1)[1]
    assert differential.split("</td>", 1)[0].endswith("profile_test_spin")
