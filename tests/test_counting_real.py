"""Counting mode for real: Debian's PostgreSQL 13 source built as the build tests build it (the
shared `pg13`, FAST options) and with tests/patches/0003-commit-spin.patch (500 iterations of a
noinline loop at every commit: a few per cent of a select-only transaction), each run under
callgrind twice. The base's two counts agree within about 0.5 %; the patched build's
instructions per transaction exceed them far beyond that spread; and the counted profile diff
names the patched function first, with the cost the run column measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.report.views.profile import compare_profiles, run_profile
from pgbenchlab.store import Store
from support import QuietReporter, base_and_patched, one_cell_plan, run_errors
from test_builds_real import FAST

# alone: its callgrind spread bound depends on timing
pytestmark = [pytest.mark.server, pytest.mark.alone]

PATCH = Path(__file__).parent / "patches" / "0003-commit-spin.patch"
CAMPAIGN = one_cell_plan(
    "counted",
    campaign="repeats = 2\n",
    defaults='transactions = 300\ncount = "instructions"\n'
    # select-only on a fresh dataset (pgbench -i vacuumed it): nothing to vacuum, nothing to
    # write; under callgrind each costs seconds
    'vacuum = "none"\ncheckpoint = false\n',
    servers=base_and_patched("spin", PATCH, FAST),
)


@pytest.mark.timeout(2400)  # the patched build from source when the cache lacks it
def test_a_patch_costing_a_few_per_cent_is_counted_and_named(
    tmp_path: Path,
    results_dir: Path,
    build_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    the_plan = plan.parse(CAMPAIGN, str(tmp_path / "counted.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.ran == 4 and outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        runs = store.run_records(outcome.campaign_id)
        counted = {s: [r for r in runs if r["server"] == s] for s in ("base", "spin")}
        base = [r["instructions_per_tx"] for r in counted["base"]]
        spin = [r["instructions_per_tx"] for r in counted["spin"]]
        assert all(r["instructions_tool"] == "callgrind" for r in runs)
        profiles = [run_profile(store, counted[s][0].id) for s in ("base", "spin")]
    # Run to run: the base counted twice agrees within about 0.5 % (0.02 – 0.65 % seen here: how
    # often a backend waits for pgbench's next query, WaitEventSetWait and recv, is timing).
    spread = max(base) - min(base)
    assert spread / min(base) < 0.0075, base
    # The patch: a few per cent (here 3,006 instructions, 7 % of the base's 40.9 k), far beyond
    # that spread.
    effect = min(spin) - max(base)
    assert 0.01 < effect / max(base) < 0.10, (base, spin)
    assert effect > 5 * max(spread, max(spin) - min(spin))
    # The counted profile diff: the patched function first, with the cost the runs measured.
    assert all(p.profile.counted and p.transactions == 300 for p in profiles)
    rows = compare_profiles(*profiles).rows
    assert rows[0].function == "commit_test_spin" and rows[0].self_a_us == 0
    assert rows[0].self_b_us == pytest.approx(effect, rel=0.2)
    assert rows[0].self_change_us > 5 * max(abs(r.self_change_us) for r in rows[1:])
    # As the command prints it: counted, in instructions per transaction.
    a, b = (str(p.run_id) for p in profiles)
    assert main(["profile", "--diff", a, b, "--results", str(results_dir)]) == 0
    out = capsys.readouterr().out
    assert "instructions per committed transaction (A → B)" in out
    assert (
        out.split("largest change in self time first:\n", 1)[1]
        .split("\n")[1]
        .startswith("commit_test_spin ")
    )
