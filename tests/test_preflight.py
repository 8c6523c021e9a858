"""The checks before a campaign starts, as one ordered list: every problem found is reported at
once (a line each, exit 2) by `run`, `run --dry-run` and `capacity`, nothing started or
changed; a check that needs one which failed is skipped and says so; the dry run shows each
check's outcome (--json: as JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgbenchlab.campaign.preflight import (
    CHECKS,
    Check,
    Findings,
    Readiness,
    Status,
    refuse,
    run_checks,
)
from pgbenchlab.cli import main
from pgbenchlab.errors import NotReady
from pgbenchlab.plan import parse

THREE_PROBLEMS = """
[build.b]
source = "tar:{missing}"
[[server]]
name = "built"
install = {{ build = "b" }}
[[server]]
name = "binless"
install = "{nowhere}"
[matrix]
scale = [1]
clients = [1]
workload = ["select-only"]
{extra}
[matrix.sysctl]
"vm.no_such_tunable" = [1, 2]
"""
SAID = (
    "builds: source tar:",
    "does not exist: correct the source of [build.b]",
    "kernel tunables: [matrix.sysctl]",
    "vm.no_such_tunable",
    "installations: server binless: no PostgreSQL server in",
)


def three_problems(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "plan.toml"
    missing, nowhere = tmp_path / "no" / "pg.tar.gz", tmp_path / "no" / "bin"
    path.write_text(THREE_PROBLEMS.format(missing=missing, nowhere=nowhere, extra=extra))
    return path


@pytest.mark.parametrize(
    "command",
    [["run"], ["run", "--dry-run"], ["run", "--dry-run", "--json"], ["capacity", "--slo=p99<=9ms"]],
)
def test_every_problem_is_reported_at_once_and_nothing_starts(
    command: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGBENCHLAB_BUILD_CACHE", str(tmp_path / "cache"))
    plan_file = three_problems(tmp_path)
    results = tmp_path / "results"
    argv = [command[0], str(plan_file), *command[1:], "--results", str(results)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "pgbenchlab: error: 3 problems, found before anything started; fix each:"
    assert len(err) == 4, err
    for said in SAID:
        assert any(said in line for line in err[1:]), (said, err)
    assert not results.exists() and not (tmp_path / "cache").exists()


def test_capacity_adds_its_own_check_to_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = three_problems(tmp_path, extra="rate = [100]")
    results = tmp_path / "results"
    assert main(["capacity", str(plan_file), "--slo", "p99 <= 9ms", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("pgbenchlab: error: 4 problems") and len(err) == 5, err
    assert "capacity search: the plan gives a rate (-R 100" in err[1]
    assert not results.exists()


def test_the_dry_run_lists_every_check_with_its_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = three_problems(tmp_path)
    assert main(["run", str(plan_file), "--dry-run", "-q"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "checks before the campaign starts:"
    listed = {line.split("  ")[1].strip(): line for line in out[1:] if not line[3:4].isspace()}
    assert list(listed) == [c.name for c in CHECKS]
    assert "failed (1); fix: correct the [build.NAME] table" in listed["builds"]
    assert listed["perf"].endswith("not needed")
    assert "server built: its installation (build b) is checked when the campaign starts" in (
        "\n".join(out)
    )
    assert listed["server settings"].endswith("skipped: needs installations, which failed")

    assert main(["run", str(plan_file), "--dry-run", "--json"]) == 2
    found = json.loads(capsys.readouterr().out)
    assert "runs" not in found, "a refused plan shows its checks alone"
    outcomes = {c["name"]: c for c in found["checks"]}
    assert [c["name"] for c in found["checks"]] == [c.name for c in CHECKS]
    assert outcomes["installations"]["outcome"] == "failed"
    assert outcomes["installations"]["later"] == [
        "server built: its installation (build b) is checked when the campaign starts"
    ]
    assert outcomes["server settings"]["reason"] == "needs installations, which failed"
    assert all(c["remedy"] and c["checks"] for c in found["checks"])


def test_a_plan_that_passes_shows_its_matrix_then_its_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text('[[server]]\nname = "pg"\ninstall = "15"\n[matrix]\nclients = [1, 2]\n')
    assert main(["run", str(plan_file), "--dry-run", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.index("2 runs, order") < out.index("checks before the campaign starts:")
    assert "  installations            passed\n" in out
    assert main(["run", str(plan_file), "--dry-run", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert len(found["runs"]) == 2
    assert {c["name"]: c["outcome"] for c in found["checks"]}["pgbench"] == Status.PASSED


def test_a_check_that_needs_a_failed_one_is_skipped_and_says_so() -> None:
    def fails(_ready: Readiness, found: Findings) -> None:
        found.attempt(lambda: refuse_one("the first problem"))
        found.attempt(lambda: refuse_one("the second problem"), "item 2")

    def never(_ready: Readiness, _found: Findings) -> None:
        raise AssertionError("a skipped check does not run")

    checks = (
        Check("a", "a thing", fails, "fix a"),
        Check("b", "what needs a", never, "fix b", needs=("a",)),
        Check("c", "what needs b", never, "fix c", needs=("b",)),
    )
    outcomes = run_checks(
        Readiness(parse("[matrix]\nclients = [1]\n", "p.toml", base=Path("."))), checks
    )
    assert [o.status for o in outcomes] == [Status.FAILED, Status.SKIPPED, Status.SKIPPED]
    assert outcomes[0].problems == ("the first problem", "item 2: the second problem")
    assert outcomes[1].reason == "needs a, which failed"
    assert outcomes[2].reason == "needs b, which was skipped"
    with pytest.raises(NotReady) as refused:
        refuse(outcomes)
    assert str(refused.value).splitlines()[1:] == [
        "  - a: the first problem",
        "  - a: item 2: the second problem",
    ]


def refuse_one(problem: str) -> None:
    raise NotReady([problem])
