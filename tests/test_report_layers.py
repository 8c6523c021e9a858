"""The report's layers: views never import renderers; renderers never import the store."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pgbenchlab.report

REPORT = Path(pgbenchlab.report.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth (a function's own imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def modules(package: str) -> list[Path]:
    return sorted((REPORT / package).glob("*.py"))


@pytest.mark.parametrize("path", modules("views"), ids=lambda p: p.stem)
def test_views_never_import_renderers(path: Path) -> None:
    assert not {m for m in imported(path) if m.startswith("pgbenchlab.report.render")}


@pytest.mark.parametrize("path", modules("render"), ids=lambda p: p.stem)
def test_renderers_never_read_the_store(path: Path) -> None:
    forbidden = ("pgbenchlab.store", "pgbenchlab.report.views.load", "sqlite3")
    assert not {m for m in imported(path) if m.startswith(forbidden)}
