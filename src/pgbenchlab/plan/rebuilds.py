"""`rebuild = N` on a [build.NAME] table: the same source built N times, each copy laid out
differently (`builds.recipe.layout_cflags`), and every [[server]] of that build made N servers,
one per copy, named SERVER.build1 … SERVER.buildN. The copies run every cell of their server,
interleaved in each round like any servers; the offset between them is the cell's
build-to-build noise floor.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pgbenchlab.builds.recipe import BuildRecipe
from pgbenchlab.installs import BUILD_PREFIX
from pgbenchlab.plan.records import ServerPlan
from pgbenchlab.plan.values import Context

Axes = dict[str, dict[str, Any]]


def copy_name(name: str, copy: int) -> str:
    return f"{name}.build{copy}"


def check_restarts(restart: str, servers: list[ServerPlan], ctx: Context) -> None:
    """restart = "each-round" restarts managed servers and drops this machine's page cache:
    a server it cannot restart so is refused."""
    if restart == "never":
        return
    for server in servers:
        if not server.managed or server.host is not None:
            where = "is external (dsn)" if not server.managed else f"runs on host {server.host}"
            raise ctx.fail(
                "campaign.restart",
                f'"{restart}" restarts managed servers on this machine; server {server.name} '
                f"{where}: remove restart or the server",
            )


def expand_rebuilds(
    builds: dict[str, BuildRecipe], servers: list[ServerPlan], axes: Axes, ctx: Context
) -> tuple[dict[str, BuildRecipe], list[ServerPlan], Axes]:
    """The builds with each rebuilt one's copies beside it (the plain recipe stays, for a
    [pgbench] install that names it: it is copy 1's build), and the servers with each server of
    a rebuilt build replaced by its copies, each with its server's axes."""
    rebuilt = {n: r for n, r in builds.items() if r.rebuild > 1}
    if not rebuilt:
        return builds, servers, axes
    recipes = dict(builds)
    for name, made in rebuilt.items():
        for copy in range(1, made.rebuild + 1):
            recipes[copy_name(name, copy)] = replace(
                made, name=copy_name(name, copy), rebuild=1, layout=copy
            )
    found: list[ServerPlan] = []
    found_axes: Axes = {}
    for server in servers:
        install = server.install or ""
        recipe = rebuilt.get(install.removeprefix(BUILD_PREFIX))
        copies = [server]
        if recipe is not None and install.startswith(BUILD_PREFIX):
            copies = server_copies(server, recipe, ctx)
        found += copies
        found_axes |= {c.name: axes[server.name] for c in copies}
    names = [s.name for s in found]
    if twice := next((n for n in names if names.count(n) > 1), None):
        raise ctx.fail(
            "server", f'server name "{twice}" is used twice (a rebuild copy is named so)'
        )
    return recipes, found, found_axes


def server_copies(server: ServerPlan, recipe: BuildRecipe, ctx: Context) -> list[ServerPlan]:
    """One server per copy of its rebuilt build, each on its own data directory."""
    if server.data_dir is not None:
        raise ctx.fail(
            "server",
            f"server {server.name}: build {recipe.name} is rebuilt {recipe.rebuild} times "
            "and each copy needs a data directory of its own: remove data_dir",
        )
    copies = []
    for copy in range(1, recipe.rebuild + 1):
        about = f"copy {copy} of {recipe.rebuild} of build {recipe.name} (rebuild)"
        copies.append(
            replace(
                server,
                name=copy_name(server.name, copy),
                install=BUILD_PREFIX + copy_name(recipe.name, copy),
                copy_of=server.name,
                description=f"{server.description}; {about}" if server.description else about,
            )
        )
    return copies
