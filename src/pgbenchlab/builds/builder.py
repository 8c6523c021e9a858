"""A recipe made into an installation: pinned down, looked up in the cache, and built (once,
under the key's lock) when missing."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgbenchlab import osuser
from pgbenchlab.builds import cache, series, sources
from pgbenchlab.builds.compile import (
    BuildLog,
    Progress,
    apply_patches,
    configure,
    make_and_install,
    meson_setup,
    ninja_and_install,
)
from pgbenchlab.builds.incremental import DEPEND_OPTION, sync
from pgbenchlab.builds.incremental import persistent_tree as kept_tree
from pgbenchlab.builds.recipe import (
    DEFAULT_BUILD_SYSTEM,
    PROFILING_CFLAGS,
    RECIPE_VERSION,
    BuildRecipe,
    Compiler,
    PatchFile,
    SourceIdentity,
    cache_key,
    layout_cflags,
    version_flags,
    with_cflags,
)
from pgbenchlab.durations import duration_text
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation, inspect_bin_dir
from pgbenchlab.stopsignals import Stopped, StopSignals


def ensure(
    recipe: BuildRecipe,
    progress: Progress | None = None,
    *,
    root: Path | None = None,
    host: Host = LOCAL_HOST,
    incremental: bool = False,
) -> Installation:
    """The installation the recipe gives, built now unless the cache holds it (incremental: in
    the persistent tree of its source and options, see `incremental`)."""
    root = root or cache.cache_root()
    compiler, patches, source, key = identified(recipe, root, host)
    cache.remove_abandoned_staging(root, host)
    final = cache.build_dir(root, key)
    with cache.in_use(root, key):  # held on while the caller's `cache.using` block lasts
        if not cache.is_complete(final):
            with StopSignals(), cache.build_lock(root, key, progress, host):
                if not cache.is_complete(final):
                    build(recipe, source, patches, compiler, key, root, progress, host, incremental)
        return installation(recipe.name, final)


def cached(recipe: BuildRecipe, *, root: Path | None = None) -> Installation | None:
    """The recipe's installation when the cache holds it made; None: making it is left to
    whatever needs it (`ensure`)."""
    root = root or cache.cache_root()
    final = cache.build_dir(root, identified(recipe, root, LOCAL_HOST)[3])
    return installation(recipe.name, final) if cache.is_complete(final) else None


def identified(
    recipe: BuildRecipe, root: Path, host: Host
) -> tuple[Compiler, tuple[PatchFile, ...], SourceIdentity, str]:
    """The recipe's compiler, patches and source pinned down, and its build's cache key (a
    Debian source package is fetched into the cache to be identified)."""
    compiler, patches = check(recipe, host)
    cache.prepare_root(root)
    source = sources.identify(recipe, root, host)
    key = cache_key(
        source, patches, recipe.configure, compiler, recipe.build_system,
        profiling=recipe.profiling, layout=recipe.layout,
    )  # fmt: skip
    return compiler, patches, source, key


BuildsProgress = Callable[[str, str, float], None]  # (build name, phase, elapsed seconds)


def ensure_all(
    recipes: Sequence[BuildRecipe],
    progress: BuildsProgress | None = None,
    *,
    root: Path | None = None,
    host: Host = LOCAL_HOST,
) -> list[Installation]:
    """Every recipe's installation, in order, each built unless the cache holds it; every
    series tried first (`try_patches`)."""
    try_patches(recipes, root or cache.cache_root(), host)
    made = []
    for recipe in recipes:

        def tell(phase: str, elapsed: float, name: str = recipe.name) -> None:
            if progress:
                progress(name, phase, elapsed)

        made.append(ensure(recipe, tell, root=root, host=host))
    return made


def check(recipe: BuildRecipe, host: Host = LOCAL_HOST) -> tuple[Compiler, tuple[PatchFile, ...]]:
    """What building the recipe needs, checked without building or fetching anything: its
    compiler, build system, patch files and source (`sources.check`); BuildError otherwise."""
    compiler = find_compiler(recipe.compiler, host)
    check_build_system(recipe)
    patches = patch_files(recipe)
    sources.check(recipe, host)
    return compiler, patches


def installation(name: str, prefix: Path) -> Installation:
    found = inspect_bin_dir(prefix / "bin", "build")
    if found is None or not found.has_server:
        raise BuildError(f"build {name}: {prefix} holds no usable PostgreSQL server")
    return replace(found, build=name)


def find_compiler(spec: str, host: Host = LOCAL_HOST) -> Compiler:
    path = spec if "/" in spec else shutil.which(spec)
    if not path or not os.access(path, os.X_OK) or Path(path).is_dir():
        raise BuildError(f'compiler "{spec}" not found: install it or give its path')
    done = host.run([path, "--version"], timeout=60)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BuildError(f'compiler "{spec}" does not answer --version')
    return Compiler(path, lines[0].strip())


def check_build_system(recipe: BuildRecipe) -> None:
    if recipe.build_system == "meson" and not (shutil.which("meson") and shutil.which("ninja")):
        raise BuildError(
            f"build {recipe.name}: meson builds need meson and ninja (Debian's meson and "
            "ninja-build; ./lab installs them)"
        )


def patch_files(recipe: BuildRecipe) -> tuple[PatchFile, ...]:
    """The recipe's patches in order, a file holding a series (an mbox) as its patches; a
    prefix build's first ones only."""
    found: list[PatchFile] = []
    for text in recipe.patches:
        path = Path(text)
        if not path.is_file():
            raise BuildError(f"build {recipe.name}: patch {path} does not exist")
        parts = series.file_parts(path)
        found += [
            PatchFile(p.name, str(path), hashlib.sha256(p.text).hexdigest(), p.text) for p in parts
        ] or [PatchFile(path.name, str(path), sources.file_digest(path))]
    return tuple(found[: recipe.patch_limit])


