"""A build's configure options checked against what its source's `configure --help` lists,
before anything is built: an option a major's configure does not know (`--with-ssl=openssl`
before 14, `--with-openssl` after 17) is a one-line refusal naming the option and the major,
rather than a configure that fails minutes into `run`.

Only what can be read without fetching anything is checked: a git commit's `configure`, a
directory's, a tarball's (and a Debian source package's once fetched). Each source's help is
cached under the build cache by the source's identity, so a plan check reads a tarball once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path

from pgbenchlab.builds import sources
from pgbenchlab.builds.recipe import BuildRecipe, version_key
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST

HELP_DIR = "configure-help"
# autoconf's feature and package options: --with-X and --without-X name one package,
# --enable-X and --disable-X one feature; other arguments (VAR=value, --host) are configure's.
_FEATURE = re.compile(r"--(with|without|enable|disable)-([a-z0-9][a-z0-9-]*)")
_KIND = {"with": "with", "without": "with", "enable": "enable", "disable": "enable"}
_UNIQUE_FILE = re.compile(r"^ac_unique_file=\"([\w./-]+)\"", re.M)
Reader = Callable[[], str | None]  # the `configure` script's text, None when unreadable


def check_configure_options(recipe: BuildRecipe, root: Path) -> bool:
    """BuildError naming every configure option the recipe's source does not list; False
    when its configure cannot be read yet (a Debian package not fetched, a tree without one):
    configure itself judges the options when the build is made."""
    asked = [option for option in recipe.configure if _feature(option)]
    if recipe.build_system != "autoconf" or not asked:
        return True
    known = configure_help(recipe, root)
    if known is None:
        return False
    version, text = known
    listed = {_feature(found[0]) for found in _FEATURE.finditer(text)}
    unknown = [option.split("=")[0] for option in asked if _feature(option) not in listed]
    if unknown:
        raise BuildError(
            f"build {recipe.name}: configure of PostgreSQL {major_of(version)} ({version}) "
            f"does not know {', '.join(unknown)}: remove {'it' if len(unknown) == 1 else 'them'} "
            f"from [build.{recipe.name}] configure (its `configure --help` lists the options "
            "that major takes)"
        )
    return True


def major_of(version: str) -> str:
    """ "9.6" for 9.6.24, "13" for 13.16 (the version itself when unknown)."""
    key = version_key(version)
    if key == (0, 0):
        return version or "of unknown version"
    return f"{key[0]}.{key[1]}" if key[0] < 10 else str(key[0])


def _feature(option: str) -> tuple[str, str] | None:
    """("with", "openssl") for --with-openssl and --without-openssl=…; None for the rest
    (configure takes "_" for "-" in a name)."""
    found = _FEATURE.fullmatch(option.split("=")[0].replace("_", "-"))
    return None if found is None else (_KIND[found[1]], found[2])


def configure_help(recipe: BuildRecipe, root: Path) -> tuple[str, str] | None:
    """The source's version and `configure --help`, cached by the source's identity; None
    when its configure cannot be read without fetching or building anything."""
    located = _configure_source(recipe, root)
    if located is None:
        return None
    identity, read = located
    cached = root / HELP_DIR / f"{identity}.json"
    if cached.is_file():
        stored = json.loads(cached.read_text())
        return str(stored["version"]), str(stored["help"])
    text = read()
    if text is None:
        return None
    found = sources.VERSION_IN_CONFIGURE.search(text)
    version = found[1] if found else ""
    shown = _run_help(text)
    with suppress(OSError):  # a cache it cannot write: read again next time
        cached.parent.mkdir(parents=True, exist_ok=True)
        staged = cached.with_name(f".{cached.name}.{os.getpid()}")
        staged.write_text(json.dumps({"version": version, "help": shown}))
        staged.replace(cached)
    return version, shown


def _configure_source(recipe: BuildRecipe, root: Path) -> tuple[str, Reader] | None:
    """The identity the help is cached by and how to read the `configure` script."""
    kind, location = recipe.kind, Path(recipe.location)
    if kind == "git":
        commit = sources.resolve_ref(location, recipe.ref or "HEAD")
        return f"git-{commit}", partial(_git_configure, location, commit)
    if kind == "dir":
        script = location / "configure"
        if not script.is_file():
            return None
        text = script.read_text(errors="replace")
        return f"dir-{hashlib.sha256(text.encode()).hexdigest()}", lambda: text
    tarball = sources.fetched_tarball(recipe.location, root) if kind == "debian" else location
    if tarball is None:
        return None
    return f"tar-{sources.file_digest(tarball)}", partial(_tar_configure, tarball)


def _git_configure(repo: Path, commit: str) -> str | None:
    shown = LOCAL_HOST.run(["git", "-C", str(repo), "show", f"{commit}:configure"], timeout=60)
    return shown.stdout if shown.returncode == 0 else None


def _tar_configure(tarball: Path) -> str | None:
    """The top directory's `configure` of a tarball (decompressed once: the help is cached)."""
    argv = ["tar", "-xOf", str(tarball), "--wildcards", "--no-wildcards-match-slash"]
    shown = LOCAL_HOST.run([*argv, "--occurrence=1", "*/configure"], timeout=300)
    return shown.stdout if shown.returncode == 0 and shown.stdout else None


def _run_help(text: str) -> str:
    """`configure --help` run alone: autoconf looks for its source tree first (a file it names,
    `ac_unique_file`), so an empty one stands beside it."""
    with tempfile.TemporaryDirectory(prefix="pgbenchlab-configure-") as scratch:
        script = Path(scratch) / "configure"
        script.write_text(text)
        unique = _UNIQUE_FILE.search(text)
        if unique and ".." not in Path(unique[1]).parts:
            marker = Path(scratch) / unique[1]
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        shown = LOCAL_HOST.run(["sh", str(script), "--help"], cwd=scratch, timeout=60)
    if shown.returncode != 0:
        reason = (shown.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"configure --help failed: {reason}")
    return shown.stdout
