"""Each command's options: built from the parsed arguments as a frozen record, mistakes in
them refused with one line and exit 2 before anything is opened (pure, no server)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pgbenchlab.cli import build_parser, main
from pgbenchlab.cli.common import DEFAULT_RESULTS
from pgbenchlab.cli.compare import CompareOptions
from pgbenchlab.cli.export import ExportOptions
from pgbenchlab.cli.run import RunCommandOptions, quickstart_plan_path
from pgbenchlab.cli.show import ShowOptions
from pgbenchlab.errors import UserError


def options(*argv: str) -> object:
    args = build_parser().parse_args(argv)
    return args.options_from(args)


def test_run_options() -> None:
    built = options("run", "plan.toml", "--dry-run", "-q", "--results", "r")
    assert built == RunCommandOptions(
        plan=Path("plan.toml"),
        results=Path("r"),
        dry_run=True,
        fresh=False,
        quiet=True,
        json=False,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.quiet = False  # type: ignore[attr-defined]


def test_quickstart_runs_the_packaged_plan() -> None:
    built = options("quickstart", "--json")
    assert isinstance(built, RunCommandOptions)
    assert built.plan == quickstart_plan_path() and built.plan.is_file()
    assert built.json and built.results == DEFAULT_RESULTS


def test_show_and_export_options() -> None:
    assert options("show", "7", "--json") == ShowOptions(DEFAULT_RESULTS, 7, json=True)
    assert options("export", "--format", "parquet", "-o", "x.parquet") == ExportOptions(
        DEFAULT_RESULTS, None, "parquet", Path("x.parquet")
    )


@pytest.mark.parametrize(
    ("argv", "threshold"),
    [
        (["a", "b"], 0.02),
        (["--baseline", "pg15", "--candidate", "pg18", "--threshold", "3%"], 0.03),
        (["--series", "clients", "--threshold", "0.05"], 0.05),
        (["--series", "campaign", "n1", "n2", "n3"], 0.02),
    ],
)
def test_compare_options(argv: list[str], threshold: float) -> None:
    built = options("compare", *argv)
    assert isinstance(built, CompareOptions)
    assert built.threshold == threshold


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a"], "compare CAMPAIGN_A CAMPAIGN_B"),
        (["a", "b", "--baseline", "x"], "compare CAMPAIGN_A CAMPAIGN_B"),
        (["--baseline", "x"], "give --baseline SERVER and --candidate SERVER"),
        (["--series", "clients", "--baseline", "x"], "drop --baseline/--candidate"),
        (["--series", "campaign", "--campaign", "c"], "takes the campaigns as arguments"),
        (["--series", "clients", "a", "b"], "campaigns in order need --series campaign"),
        (["a", "b", "--threshold", "150%"], "give a share such as 3% or 0.03"),
        (["a", "b", "--threshold", "lots"], "give a share such as 3% or 0.03"),
    ],
)
def test_compare_refuses_options_that_make_no_comparison(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UserError, match=message.replace("/", ".")):
        options("compare", *argv)
    assert main(["compare", *argv, "--results", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pgbenchlab: error: ") and message in err


@pytest.mark.parametrize(
    "argv",
    [
        ["installs"],
        ["run", "plan.toml"],
        ["quickstart"],
        ["runs"],
        ["show", "1"],
        ["compare", "a", "b"],
        ["campaigns"],
        ["clean"],
    ],
)
def test_every_command_a_program_reads_has_json(argv: list[str]) -> None:
    built = options(*argv, "--json")
    assert built.json is True  # type: ignore[attr-defined]
