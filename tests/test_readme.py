"""The README's plan examples (and those of the study docs) are plans: each is read by the plan
parser as `run` reads it, the files it names made beside it, no server started."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pgbenchlab import plan, studies

ROOT = Path(__file__).parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs" / "studies").glob("*.md"))]
TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def examples() -> dict[str, str]:
    """Each ```toml block, by its file and first line."""
    found = {}
    for document in DOCUMENTS:
        text = document.read_text()
        for block in TOML_BLOCK.finditer(text):
            line = text.count("\n", 0, block.start()) + 2
            found[f"{document.relative_to(ROOT)}:{line}"] = block[1]
    return found


def named_files(value: Any) -> list[str]:
    """The files a plan names that must exist when it is read: scripts and patches."""
    if isinstance(value, list):
        return [name for item in value for name in named_files(item)]
    if not isinstance(value, dict):
        return []
    found = [str(value["script"])] if isinstance(value.get("script"), str) else []
    found += [str(p) for p in value.get("patches", []) if isinstance(p, str)]
    return found + [name for item in value.values() for name in named_files(item)]


EXAMPLES = examples()


def test_the_readme_shows_plans() -> None:
    assert len([k for k in EXAMPLES if k.startswith("README.md")]) >= 6


@pytest.mark.parametrize("where", sorted(EXAMPLES))
def test_each_plan_example_is_a_valid_plan(where: str, tmp_path: Path) -> None:
    text = EXAMPLES[where]
    for name in named_files(tomllib.loads(text)):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("SELECT 1;\n")
    the_plan = plan.parse(text, where, base=tmp_path, cpu_count=2)
    assert the_plan.specs


def test_the_studies_the_readme_lists_are_the_ones_new_writes() -> None:
    text = (ROOT / "README.md").read_text()
    listed = re.findall(r"^\| `(\w+)[` ]", text[text.index("| study | what it measures |") :], re.M)
    assert listed[: len(studies.STUDIES)] == list(studies.STUDIES)


def test_the_pgbench_versions_said_tested_are_the_real_captures() -> None:
    text = (ROOT / "README.md").read_text()
    said = re.search(r"checked against\s+real outputs of ([\d, and]+)\)", text)
    assert said, "the README states which pgbench versions are tested"
    versions = re.findall(r"\d+", said[1])
    golden = ROOT / "tests" / "golden" / "pgbench"
    captured = sorted((d.name for d in golden.iterdir() if d.name.isdigit()), key=int)
    assert versions == captured