def try_patches(recipes: Sequence[BuildRecipe], root: Path, host: Host = LOCAL_HOST) -> None:
    """Apply each build's patches to a scratch copy of its source, thrown away after: a series
    that does not apply is refused (BuildError naming the patch, file and hunk) before any
    build starts. Builds cached, unpatched, or the first to be made (its own build applies its
    patches before compiling anything) are not tried, nor a prefix of a series tried whole."""
    if not any(r.patches for r in recipes):
        return
    first, waiting = True, []
    for recipe in recipes:
        if not recipe.patches:
            first = first and cached(recipe, root=root) is not None
            continue
        _, patches, source, key = identified(recipe, root, host)
        if cache.is_complete(cache.build_dir(root, key)):
            continue
        if not first:
            waiting.append((recipe, source, patches, key))
        first = False
    for index, (recipe, source, patches, key) in enumerate(waiting):
        later = waiting[index + 1 :]
        if not any(s == source and p[: len(patches)] == patches for _, s, p, _ in later):
            _try(recipe, source, patches, key, root, host)


def _try(
    recipe: BuildRecipe,
    source: SourceIdentity,
    patches: tuple[PatchFile, ...],
    key: str,
    root: Path,
    host: Host,
) -> None:
    work = root / "tmp" / f"{key}.{os.getpid()}"
    with StopSignals(), cache.build_lock(root, key, None, host):
        log = BuildLog(root / "logs" / f"{key}.log", None, host)
        try:
            log.enter(f"trying the patches of {recipe.name} before any build")
            apply_patches(sources.unpack(source, work / "src", root, host), patches, log)
        finally:
            log.close()
            shutil.rmtree(work, ignore_errors=True)


