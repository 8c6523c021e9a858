"""Real profiles: perf on a managed server's processes and on pgbench during real select-only
runs, stored, read back by `pgbenchlab profile`, and kept out of the statistics in `auto`
mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.profiles import PGBENCH
from pgbenchlab.report import write_report
from pgbenchlab.report.views import build
from pgbenchlab.report.views.profile import RunProfile, run_profile
from pgbenchlab.store import Store
from report_browser import Browser
from support import QuietReporter, require_installs, run_errors

pytestmark = pytest.mark.server

AUTO = """
[campaign]
name = "prof"
repeats = 1
[defaults]
duration = "3s"
warmup = "0s"
profile = "auto"
[[server]]
name = "pg15"
install = "15"
settings = { shared_buffers = "32MB" }
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""
# What a select-only transaction runs: the executor, an index scan of pgbench_accounts_pkey
# (a B-tree descent) and the heap fetch; exported functions, so named even in Debian's
# stripped binary (its static ones show as [postgres]).
EXECUTOR = {"standard_ExecutorRun", "ExecScan", "PortalRun"}
INDEX_SCAN = {"index_getnext_slot", "index_fetch_heap", "btgettuple", "_bt_first", "_bt_search"}
BTREE_SELF = {"_bt_compare", "_bt_binsrch", "_bt_checkpage", "_bt_readpage", "_bt_search"}
# pgbench's own functions where its binary has symbols (a build's); Debian's is stripped, so
# there libpq's exported PQ* functions (named in any libpq) are what shows it is pgbench's.
PGBENCH_OWN = {
    "doCustom",
    "threadRun",
    "advanceConnectionState",
    "sendCommand",
    "readCommandResponse",
}


@pytest.mark.browser
@pytest.mark.alone
def test_auto_profiles_one_extra_repeat_of_a_select_only_cell(
    tmp_path: Path, results_dir: Path, capsys: pytest.CaptureFixture[str], browser: Browser
) -> None:
    require_installs("15")
    the_plan = plan.parse(AUTO, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.ran == 2 and outcome.failed == 0, run_errors(outcome)
    with Store(results_dir / RESULTS_DB) as store:
        ids = [r.id for r in store.run_records(outcome.campaign_id)]
        profiles = store.profiles_by_run(ids)
        view = build.load_view(store, outcome.campaign_id, detail=False)
        assert list(profiles) == [ids[1]]  # only the extra repeat
        assert list(store.profiles_by_run(ids, PGBENCH)) == [ids[1]]
        found = run_profile(store, ids[1], limit=60)
        client = run_profile(store, ids[1], limit=60, process=PGBENCH)
    # The profiled repeat stays out of the statistics.
    (cell,) = view.cells
    assert cell.run_ids == (ids[0],) and view.runs[1].profiled == "extra"
    profile = found.profile
    assert profile.frequency_hz == 499 and profile.samples > 50 and profile.lost >= 0
    assert "postmaster" in profile.target and "no full symbol table" in profile.symbols
    assert max(found.backends, key=lambda k: found.backends[k]) == "client backend"
    backend = [t for t in found.top if t.backend_type == "client backend"]
    totals = {t.function for t in backend if t.total_share > 0.01}
    assert totals | {"ExecScan"} >= EXECUTOR and totals & INDEX_SCAN, sorted(totals)
    assert {t.function for t in backend} & BTREE_SELF
    assert profile.complete_share is not None and profile.complete_share > 0.8
    assert found.also == (PGBENCH,)
    check_pgbench_profile(client)

    assert main(["profile", str(ids[1]), "--results", str(results_dir), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["samples"] == profile.samples and shown["cpu_ms_per_tx"] > 0
    assert shown["process"] == "server"
    argv = ["profile", str(ids[1]), "--process", "pgbench", "--results", str(results_dir)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "profiled: pgbench (" in out and "[pgbench]" in out, out
    assert main(["profile", str(ids[0]), "--results", str(results_dir)]) == 2
    assert "has no profile" in capsys.readouterr().err
    check_flame_graph(browser, results_dir, tmp_path)


def check_pgbench_profile(found: RunProfile) -> None:
    """pgbench's own profile: its process alone, its functions (or libpq's), what it lacks."""
    profile = found.profile
    assert profile.process == PGBENCH and profile.target.startswith("pgbench ("), profile.target
    assert (
        profile.frequency_hz == 499 and profile.samples > 20 and list(found.backends) == ["pgbench"]
    )
    functions = {t.function for t in found.top}
    assert functions & PGBENCH_OWN or any(f.startswith("PQ") for f in functions), functions
    assert "standard_ExecutorRun" not in functions  # nothing of the server's
    # What its binary lacks is said, as for the server's: the embedded pgbench has symbols but
    # no frame pointers (its stacks break), Debian's is stripped.
    if "[pgbench]" in functions:
        assert "no full symbol table" in profile.symbols, profile.symbols
    assert profile.complete_share is not None
    if profile.complete_share < 0.5:
        assert "frame pointers" in profile.symbols, profile.symbols


def check_flame_graph(browser: Browser, results_dir: Path, tmp_path: Path) -> None:
    """The report's flame graphs (the server's, then pgbench's) are drawn with no network, and
    a click zooms into a frame."""
    out = write_report(results_dir / RESULTS_DB, output=tmp_path / "report.html")
    assert isinstance(out, Path)
    with browser.page(1200, 1600) as page:
        result = page.open(out.as_uri())
        assert result.console == [], result.console
        assert page.evaluate("document.querySelectorAll('#profiles .flame').length") == 2
        frames = "document.querySelector('#profiles .flame').querySelectorAll('.frame')"
        assert page.evaluate(f"{frames}.length") > 50
        client = "document.querySelectorAll('#profiles .flame')[1].querySelectorAll('.frame')"
        assert page.evaluate(f"[...{client}].map(f => f.textContent)")[:2] == ["all", "pgbench"]
        text = page.evaluate("document.getElementById('profiles').innerText")
        assert "kept out of the cell's statistics" in text and "client backend" in text
        assert "µs of pgbench CPU per transaction" in text
        page.page.click("#profiles .flame .frame >> text=standard_ExecutorRun")
        widest = page.evaluate(
            f"[...{frames}].filter(f => f.style.width === '100%').map(f => f.textContent)"
        )
        assert widest[-1] == "standard_ExecutorRun" and "PortalRun" in widest, widest
        assert page.problems() == []
