"""Noise floors on real servers: a campaign with `restart = "each-round"` (the server restarted
and the page cache dropped before each of its 2 rounds of 1 s runs) stores each metric's
restart-to-restart floor for its cell; and Debian's PostgreSQL 13 with `rebuild = 2` (the
suite's FAST build as copy 1, one more build laid out differently as copy 2) gives two
`postgres` binaries whose functions sit at other addresses, each copy a server of the cell,
and stores the build-to-build floor on both copies' cells.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.analysis.floors import spread
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.report.views import compare
from pgbenchlab.server.cluster_files import LOG_FILE
from pgbenchlab.store import BUILD_FLOOR, RESTART_FLOOR, RUN_FLOOR, Store
from support import QuietReporter, require_installs
from test_builds_real import FAST

pytestmark = pytest.mark.server

RESTARTED = """
[campaign]
name = "restarted"
repeats = 2
restart = "each-round"
[defaults]
duration = "1s"
warmup = "0s"
[[server]]
name = "pg"
install = "embedded"
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""
READY = "database system is ready to accept connections"


def test_a_restarted_campaign_stores_the_restart_floor_of_its_cell(
    tmp_path: Path, results_dir: Path
) -> None:
    require_installs("embedded")
    if os.geteuid() != 0:
        pytest.skip('restart = "each-round" drops the page cache as root: test NOT run')
    the_plan = plan.parse(RESTARTED, "r.toml", base=tmp_path)
    reporter = QuietReporter()
    outcome = run_campaign(the_plan, results_dir, reporter)
    assert outcome.failed == 0 and outcome.ran == 2
    notes = [text for kind, text in reporter.events if kind == "note"]
    for round_ in (1, 2):
        assert f"round {round_}: page cache dropped, servers started afresh" in notes
    with Store(results_dir / RESULTS_DB) as store:
        floors = store.noise_floors(outcome.campaign_id)
        runs = store.run_records(outcome.campaign_id)
        (server,) = store.server_records(outcome.campaign_id)
    assert {f.kind for f in floors} == {RESTART_FLOOR}
    assert {f.metric for f in floors} == {"tps", "p99", "p50"}
    (cell,) = {s.cell_id for s in the_plan.specs}
    assert {f.cell for f in floors} == {cell} and {f.server for f in floors} == {"pg"}
    tps = next(f for f in floors if f.metric == "tps")
    assert tps.spread == pytest.approx(spread([float(r["tps"]) for r in runs]))
    assert tps.evidence.endswith(
        "2 runs across rounds, each after a restart and the page cache dropped"
    )
    log = Path(str(server.data_dir)) / LOG_FILE
    assert log.read_text().count(READY) == 2  # started for round 1, started again for round 2


REBUILT = f"""
[campaign]
name = "rebuilt"
repeats = 2
[defaults]
duration = "1s"
warmup = "0s"
[build.pg13]
source = "debian:postgresql-13"
configure = {FAST}
rebuild = 2
[[server]]
name = "base"
install = {{ build = "pg13" }}
settings = {{ shared_buffers = "32MB" }}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1]
"""


def function_address(binary: Path, function: str) -> str:
    symbols = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True)
    return next(
        line.split()[0] for line in symbols.stdout.splitlines() if line.endswith(f" {function}")
    )


@pytest.mark.timeout(2400)  # copy 2 is built from source (copy 1 is the suite's pg13, cached)
@pytest.mark.alone
def test_two_builds_of_one_source_are_laid_out_apart_and_give_the_build_floor(
    tmp_path: Path, results_dir: Path, build_cache: Path
) -> None:
    the_plan = plan.parse(REBUILT, str(tmp_path / "rebuilt.toml"), base=tmp_path)
    assert [s.name for s in the_plan.servers] == ["base.build1", "base.build2"]
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert outcome.failed == 0 and outcome.ran == 4
    with Store(results_dir / RESULTS_DB) as store:
        builds = {s.name: s.build for s in store.server_records(outcome.campaign_id)}
        floors = store.noise_floors(outcome.campaign_id)
        changes = compare.within_campaign(store, None, "base.build1", "base.build2", 0.02)
    first, second = builds["base.build1"], builds["base.build2"]
    assert first is not None and second is not None
    assert "-falign-functions=32" in " ".join(second["configure_applied"])
    assert "-falign-functions" not in " ".join(first["configure_applied"])
    binaries = [build_cache / "builds" / b["key"] / "bin" / "postgres" for b in (first, second)]
    assert binaries[0].read_bytes() != binaries[1].read_bytes()
    assert function_address(binaries[0], "PostgresMain") != function_address(
        binaries[1], "PostgresMain"
    )
    cells = {s.server: s.cell_id for s in the_plan.specs}
    by_kind = {(f.kind, f.cell, f.metric): f for f in floors}
    for copy in ("base.build1", "base.build2"):
        assert (RUN_FLOOR, cells[copy], "tps") in by_kind
        build = by_kind[(BUILD_FLOOR, cells[copy], "tps")]
        print(f"{copy}: TPS build-to-build floor {build.spread:.1%} ({build.evidence})")
        assert build.server == "base" and build.evidence.startswith(
            "base.build2 against base.build1"
        )
    tps = next(c for c in changes if c.metric == "tps")
    assert tps.verdict not in ("improved", "regressed")  # the copies never differ by a change
    assert "build to build" in tps.floors
    assert main(["report", "--results", str(results_dir), "--format", "text"]) == 0
