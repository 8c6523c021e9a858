"""Noise floors stored with a campaign (migration 24): an equivalence margin below the
build-to-build floor is refused in one line, a margin above it says so, and without a floor
the answer says none was measured; the text report lists the floors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab.cli import main
from pgbenchlab.store import BUILD_FLOOR, NoiseFloor, Store
from pgbenchlab.store.schema import MIGRATIONS, SCHEMA_VERSION


def test_a_database_of_the_previous_version_gets_an_empty_floor_table(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript("".join(MIGRATIONS[v] for v in range(1, SCHEMA_VERSION)))
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    db.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        campaign = store.start_campaign("c", "p.toml", "", "d", {"pgbenchlab": "0"}, {})
        assert store.noise_floors(campaign) == ()
        floor = NoiseFloor("tps", BUILD_FLOOR, 0.013, "pg18", "two builds, 10 rounds")
        store.replace_noise_floors(campaign, [floor])
        assert store.noise_floors(campaign) == (floor,)


def compare(results: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    argv = ["compare", "--results", str(results), "--baseline", "pg15", "--candidate", "pg18"]
    code = main([*argv, "--metric", "tps", *extra])
    out, err = capsys.readouterr()
    return code, out + err


def test_a_margin_below_the_build_floor_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan())
    code, out = compare(tmp_path, capsys, "--equivalence", "1%")
    assert code == 0
    assert "no build-to-build floor was measured for TPS; the margin is not checked" in out
    with Store(db) as store:
        campaign = store.campaign_id(None)
        store.replace_noise_floors(
            campaign,
            [
                NoiseFloor("tps", BUILD_FLOOR, 0.013, "pg18"),
                NoiseFloor("p99", BUILD_FLOOR, 0.05, "pg18"),
            ],
        )
    code, out = compare(tmp_path, capsys, "--equivalence", "1%")
    assert code == 2 and out.count("\n") == 1
    assert (
        "equivalence margin ±1% is below the build-to-build floor of ±1.3% measured for TPS" in out
    )
    code, out = compare(tmp_path, capsys, "--equivalence", "2%")
    assert code == 0 and "the margin is above the build-to-build floor of ±1.3% for TPS" in out
    code = main(["report", "--results", str(tmp_path), "--format", "text"])
    text = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "TPS: build to build on pg18 1.3%" in text
    assert "restart to restart: not measured" in text
