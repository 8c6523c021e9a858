"""Noise floors without a server: the estimators (`analysis.floors`), the verdict rule (a change
whose interval reaches inside the build-to-build floor is no change of the patch), the plan's
`restart` and `rebuild` (copies named, laid out differently, keyed apart), the floors a
campaign records per cell from its stored runs, and how `compare` and the text report say them.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab import plan
from pgbenchlab.analysis.floors import (
    BUILD_FLOOR,
    RESTART_FLOOR,
    RUN_FLOOR,
    build_offset,
    judge,
    spread,
)
from pgbenchlab.builds.recipe import Compiler, SourceIdentity, cache_key, layout_cflags
from pgbenchlab.campaign.floors import cell_floors, restart_problems
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError
from pgbenchlab.report.views import compare
from pgbenchlab.report.views.build import load_view
from pgbenchlab.store import MIGRATIONS, SCHEMA_VERSION, NoiseFloor, Store

# -- estimators --------------------------------------------------------------------------------


def test_the_spread_is_the_standard_deviation_of_the_logarithms_as_a_relative_figure() -> None:
    assert spread([100.0]) is None and spread([]) is None
    assert spread([100.0, 100.0]) == 0.0
    found = spread([100.0, 110.0])
    assert found == pytest.approx(math.expm1(math.log(1.1) / math.sqrt(2)))
    assert spread([100.0, 110.0, 0.0]) == found  # a non-positive value is no measurement


def test_the_build_offset_is_the_paired_geometric_mean_ratio_either_way() -> None:
    slower = build_offset([(100.0, 98.0), (200.0, 196.0), (50.0, 49.0)])
    assert slower is not None and slower.rounds == 3
    assert slower.change == pytest.approx(-0.02) and slower.half_width == pytest.approx(0.0)
    faster = build_offset([(98.0, 100.0), (196.0, 200.0)])
    assert faster is not None and faster.floor == pytest.approx(slower.floor, rel=1e-9)
    assert faster.floor == pytest.approx(math.expm1(-math.log(0.98)))
    one = build_offset([(100.0, 103.0)])
    assert one is not None and one.half_width == math.inf
    assert build_offset([]) is None and build_offset([(0.0, 1.0)]) is None


# -- the verdict rule --------------------------------------------------------------------------


def test_a_change_inside_the_build_floor_is_held_and_one_beyond_it_beats_it() -> None:
    floors = {RUN_FLOOR: 0.05, BUILD_FLOOR: 0.02}
    beyond = judge(True, 0.05, 0.03, 0.07, floors)
    assert beyond.beaten == (RUN_FLOOR, BUILD_FLOOR) and not beyond.held
    reaching = judge(True, 0.05, 0.01, 0.09, floors)  # the interval reaches inside ±2 %
    assert reaching.beaten == (RUN_FLOOR,) and reaching.held
    below = judge(True, -0.05, -0.07, -0.03, floors)
    assert below.beaten == (RUN_FLOOR, BUILD_FLOOR) and not below.held
    assert judge(False, 0.05, -0.01, 0.11, floors) == judge(False, 0.0, None, None, {})
    restarts = judge(True, 0.05, 0.03, 0.07, {RESTART_FLOOR: 0.04})
    assert restarts.beaten == (RESTART_FLOOR,) and not restarts.held


# -- the plan ----------------------------------------------------------------------------------

REBUILT = """
[campaign]
repeats = 2
restart = "{restart}"
[build.base]
source = "debian:postgresql-13"
rebuild = 2
[build.patched]
from = "base"
patches = ["p.patch"]
[[server]]
name = "pg"
install = {{ build = "base" }}
[[server]]
name = "patched"
install = {{ build = "patched" }}
[matrix]
scale = [1]
workload = ["select-only"]
clients = [1, 2]
"""


def rebuilt(tmp_path: Path, restart: str = "never", text: str = REBUILT) -> plan.Plan:
    (tmp_path / "p.patch").write_text("one\n")
    return plan.parse(text.format(restart=restart), "p.toml", base=tmp_path)


def test_a_rebuilt_build_makes_one_server_per_copy(tmp_path: Path) -> None:
    the_plan = rebuilt(tmp_path)
    servers = {s.name: s for s in the_plan.servers}
    assert list(servers) == ["pg.build1", "pg.build2", "patched"]
    assert servers["pg.build2"].install == "build:base.build2"
    assert servers["pg.build1"].copy_of == "pg" and servers["patched"].copy_of == ""
    assert "copy 2 of 2 of build base" in servers["pg.build2"].description
    needed = {b.name: b for b in the_plan.needed_builds}
    assert set(needed) == {"base.build1", "base.build2", "patched"}  # the child is not rebuilt
    assert (needed["base.build1"].layout, needed["base.build2"].layout) == (1, 2)
    assert {s.server for s in the_plan.specs if s.repeat == 1} == set(servers)
    assert the_plan.measures_floors and the_plan.restart == "never"


def test_copy_one_is_the_plain_build_and_copy_two_is_laid_out_apart() -> None:
    source = SourceIdentity("debian", "postgresql-13", "abc", "13.16")
    key = [cache_key(source, (), (), Compiler("gcc", "gcc 12"), layout=n) for n in (0, 1, 2, 3)]
    assert key[0] == key[1] and len(set(key[1:])) == 3
    assert layout_cflags(1) == () and layout_cflags(2) == ("-falign-functions=32",)
    assert layout_cflags(4) == ("-falign-functions=128",)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("rebuild = 2\n", "build.base.rebuild: must be a whole number from 1 to 4; got 5"),
        ('[[server]]\nname = "pg.build2"\n', 'server name "pg.build2" is used twice'),
        ('data_dir = "d"\n', "server pg: build base is rebuilt 2 times and each copy needs"),
        ('restart = "each-round"\n', "server x is external (dsn): remove restart or the server"),
        ('restart = "always"\n', "campaign.restart: must be one of never, each-round"),
    ],
)
def test_a_bad_rebuild_or_restart_is_refused_in_one_line(
    tmp_path: Path, change: str, said: str
) -> None:
    text = REBUILT.replace('restart = "{restart}"\n', "")
    if change.startswith("rebuild"):
        text = text.replace("rebuild = 2", "rebuild = 5")
    elif change.startswith("[[server]]"):
        text += change
    elif change.startswith("data_dir"):
        own = 'install = {{ build = "base" }}\n'
        text = text.replace(own, own + change)
    else:
        text = text.replace("[campaign]\n", "[campaign]\n" + change)
        text += '[[server]]\nname = "x"\ndsn = "host=/tmp dbname=x"\n'
    with pytest.raises(PlanError) as raised:
        rebuilt(tmp_path, text=text)
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_restarting_needs_root_at_the_plan_check(tmp_path: Path) -> None:
    restarting = rebuilt(tmp_path, "each-round")
    (problem,) = restart_problems(restarting, euid=1000)
    assert problem.startswith('restart = "each-round" drops the page cache between rounds')
    assert problem.endswith("run pgbenchlab as root or remove restart")
    assert restart_problems(restarting, euid=0) == []
    assert restart_problems(rebuilt(tmp_path), euid=1000) == []


# -- the floors a campaign records -------------------------------------------------------------


def test_each_cell_records_its_spread_and_each_copy_the_offset_between_the_copies(
    tmp_path: Path,
) -> None:
    the_plan = rebuilt(tmp_path, "each-round")
    first = [s for s in the_plan.specs if s.repeat == 1]
    levels = {"pg.build1": 100.0, "pg.build2": 104.0, "patched": 90.0}
    tps = {
        s.cell_id: {1: levels[s.server] * s.clients, 2: levels[s.server] * s.clients * 1.1}
        for s in first
    }
    found = cell_floors(the_plan, {"tps": tps})
    by_cell = {(f.cell, f.kind): f for f in found}
    for spec in first:
        restart = by_cell[(spec.cell_id, RESTART_FLOOR)]
        assert restart.spread == pytest.approx(spread([1.0, 1.1]))
        assert restart.server == spec.server and "each after a restart" in restart.evidence
        build = by_cell.get((spec.cell_id, BUILD_FLOOR))
        if spec.server == "patched":
            assert build is None
        else:
            assert build is not None and build.spread == pytest.approx(0.04)
            assert build.server == "pg"
            assert build.evidence.startswith("pg.build2 against pg.build1: +4.0% over 2 paired")
    assert len(found) == len(first) + 4  # a spread per cell, the offset on each copy's 2 cells


def test_floors_stored_before_their_cells_were_are_the_whole_campaigns(tmp_path: Path) -> None:
    """Migration 33: a floor stored by version 32 reads back with no cell."""
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, 33)))
    db.execute("PRAGMA user_version = 32")
    db.execute(
        "INSERT INTO campaigns (name, plan_path, plan_text, plan_digest, started_at, "
        "pgbenchlab_version) VALUES ('c', 'p.toml', '', 'd', 0, '0')"
    )
    db.execute("INSERT INTO noise_floors VALUES (1, 'pg18', 'tps', 'build to build', 0.01, 'x')")
    db.commit()
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.noise_floors(1) == (NoiseFloor("tps", BUILD_FLOOR, 0.01, "pg18", "x", ""),)


def test_floors_are_replaced_with_their_cells(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(workloads=("select-only",), clients=(1,)))
    with Store(db) as store:
        campaign = store.campaign_id(None)
        old = NoiseFloor("tps", RUN_FLOOR, 0.2, "pg15", "old", "c1")
        store.replace_noise_floors(campaign, [old])
        new = [NoiseFloor("tps", BUILD_FLOOR, 0.01, "pg15", "new", "c1")]
        store.replace_noise_floors(campaign, new)
        assert store.noise_floors(campaign) == tuple(new)


# -- compare and the text report ---------------------------------------------------------------


def floored_campaign(tmp_path: Path, build_floor: float) -> Path:
    """pg18 10 % faster than pg15 over 8 repeats, with a build-to-build floor on pg15's cell."""
    synthetic = SyntheticPlan(workloads=("select-only",), clients=(1,), repeats=8)
    tmp_path.mkdir()
    db = write_synthetic(tmp_path, synthetic)
    with Store(db) as store:
        campaign = store.campaign_id(None)
        view = load_view(store, campaign, detail=False)
        pg15 = next(c.cell_id for c in view.cells if c.dim("server") == "pg15")
        store.replace_noise_floors(
            campaign,
            [
                NoiseFloor("tps", BUILD_FLOOR, build_floor, "pg15", "two builds", pg15),
                NoiseFloor("tps", RUN_FLOOR, 0.06, "pg15", "8 runs", pg15),
            ],
        )
    return db


