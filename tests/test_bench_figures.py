"""The README's Figures table carries only numbers its benchmark scripts wrote.

Every figure has a script `bench/NAME.py` whose one run writes `bench/NAME.md` with the command,
date and machine; the README row names NAME, and each number in its result column must appear
as a number in that file. A figure typed into the README by hand, or left there after the
script wrote a new result, fails here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

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