def build(
    recipe: BuildRecipe,
    source: SourceIdentity,
    patches: tuple[PatchFile, ...],
    compiler: Compiler,
    key: str,
    root: Path,
    progress: Progress | None,
    host: Host,
    incremental: bool = False,
) -> None:
    """Build into a private directory and rename the finished installation into place: a
    failed or interrupted build leaves no directory that looks complete, and an interrupted
    one ends every process it started and removes its staging (Stopped, one line)."""
    final = cache.build_dir(root, key)
    work = root / "tmp" / f"{key}.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    log = BuildLog(root / "logs" / f"{key}.log", progress, host)
    try:
        log.enter("fetch")
        tree = sources.unpack(source, work / "src", root, host)
        version = sources.tree_version(tree) or source.version
        options, reasons = version_flags(version, recipe.configure)
        if recipe.profiling:
            options = with_cflags(options, PROFILING_CFLAGS)
        if layout_cflags(recipe.layout):
            options = with_cflags(options, layout_cflags(recipe.layout))
        staging, jobs = work / "dest", host.cpu_count() or 2
        if incremental:
            with kept_tree(root, source, options, compiler, progress, host) as kept:
                log.write(f"persistent tree {kept.path}: {sync(kept.path, tree)} file(s) changed")
                installed = compile_tree(
                    kept.path, kept.prefix, patches, compiler, options, version, staging, log,
                    jobs=jobs, configure_needed=kept.needs_configure(),
                    on_configured=kept.configured,
                )  # fmt: skip
        else:
            installed = compile_tree(
                tree, final, patches, compiler, options, version, staging, log, jobs=jobs,
                build_system=recipe.build_system,
            )  # fmt: skip
        seconds = time.monotonic() - log.started
        log.enter("done")
        log.close()
        os.replace(log.path, installed / cache.BUILD_LOG)
        facts = provenance(recipe, source, patches, compiler, options, reasons, version)
        facts |= {"key": key, "build_seconds": round(seconds, 1), "incremental": incremental}
        facts["size_bytes"] = cache.tree_size(installed)
        cache.write_provenance(installed, facts)
        osuser.open_tree(installed)
        shutil.rmtree(final, ignore_errors=True)  # an incomplete leftover, never a complete one
        installed.rename(final)
    except KeyboardInterrupt:  # SIGTERM or SIGINT (StopSignals): cleaned up as it propagates
        raise Stopped(
            f"build {recipe.name} stopped during {log.phase}: its processes were ended and its "
            "staging directory removed"
        ) from None
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def compile_tree(
    tree: Path,
    prefix: Path,
    patches: tuple[PatchFile, ...],
    compiler: Compiler,
    options: tuple[str, ...],
    version: str,
    staging: Path,
    log: BuildLog,
    *,
    jobs: int,
    build_system: str = DEFAULT_BUILD_SYSTEM,
    configure_needed: bool = True,
    on_configured: Callable[[], None] | None = None,
) -> Path:
    """Patch, configure (when needed; meson always sets up), build and install a tree into
    staging; returns the staged installation's directory."""
    apply_patches(tree, patches, log)
    if build_system == "meson":
        meson_setup(tree, prefix, compiler.path, options, log)
        ninja_and_install(tree, staging, jobs, log)
        return staging / prefix.relative_to(prefix.anchor)
    if configure_needed:
        extra = (DEPEND_OPTION,) if on_configured else ()
        configure(tree, prefix, compiler.path, (*options, *extra), log)
        if on_configured:
            on_configured()
    make_and_install(tree, version, staging, jobs, log)
    return staging / prefix.relative_to(prefix.anchor)


def describe(facts: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A build's provenance as (title, text) pairs for a person: name, source, commit,
    patches, options, compiler and build time (prebuilt binaries: where they came from)."""
    source = facts.get("source") or {}
    if source.get("kind") == "binaries":
        checksum = next(iter((facts.get("checksum") or {"-": "-"}).items()))
        return [
            ("binaries", str(source.get("location", "-"))),
            (f"binaries {checksum[0]}", str(checksum[1])[:16]),
            ("binaries postgres -V", str(facts.get("postgres_version", "-"))),
        ]
    identity = str(source.get("identity", ""))
    ref = f" ({source['ref']})" if source.get("ref") else ""
    commit = f"{identity[:12]}{ref}" if source.get("kind") == "git" else f"sha256 {identity[:12]}"
    patches = [f"{p['name']} ({str(p['sha256'])[:8]})" for p in facts.get("patches", [])]
    compiler = facts.get("compiler") or {}
    seconds = facts.get("build_seconds")
    return [
        ("build", str(facts.get("name") or facts.get("built_as", "-"))),
        (
            "build source",
            f"{source.get('kind')}:{source.get('location')} {facts.get('version', '')}",
        ),
        ("build commit" if source.get("kind") == "git" else "build source digest", commit),
        ("build patches", ", ".join(patches) or "none"),
        ("build system", str(facts.get("build_system", "autoconf"))),
        ("build configure", " ".join(facts.get("configure_applied", [])) or "(defaults)"),
        ("build compiler", str(compiler.get("version", "-"))),
        ("build time", duration_text(seconds) if isinstance(seconds, (int, float)) else "-"),
    ]


def provenance(
    recipe: BuildRecipe,
    source: SourceIdentity,
    patches: tuple[PatchFile, ...],
    compiler: Compiler,
    options: tuple[str, ...],
    reasons: list[str],
    version: str,
) -> dict[str, Any]:
    return {
        "recipe_version": RECIPE_VERSION,
        "built_as": recipe.name,
        "source": source.as_dict(),
        "version": version,
        "patches": [{"name": p.name, "sha256": p.sha256} for p in patches],
        "build_system": recipe.build_system,
        "configure": list(recipe.configure),
        "configure_applied": list(options),
        "profiling": recipe.profiling,
        "version_flags": reasons,
        "compiler": {"path": compiler.path, "version": compiler.version},
        "built_at": time.time(),
    }
