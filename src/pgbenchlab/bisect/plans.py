"""The bisection's plan: what the user's plan file gives (one cell, one server built from
source) checked, and the plan of each step written from it.

A bisection plan is an ordinary plan with exactly one [build.NAME] table, whose source and ref
the command line gives, one [[server]] installed from it, and a matrix of one cell (or one cell
named among its cells: a followed branch's suite, bisecting the cell that changed). A step's
plan is that plan with one build and one server per commit measured ("good", "bad" and the
commit under test), so a step is an ordinary campaign: stored, resumable, reported.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pgbenchlab import files, plan, tomltext
from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.errors import PlanError
from pgbenchlab.records.cell import RunCell


@dataclass(frozen=True)
class BisectPlan:
    """The user's plan as a template for the steps' plans."""

    name: str
    path: Path
    data: dict[str, Any]  # the TOML, source and ref filled in
    build: str  # the one build's name
    server: dict[str, Any]  # the one [[server]] table
    cell: Mapping[str, Any] | None = None  # the one cell measured: its options but the server

    @property
    def source(self) -> str:
        return str(self.data["build"][self.build]["source"])

    def recipe(self, name: str, commit: str) -> BuildRecipe:
        """The plan's build at a commit, named as the step or suite calls it."""
        template = self.data["build"][self.build]
        return BuildRecipe(
            name, self.source, ref=commit, configure=tuple(template.get("configure", ())),
            compiler=str(template.get("compiler", "gcc")),
        )  # fmt: skip

    def step_text(self, step: str, commits: dict[str, str], repeats: int) -> str:
        """The plan of one step: a build and a server per label (label → commit)."""
        data = copy.deepcopy(self.data)
        template = data["build"][self.build]
        data["build"] = {label: {**template, "ref": commit} for label, commit in commits.items()}
        data["server"] = [
            {**self.server, "name": label, "install": {"build": label}} for label in commits
        ]
        campaign = data.setdefault("campaign", {})
        for key in ("min_repeats", "max_repeats", "precision"):  # a step decides its rounds
            campaign.pop(key, None)
        campaign |= {"name": f"{self.name}.{step}", "repeats": repeats, "order": "interleaved"}
        return tomltext.document(data)

    def step_plan(self, step: str, commits: dict[str, str], repeats: int) -> plan.Plan:
        text = self.step_text(step, commits, repeats)
        parsed = plan.parse(text, str(self.path), base=self.path.resolve().parent)
        if self.cell is None:
            return parsed
        return replace(parsed, specs=tuple(s for s in parsed.specs if same_cell(s, self.cell)))


def same_cell(spec: plan.RunSpec, cell: Mapping[str, Any]) -> bool:
    """Whether the run is of the cell (its options but the server, as `cell_options` gives)."""
    return cell_options(spec) == dict(cell)


def cell_options(spec: plan.RunSpec) -> dict[str, Any]:
    """A run's cell without its server, the same whatever the server is called."""
    return options_of(spec.cell)


def options_of(cell: RunCell) -> dict[str, Any]:
    """A cell's options but its server (a stored run's cell compares with `cell_options`)."""
    return {k: v for k, v in cell.stored().items() if k != "server"}


def same_but_rounds(stored_text: str, text: str) -> bool:
    """Whether two step plans differ at most in the rounds they may take (--max-rounds)."""
    plans = [tomllib.loads(t) for t in (stored_text, text)]
    for data in plans:
        data.get("campaign", {}).pop("repeats", None)
    return plans[0] == plans[1]


def load(
    path: Path, source: str | None, cell: Mapping[str, Any] | None = None, *, suite: bool = False
) -> BisectPlan:
    """The plan file checked as a bisection's (of its one cell, or of ``cell`` among
    several; suite: any number of cells, as a followed branch measures them): PlanError (one
    line) when it is not one."""
    try:
        text = files.read_text(path)
    except files.Unreadable as exc:
        raise PlanError(f"cannot read the plan file: {exc}", where=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"not valid TOML: {exc}", where=str(path)) from None
    build = _the_build(data, path, source)
    server = _the_server(data, str(path), build)
    parsed = plan.parse(tomltext.document(data), str(path), base=path.resolve().parent)
    if parsed.sysctl_names:
        raise PlanError(
            "a bisection plan sets no kernel tunables ([matrix.sysctl])", where=str(path)
        )
    cells = {spec.cell_id for spec in parsed.specs if cell is None or same_cell(spec, cell)}
    if len(cells) != 1 and not (suite and cells):
        raise PlanError(
            f"a bisection measures one cell; this plan has {len(cells)}: give every axis one value",
            where=str(path),
        )
    return BisectPlan(parsed.name, path, data, build, server, cell)


def _the_build(data: dict[str, Any], path: Path, source: str | None) -> str:
    """The plan's one build, its source made absolute: --source's relative to the working
    directory, the plan's to its directory (as any plan path)."""
    where = str(path)
    builds = data.get("build")
    if not isinstance(builds, dict) or len(builds) != 1:
        raise PlanError(
            "a bisection plan has exactly one [build.NAME] table (its configure options and "
            "compiler; --source, --good and --bad give the rest)",
            where=where,
        )
    ((name, table),) = builds.items()
    if not isinstance(table, dict):
        raise PlanError(f"build.{name} must be a table", where=where)
    for key in ("from", "patches", "series", "prefixes"):
        if key in table:
            raise PlanError(
                f"build.{name}.{key}: a bisection builds commits as they are", where=where
            )
    if table.get("build_system", "autoconf") != "autoconf":
        raise PlanError(
            f"build.{name}.build_system: a bisection builds with autoconf (its incremental build "
            "trees); remove build_system",
            where=where,
        )
    if source is not None:
        table["source"] = source
    if not str(table.get("source", "")).startswith("git:"):
        raise PlanError(
            "a bisection needs a git checkout: give --source git:PATH (or source in the build)",
            where=where,
        )
    location = str(table["source"]).removeprefix("git:")
    if location.strip():  # an empty one is refused by the plan parser
        base = Path.cwd() if source is not None else path.resolve().parent
        table["source"] = f"git:{plan.plan_path(location, base)}"
    table["ref"] = "HEAD"  # each step gives its own commit
    return str(name)


def _the_server(data: dict[str, Any], where: str, build: str) -> dict[str, Any]:
    servers = data.get("server")
    if not isinstance(servers, list) or len(servers) != 1 or not isinstance(servers[0], dict):
        raise PlanError("a bisection plan has exactly one [[server]]", where=where)
    server = servers[0]
    if server.get("install") != {"build": build}:
        raise PlanError(f'the [[server]] must say install = {{ build = "{build}" }}', where=where)
    return dict(server)
