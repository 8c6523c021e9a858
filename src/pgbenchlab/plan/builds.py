"""The [build.NAME] tables: PostgreSQL built from source, and `install = { build = "NAME" }`.

A build names its source (debian:PACKAGE, git:PATH with a ref, tar:PATH, dir:PATH), its build
system (autoconf, or meson for trees that have it), configure (or meson) options, a compiler
and patches in order, then a series as posted (`series`: an mbox, or a directory of
v3-0001-… files; `builds.series`); `prefixes = true` adds a build per prefix of its patches
(NAME-p1, NAME-p2 …; NAME itself has them all). `from = "other"` takes another build's source
and options and adds patches, so two builds that differ only by a patch say so. Paths are
resolved against the plan's directory. Nothing is fetched or built here (see
`pgbenchlab.builds`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pgbenchlab.builds import prebuilt, series
from pgbenchlab.builds.recipe import (
    BUILD_SYSTEMS,
    DEFAULT_BUILD_SYSTEM,
    DEFAULT_COMPILER,
    BuildRecipe,
    refused_option,
    split_source,
)
from pgbenchlab.errors import BuildError
from pgbenchlab.installs import BINARIES_PREFIX, BUILD_PREFIX
from pgbenchlab.plan.schema import BUILD_KEYS, MAX_REBUILD
from pgbenchlab.plan.values import Context, check_name, plan_path

INHERITING_KEYS = ("from", "patches", "series", "prefixes", "rebuild")


def parse_builds(value: Any, ctx: Context, base: Path) -> dict[str, BuildRecipe]:
    """Every [build.NAME] table as a recipe, `from` chains resolved; one-line PlanErrors."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ctx.fail("build", "must be tables such as [build.base]")
    for name, item in value.items():
        check_name(name, ctx, f"build.{name}")
        if not isinstance(item, dict):
            raise ctx.fail(f"build.{name}", "must be a table ([build.NAME])")
        ctx.check_keys(item, BUILD_KEYS, f"build.{name}")
    recipes: dict[str, BuildRecipe] = {}
    for name in value:
        _resolve(name, value, recipes, ctx, base, ())
    return recipes


def _resolve(
    name: str,
    tables: dict[str, Any],
    done: dict[str, BuildRecipe],
    ctx: Context,
    base: Path,
    chain: tuple[str, ...],
) -> BuildRecipe:
    if name in done:
        return done[name]
    if name in chain:
        cycle = " → ".join([*chain[chain.index(name) :], name])
        raise ctx.fail(f"build.{chain[-1]}.from", f"builds inherit in a cycle: {cycle}")
    item = tables[name]
    key = f"build.{name}"
    patches = _paths(item.get("patches", []), ctx, f"{key}.patches", base)
    patches += _series(item.get("series"), ctx, f"{key}.series", base)
    parent_name = item.get("from")
    if parent_name is not None:
        extra = [k for k in item if k not in INHERITING_KEYS]
        if extra:
            raise ctx.fail(
                f"{key}.{extra[0]}",
                'a build "from" another takes its source and options; it may only add patches '
                "(and rebuild)",
            )
        if not isinstance(parent_name, str) or parent_name not in tables:
            known = ", ".join(tables) or "none"
            raise ctx.fail(f"{key}.from", f"no build {parent_name!r}; builds: {known}")
        parent = _resolve(parent_name, tables, done, ctx, base, (*chain, name))
        recipe = BuildRecipe(
            name,
            parent.source,
            parent.ref,
            parent.configure,
            parent.compiler,
            (*parent.patches, *patches),
            based_on=parent_name,
            build_system=parent.build_system,
            rebuild=_rebuild(item, ctx, key),
        )
    else:
        recipe = BuildRecipe(
            name,
            _source(item, ctx, key, base),
            _ref(item, ctx, key),
            _configure(item.get("configure", []), ctx, f"{key}.configure"),
            _compiler(item.get("compiler", DEFAULT_COMPILER), ctx, f"{key}.compiler", base),
            patches,
            build_system=_build_system(item, ctx, key),
            rebuild=_rebuild(item, ctx, key),
        )
    wanted = item.get("prefixes", False)
    done.update(_prefixes(recipe, len(patches), wanted, tables, ctx, f"{key}.prefixes"))
    done[name] = recipe
    return recipe


def _prefixes(
    recipe: BuildRecipe,
    own_files: int,
    wanted: Any,
    tables: dict[str, Any],
    ctx: Context,
    key: str,
) -> dict[str, BuildRecipe]:
    """NAME-p1 … NAME-p(N-1): the build with the first 1 … N-1 of the N patches it adds to
    the build it comes "from" (its last ``own_files`` files, an mbox counting each of its
    patches); NAME has them all."""
    if not isinstance(wanted, bool):
        raise ctx.fail(key, f"must be true or false; got {wanted!r}")
    if not wanted:
        return {}
    counts = [series.patch_count(Path(p)) for p in recipe.patches]
    inherited = sum(counts[: len(counts) - own_files])
    own = sum(counts) - inherited
    if own < 2:
        raise ctx.fail(key, f"build {recipe.name} adds {own} patch(es); prefixes need 2 or more")
    found: dict[str, BuildRecipe] = {}
    for count in range(1, own):
        name = check_name(f"{recipe.name}-p{count}", ctx, key)
        if name in tables:
            raise ctx.fail(key, f"the prefix build {name} is also a [build.{name}]; rename one")
        found[name] = replace(recipe, name=name, patch_limit=inherited + count)
    return found


