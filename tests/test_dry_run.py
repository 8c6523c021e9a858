"""`run --dry-run`: the same checks as `run` before anything starts, the matrix as JSON with
--json, and a table that shows every axis the plan varies (no server needed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pgbenchlab.cli import main

SERVER = '[[server]]\nname = "s"\ninstall = { build = "b" }\n'
REFUSED = {
    "missing tar source": ('[build.b]\nsource = "tar:no/such.tar.gz"\n' + SERVER, "does not exist"),
    "missing git source": ('[build.b]\nsource = "git:no/such/repo"\n' + SERVER, "does not exist"),
    "unknown ref": (
        '[build.b]\nsource = "git:repo"\nref = "REL_99_STABLE"\n' + SERVER,
        'ref "REL_99_STABLE" is not a commit, tag or branch',
    ),
    "unknown compiler": (
        '[build.b]\nsource = "git:repo"\ncompiler = "no-such-cc"\n' + SERVER,
        'compiler "no-such-cc" not found',
    ),
    "unknown tunable": (
        '[matrix.sysctl]\n"vm.no_such_tunable" = [1, 2]\n',
        "vm.no_such_tunable",
    ),
}


def git_repo(path: Path) -> None:
    """A one-commit repository whose tree looks like PostgreSQL's (its configure never runs)."""
    path.mkdir()
    (path / "configure").write_text("PACKAGE_VERSION='13.16'\n")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "tree"]):
        subprocess.run([*git, *step], check=True)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_dry_run_refuses_what_run_refuses_before_anything_starts(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGBENCHLAB_BUILD_CACHE", str(tmp_path / "cache"))
    git_repo(tmp_path / "repo")
    text, message = REFUSED[case]
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(text)
    results = tmp_path / "results"
    errors = []
    for dry in (["--dry-run"], []):
        assert main(["run", str(plan_file), "--results", str(results), "-q", *dry]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
        errors.append(err)
    assert errors[0] == errors[1]  # the same check, the same words
    assert not results.exists() and not (tmp_path / "cache" / "builds").exists()


VARYING = """
[defaults]
duration = "5s"
[[server]]
name = "a"
cpus = "0"
[[host]]
name = "db1"
ssh = "bench@192.0.2.1"
[[server]]
name = "b"
host = "db1"
[matrix]
scale = [1]
clients = [1]
workload = ["select-only"]
connection = ["socket", "tcp"]
connect = [false, true]
latency_limit = ["none", "50ms"]
"""


def test_the_table_shows_every_axis_the_plan_varies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(VARYING)
    assert main(["run", str(plan_file), "--dry-run", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    for column in ("connection", "connect", "latency_limit", "host", "cpus"):
        assert column in header, header
    rows = lines[1 : lines.index("")]  # the summary follows a blank line
    assert len(rows) == 16
    cells = {tuple(row.split()[1:]) for row in rows}  # without the run's number
    assert len(cells) == 16, "every cell reads apart from the others"


def test_json_dry_run_prints_the_expanded_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(VARYING)
    assert main(["run", str(plan_file), "--dry-run", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    runs = found["runs"]
    assert len(runs) == 16 and found["order"] == "interleaved"
    assert found["estimated_seconds"] > 16 * 5
    first = runs[0]
    assert first["sequence"] == 1 and first["server"] == "a" and first["cpus"] == "0"
    assert {(r["server"], r["host"]) for r in runs} == {("a", None), ("b", "db1")}
    assert {(r["connection"], r["connect"], r["latency_limit_ms"]) for r in runs} == {
        (kind, connect, limit)
        for kind in ("socket", "tcp")
        for connect in (False, True)
        for limit in (None, 50.0)
    }