def tps_change(db: Path) -> compare.CellChange:
    with Store(db) as store:
        changes = compare.within_campaign(store, None, "pg15", "pg18", threshold=0.02)
    return next(c for c in changes if c.metric == "tps")


def test_a_change_within_the_build_floor_is_never_called_a_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beaten = tps_change(floored_campaign(tmp_path / "a", 0.01))
    assert beaten.verdict == "improved" and not beaten.held
    assert beaten.floors == "beat run to run 6.0%; beat build to build 1.0%"
    held = tps_change(floored_campaign(tmp_path / "b", 0.5))
    assert held.verdict == "within_noise" and held.held
    assert held.verdict_text == "within the build-to-build floor"
    assert held.floors == "beat run to run 6.0%; within build to build 50.0%"
    assert "within the build-to-build floor: the interval reaches inside ±50.0%" in held.reason
    argv = ["--results", str(tmp_path / "b")]
    assert main(["compare", *argv, "--baseline", "pg15", "--candidate", "pg18"]) == 0
    out = capsys.readouterr().out
    assert "within the build-to-build floor" in out
    assert "TPS: beat run to run 6.0%; within build to build 50.0%" in out
    assert main(["report", *argv, "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 72
    flat = " ".join(text.split())
    assert "within the build-to-build floor" in flat
    assert "noise floors: beat run to run 6.0%; within build to build 50.0%" in flat
    assert "TPS: build to build 50.0% (two builds)" in flat
    assert "restart to restart: not measured" in flat
    html = tmp_path / "report.html"
    assert main(["report", *argv, "-o", str(html)]) == 0
    page = html.read_text()
    assert '<h3 id="floors">Noise floors</h3>' in page
    assert "Verdicts against the noise floors (against pg15)" in page
    assert "within the build-to-build floor" in page and "beat run to run 6.0%" in page