def _source(item: dict[str, Any], ctx: Context, key: str, base: Path) -> str:
    if "source" not in item:
        raise ctx.fail(key, 'needs a "source" (debian:PACKAGE, git:PATH, tar:PATH or dir:PATH)')
    text = item["source"]
    if not isinstance(text, str):
        raise ctx.fail(f"{key}.source", f"must be a string; got {text!r}")
    try:
        kind, location = split_source(text)
    except ValueError as exc:
        raise ctx.fail(f"{key}.source", str(exc)) from None
    if kind == "debian":
        return text
    return f"{kind}:{plan_path(location, base)}"


def _ref(item: dict[str, Any], ctx: Context, key: str) -> str | None:
    ref = item.get("ref")
    if ref is None:
        return None
    if not isinstance(ref, str) or not ref.strip():
        raise ctx.fail(f"{key}.ref", f"must be a commit, tag or branch; got {ref!r}")
    if not str(item.get("source", "")).startswith("git:"):
        raise ctx.fail(f"{key}.ref", "applies to a git: source only")
    return ref


def _build_system(item: dict[str, Any], ctx: Context, key: str) -> str:
    value = item.get("build_system", DEFAULT_BUILD_SYSTEM)
    if value not in BUILD_SYSTEMS:
        raise ctx.fail(f"{key}.build_system", f'must be "autoconf" or "meson"; got {value!r}')
    return str(value)


def _rebuild(item: dict[str, Any], ctx: Context, key: str) -> int:
    value = item.get("rebuild", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REBUILD:
        raise ctx.fail(
            f"{key}.rebuild", f"must be a whole number from 1 to {MAX_REBUILD}; got {value!r}"
        )
    return value


def _compiler(value: Any, ctx: Context, key: str, base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(key, f'must be "gcc", "clang" or a path; got {value!r}')
    return plan_path(value, base) if "/" in value else value


def _strings(value: Any, ctx: Context, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail(key, f"must be a list of strings; got {value!r}")
    return tuple(value)


def _configure(value: Any, ctx: Context, key: str) -> tuple[str, ...]:
    options = _strings(value, ctx, key)
    if refused := refused_option(options):
        written, why = refused
        raise ctx.fail(key, f'"{written}": {why}; remove it')
    return options


def _paths(value: Any, ctx: Context, key: str, base: Path) -> tuple[str, ...]:
    """Patch files, which must exist: their contents are part of the plan's identity. A file
    holding several patches (an mbox) must hold a series that can apply as one."""
    paths = tuple(plan_path(p, base) for p in _strings(value, ctx, key))
    for path in paths:
        if not Path(path).is_file():
            raise ctx.fail(key, f"no patch file {path}")
        try:
            series.file_parts(Path(path))
        except BuildError as exc:
            raise ctx.fail(key, str(exc)) from None
    return paths


def _series(value: Any, ctx: Context, key: str, base: Path) -> tuple[str, ...]:
    """A series as posted, as patch files in order: a directory's numbered files, or the
    mbox (applied as its patches)."""
    if value is None:
        return ()
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(key, f"must be an mbox file or a directory of patches; got {value!r}")
    path = Path(plan_path(value, base))
    try:
        found = series.read_series(path)
    except BuildError as exc:
        raise ctx.fail(key, str(exc)) from None
    return tuple(str(path / p.name) for p in found) if path.is_dir() else (str(path),)


def install_spec(value: Any, builds: dict[str, BuildRecipe], ctx: Context, key: str) -> str:
    """An `install` value: a string as before, { build = "NAME" } naming a plan's build, or
    { binaries = "MAJOR" | "MAJOR.MINOR" } for prebuilt server binaries."""
    if not isinstance(value, dict):
        return str(value)
    if set(value) == {"binaries"} and isinstance(value["binaries"], str):
        if problem := prebuilt.check_spec(value["binaries"]):
            raise ctx.fail(f"{key}.binaries", problem)
        return BINARIES_PREFIX + value["binaries"]
    if set(value) != {"build"} or not isinstance(value["build"], str):
        raise ctx.fail(key, 'must be a string, { build = "NAME" } or { binaries = "MAJOR" }')
    if value["build"] not in builds:
        known = ", ".join(builds) or "none"
        raise ctx.fail(f"{key}.build", f"no [build.{value['build']}] in the plan; builds: {known}")
    return BUILD_PREFIX + value["build"]
