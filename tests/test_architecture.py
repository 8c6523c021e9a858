"""The shape docs/architecture.md describes, checked: layers, no cycles, short modules, the
results database reached only through the store package, and one class per class name.

Static checks over the source tree (ast), no imports executed. A module's layer is given by the
longest prefix in LAYERS; a module may import from its own layer or any layer below, never from
above. Imports under `if TYPE_CHECKING:` count too: a type that has to come from above is a sign
the record lives in the wrong place.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "pgbenchlab"
MAX_LINES = 450

# Bottom to top. Data flows upwards: plan → specs → campaign → results → store → analysis on
# read → views → renderers → cli. The units are the top-level packages and modules; `report` is
# an umbrella whose two sub-packages are units of their own (views below renderers). Every
# module takes its unit's layer: a package never straddles layers.
LAYERS: dict[str, int] = {
    "errors": 0,
    "jsontext": 0,
    "redaction": 0,
    "files": 0,
    "findings": 0,
    "cpusets": 0,
    "stopsignals": 0,
    "durations": 0,
    "tomltext": 0,
    "records": 0,
    "analysis": 1,
    "results": 2,
    "diagnosing": 2,
    "hosts": 2,
    "installs": 2,
    "builds": 2,
    "osuser": 2,
    "claims": 2,
    "tunables": 2,
    "pgbench": 2,
    "profiles": 2,
    "plan": 3,
    "invocation": 4,
    "server": 4,
    "dataset": 4,
    "telemetry": 4,
    "studies": 4,
    "store": 5,
    "campaign": 6,
    "importing": 6,
    "bisect": 7,
    "follow": 7,
    "report.views": 7,
    "report.render": 8,
    "report": 8,  # the umbrella's own module: `report.write` over views and renderers
    "exporting": 9,
    "cli": 9,
}
UMBRELLAS = {"report": ("report.views", "report.render")}
# The most project modules one module may import: past it a module is doing several jobs.
MAX_FAN_OUT = 22


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def imported(path: Path) -> set[str]:
    """The pgbenchlab modules a file imports (a `from pkg import name` counts `pkg.name` when
    that is a module, else `pkg`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    known = modules()
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base]) if base else ".".join(parent)
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return {m for m in found if m in known}


def unit(module: str) -> str:
    """The top-level package or module a module belongs to (an umbrella's sub-package)."""
    parts = module.removeprefix(f"{PACKAGE}.").split(".")
    for sub in UMBRELLAS.get(parts[0], ()):
        if ".".join(parts[:2]) == sub:
            return sub
    return parts[0]


def layer(module: str) -> int:
    if module == PACKAGE:
        return 0  # the package root holds only __version__
    name = unit(module)
    assert name in LAYERS, f"{module} has no layer in tests/test_architecture.py"
    return LAYERS[name]


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer(module)


@pytest.mark.parametrize("module", sorted(modules()), ids=str)
def test_nothing_imports_from_above(module: str) -> None:
    above = sorted(m for m in imported(modules()[module]) if layer(m) > layer(module))
    assert not above, f"{module} (layer {layer(module)}) imports from above: {above}"


def test_no_import_cycles() -> None:
    graph = {m: imported(p) - {m} for m, p in modules().items()}
    # A package's __init__ re-exporting its modules is not a cycle of its own.
    for m in graph:
        graph[m] = {d for d in graph[m] if not (m.startswith(d + ".") and d != PACKAGE)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules().items():
        if module == PACKAGE:
            continue
        graph.setdefault(unit(module), set()).update(
            unit(dep) for dep in imported(path) if dep != PACKAGE
        )
    return {name: deps - {name} for name, deps in graph.items()}


def test_the_layer_table_names_every_unit_and_no_other() -> None:
    assert set(unit_graph()) == set(LAYERS)


def test_packages_import_no_package_above_and_form_no_loop() -> None:
    graph = unit_graph()
    for name, deps in graph.items():
        above = sorted(d for d in deps if LAYERS[d] > LAYERS[name])
        assert not above, f"package {name} (layer {LAYERS[name]}) imports from above: {above}"
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                loop = [*path[path.index(dep) :], dep] if dep in path else [node, dep]
                raise AssertionError("package import loop: " + " → ".join(loop))
            if dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize("module", sorted(modules()), ids=str)
def test_fan_out_is_bounded(module: str) -> None:
    fan_out = len(imported(modules()[module]) - {module})
    assert fan_out <= MAX_FAN_OUT, f"{module} imports {fan_out} project modules (≤ {MAX_FAN_OUT})"


@pytest.mark.parametrize("module", sorted(modules()), ids=str)
def test_modules_are_short(module: str) -> None:
    lines = len(modules()[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines (at most {MAX_LINES})"


def test_the_results_database_is_reached_only_through_the_store() -> None:
    outside = sorted(
        m
        for m, p in modules().items()
        if "sqlite3" in {a.split(".")[0] for a in stdlib_imports(p)}
        and not m.startswith(f"{PACKAGE}.store")
    )
    assert not outside, f"sqlite3 used outside the store package: {outside}"


def test_each_class_name_names_one_concept() -> None:
    """A class name is defined once in the package: the same name for two things misleads a
    reader of either (private names included)."""
    where: dict[str, list[str]] = {}
    for module, path in modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module)
    repeated = {name: found for name, found in where.items() if len(found) > 1}
    assert not repeated, f"class names defined more than once: {repeated}"


def stdlib_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names
