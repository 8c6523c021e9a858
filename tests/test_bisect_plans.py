"""A bisection's plan: checked as one, and each step's plan written from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab.bisect.plans import load
from pgbenchlab.errors import PlanError

PLAN = """
[campaign]
name = "slowdown"
[build.pg]
configure = ["--without-icu"]
[[server]]
name = "pg"
install = { build = "pg" }
settings = { shared_buffers = "64MB" }
[defaults]
duration = "5s"
[matrix]
scale = 1
workload = "select-only"
clients = 2
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bisect.toml"
    path.write_text(text)
    return path


def test_a_step_plan_has_a_build_and_a_server_per_commit(tmp_path: Path) -> None:
    bisect_plan = load(write(tmp_path, PLAN), "git:/src/postgresql")
    commits = {"good": "a" * 40, "bad": "b" * 40, "c-cccccccccc": "c" * 40}
    step = bisect_plan.step_plan("step-1", commits, repeats=3)
    assert step.name == "slowdown.step-1"
    assert [s.name for s in step.servers] == list(commits)
    assert {(b.name, b.ref, b.source) for b in step.builds} == {
        (label, commit, "git:/src/postgresql") for label, commit in commits.items()
    }
    assert {b.configure for b in step.builds} == {("--without-icu",)}
    assert len(step.specs) == 9 and {s.repeat for s in step.specs} == {1, 2, 3}
    assert {dict(s.settings)["shared_buffers"] for s in step.servers} == {"64MB"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: t.replace("clients = 2", "clients = [2, 4]"),
            "measures one cell; this plan has 2",
        ),
        (lambda t: t + '[build.other]\nsource = "dir:/x"\n', "exactly one \\[build.NAME\\]"),
        (lambda t: t.replace('install = { build = "pg" }', 'install = "15"'), "must say install"),
        (
            lambda t: t + '[[server]]\nname = "x"\ninstall = "15"\n',
            "exactly one \\[\\[server\\]\\]",
        ),
        (lambda t: t.replace("[build.pg]", '[build.pg]\npatches = ["x.patch"]'), "as they are"),
    ],
)
def test_plans_that_are_not_a_bisection_are_refused(tmp_path: Path, change, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PlanError, match=message):
        load(write(tmp_path, change(PLAN)), "git:/src/postgresql")


def test_the_source_must_be_a_git_checkout(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="needs a git checkout"):
        load(write(tmp_path, PLAN), None)
    with pytest.raises(PlanError, match="needs a git checkout"):
        load(write(tmp_path, PLAN), "dir:/src/postgresql")


def test_a_relative_source_is_the_plan_directorys_or_the_command_lines_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plans").mkdir()
    in_plan = PLAN.replace("[build.pg]\n", '[build.pg]\nsource = "git:pg"\n')
    plan_file = write(tmp_path / "plans", in_plan)
    monkeypatch.chdir(tmp_path)
    from_plan = load(Path("plans/bisect.toml"), None)
    assert from_plan.data["build"]["pg"]["source"] == f"git:{tmp_path / 'plans' / 'pg'}"
    from_option = load(plan_file, "git:checkout")  # the working directory's, as any option
    assert from_option.data["build"]["pg"]["source"] == f"git:{tmp_path / 'checkout'}"
    step = from_option.step_plan("step-1", {"good": "a" * 40}, repeats=1)
    assert {b.source for b in step.builds} == {f"git:{tmp_path / 'checkout'}"}
