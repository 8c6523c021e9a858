"""The README's Figures table carries only numbers its benchmark scripts wrote, and only the
verdicts their intervals support.

Every figure has a script `bench/NAME.py` whose one run writes `bench/NAME.md` with the command,
date, machine, commit and the digest of the code that measured it (bench/figure.py); the README
row names NAME, and each number in its result column must appear as a number in that file. A
figure typed into the README by hand, left there after the script wrote a new result, or whose
script changed since it ran, fails here; so does a README verdict other than the file's.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _bench_module(name: str) -> ModuleType:
    """A bench/ module, loaded from its file (bench/ is not a package, nor on the path)."""
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).parent.parent / "bench" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


figure = _bench_module("figure")

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
# A number as written: 1,000 or 0.9924 or 614; not the inside of a longer one (a lookbehind
# for "." keeps "9924" of "0.9924" from counting as a number of its own).
NUMBER = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|(?<![\d.,])\d+(?:\.\d+)?(?!\d)")
NAME = re.compile(r"\(`(\w+)`\)")
PROVENANCE = (
    re.compile(r"^- Command: \S", re.MULTILINE),
    re.compile(r"^- Date: \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", re.MULTILINE),
    re.compile(r"^- Machine: \S", re.MULTILINE),
)


def figures_table(readme: str) -> list[dict[str, str]]:
    """The rows of the table in the README's Figures section, keyed by column header."""
    section = readme.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    header, body = cells[0], cells[2:]  # cells[1] is the |---| line
    return [dict(zip(header, row, strict=True)) for row in body]


def numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


ROWS = figures_table((ROOT / "README.md").read_text(encoding="utf-8"))


def figure_name(row: dict[str, str]) -> str:
    found = NAME.search(row["figure"])
    assert found, f"no (`NAME`) in the figure column: {row['figure']}"
    return found.group(1)


def test_the_table_has_what_a_reader_needs() -> None:
    assert ROWS
    assert {"figure", "data", "result", "bar"} <= set(ROWS[0])
    for row in ROWS:
        assert row["data"], f"{figure_name(row)}: say whether the figure is synthetic or real"


def test_every_figure_file_has_a_row_and_a_script() -> None:
    listed = {figure_name(row) for row in ROWS}
    written = {path.stem for path in BENCH.glob("*.md")}
    assert listed == written
    for name in written:
        assert (BENCH / f"{name}.py").exists(), f"bench/{name}.md without its script"


@pytest.mark.parametrize("row", ROWS, ids=figure_name)
def test_readme_numbers_come_from_the_figure_file(row: dict[str, str]) -> None:
    name = figure_name(row)
    written = numbers((BENCH / f"{name}.md").read_text(encoding="utf-8"))
    missing = sorted(numbers(row["result"]) - written)
    assert not missing, f"README numbers not in bench/{name}.md: {missing}"


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.md")), ids=lambda p: p.stem)
def test_figure_files_say_how_when_and_where(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for line in PROVENANCE:
        assert line.search(text), f"{path.name}: no line matching {line.pattern}"


def test_numbers_are_read_whole() -> None:
    assert numbers("0.9924 – 1.0087, 1,000 runs, 614 MiB; 3.3 GB") == {
        "0.9924",
        "1.0087",
        "1,000",
        "614",
        "3.3",
    }
    assert "9924" not in numbers("0.9924")


@pytest.mark.parametrize("script", sorted(p.stem for p in BENCH.glob("*.py")))
def test_every_bench_script_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A script that no longer imports (an API it used moved) is found here, not on the day
    # its figure is due.
    monkeypatch.syspath_prepend(str(BENCH))
    importlib.import_module(script)


STATED_BEFORE_THE_RUN = ("Estimator:", "Design:", "Rounds:", "Bar:")


def fact(text: str, name: str) -> str | None:
    prefix = f"- {name}: "
    return next((ln[len(prefix) :] for ln in text.splitlines() if ln.startswith(prefix)), None)


@pytest.mark.parametrize("row", ROWS, ids=figure_name)
def test_the_readme_says_the_figure_file_s_verdict(row: dict[str, str]) -> None:
    name = figure_name(row)
    text = (BENCH / f"{name}.md").read_text(encoding="utf-8")
    verdict = fact(text, "Verdict")
    assert verdict, f"bench/{name}.md has no '- Verdict:' line"
    words = [part.rsplit(": ", 1)[-1] for part in verdict.split("; ")]
    assert all(word in figure.VERDICTS for word in words), f"{name}: {verdict}"
    assert row["bar"] == verdict, f"README bar of {name} is not its file's verdict: {verdict}"


@pytest.mark.parametrize("row", ROWS, ids=figure_name)
def test_a_figure_was_measured_by_its_script_as_it_is(row: dict[str, str]) -> None:
    name = figure_name(row)
    text = (BENCH / f"{name}.md").read_text(encoding="utf-8")
    assert fact(text, "Commit"), f"bench/{name}.md does not name the commit it measured"
    current = figure.script_digest(BENCH / f"{name}.py")
    assert fact(text, "Script digest") == current, (
        f"bench/{name}.py (or a bench module it imports) changed since bench/{name}.md was "
        f"written: rerun it ({fact(text, 'Command')})"
    )
    source = (BENCH / f"{name}.py").read_text(encoding="utf-8")
    docstring = source.split('"""', 2)[1]
    for item in STATED_BEFORE_THE_RUN:
        assert item in docstring, f"bench/{name}.py's docstring does not state its {item}"


def test_verdicts_judge_the_whole_interval() -> None:
    at_most = figure.Bar("≤ 15 s", 15.0, at_most=True)
    assert at_most.verdict(9.0, 14.0) == "met"
    assert at_most.verdict(9.0, 16.0) == "not shown"
    assert at_most.verdict(15.5, 16.0) == "not met"
    at_least = figure.Bar("≥ 0.98", 0.98, at_most=False)
    assert at_least.verdict(0.98, 1.01) == "met"
    assert at_least.verdict(0.97, 1.01) == "not shown"
    assert at_least.verdict(0.90, 0.97) == "not met"


def test_rewriting_a_figure_keeps_the_earlier_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "demo.md"
    figure.write_figure(
        path, "# Demo\n\n- Date: 2026-01-01 10:00 UTC (start)\n- Verdict: ≤ 1 s: met\n"
    )
    figure.write_figure(
        path, "# Demo\n\n- Date: 2026-02-01 10:00 UTC (start)\n- Verdict: ≤ 1 s: not shown\n"
    )
    figure.write_figure(
        path, "# Demo\n\n- Date: 2026-03-01 10:00 UTC (start)\n- Verdict: ≤ 1 s: met\n"
    )
    text = path.read_text(encoding="utf-8")
    assert fact(text, "Date") == "2026-03-01 10:00 UTC (start)"
    history = text.split(figure.HISTORY, 1)[1]
    assert history.index("2026-02-01") < history.index("2026-01-01")
    assert "≤ 1 s: not shown" in history and "≤ 1 s: met" in history
