"""What a build is: its recipe as the plan gives it, its source's identity, the cache key, and
the flags old majors need (applied automatically and recorded)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Raised whenever what a recipe produces changes (steps, targets, version flags): every
# cached build is then rebuilt once.
RECIPE_VERSION = 1
SOURCE_KINDS = ("debian", "git", "tar", "dir")
DEFAULT_COMPILER = "gcc"
BUILD_SYSTEMS = ("autoconf", "meson")  # meson: trees that have meson.build (16 and later)
DEFAULT_BUILD_SYSTEM = "autoconf"


# The installation's directories: pgbenchlab sets the prefix (the cache directory) and keeps the
# standard layout under it, which PostgreSQL needs to find its files relative to its binaries.
# These are autoconf's names; meson's built-in options have the same ones (-Dprefix, --prefix).
DIRECTORY_OPTIONS = frozenset((
    "prefix", "exec-prefix", "bindir", "sbindir", "libexecdir", "sysconfdir", "sharedstatedir",
    "localstatedir", "runstatedir", "libdir", "includedir", "oldincludedir", "datarootdir",
    "datadir", "infodir", "localedir", "mandir", "docdir", "htmldir", "dvidir", "pdfdir", "psdir",
))  # fmt: skip


def refused_option(options: Sequence[str]) -> tuple[str, str] | None:
    """The first configure (or meson) option pgbenchlab sets itself, as written (a meson "-D"
    or "--prefix" followed by its value counts as one), and why; None when there is none."""
    for index, option in enumerate(options):
        written = option
        if option in ("-D", *(f"--{name}" for name in DIRECTORY_OPTIONS)):
            written = " ".join(options[index : index + 2]) if option == "-D" else option
        name = written.removeprefix("-D").strip().lstrip("-").split("=", 1)[0]
        if name in DIRECTORY_OPTIONS or name.replace("_", "-") in DIRECTORY_OPTIONS:
            return written, "pgbenchlab sets the installation directories (in its build cache)"
        if name == "CC":
            return written, "pgbenchlab sets CC from the build's compiler (compiler = ...)"
    return None


@dataclass(frozen=True)
class BuildRecipe:
    """A named build: where the source comes from, its patches in order, configure options
    and the compiler. Paths are absolute (the plan resolves them against its directory)."""

    name: str
    source: str  # "debian:postgresql-13", "git:/src/postgresql", "tar:/x.tar.bz2", "dir:/x"
    ref: str | None = None  # git only: a commit, tag or branch
    configure: tuple[str, ...] = ()
    compiler: str = DEFAULT_COMPILER  # gcc, clang or a path
    patches: tuple[str, ...] = ()
    based_on: str | None = None  # the build it came "from" (same source and options)
    profiling: bool = False  # the plan profiles it: frame pointers and debug info added
    build_system: str = DEFAULT_BUILD_SYSTEM  # "autoconf" (./configure, make) or "meson"
    # A prefix of a series (`prefixes = true`): only the first N of the patches (a file holding
    # several counts each); None: every patch.
    patch_limit: int | None = None
    rebuild: int = 1  # the plan's `rebuild = N`: built N times, each copy laid out differently
    layout: int = 0  # which copy this is (`layout_cflags`); 0 or 1: laid out as it comes

    @property
    def kind(self) -> str:
        return split_source(self.source)[0]

    @property
    def location(self) -> str:
        return split_source(self.source)[1]


def split_source(source: str) -> tuple[str, str]:
    """("git", "/src/postgresql") from "git:/src/postgresql"; ValueError naming the forms."""
    kind, sep, location = source.partition(":")
    if not sep or kind not in SOURCE_KINDS or not location.strip():
        raise ValueError(
            f'source "{source}" is not one of debian:PACKAGE, git:PATH, tar:PATH or dir:PATH'
        )
    if kind == "debian" and not re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", location):
        raise ValueError(f'"{location}" is not a Debian source package name')
    return kind, location


@dataclass(frozen=True)
class SourceIdentity:
    """A source pinned down: what makes two builds of it the same."""

    kind: str
    location: str
    identity: str  # git commit, or sha256 of the tarball or directory contents
    version: str  # PostgreSQL's version as the tree gives it, when known before building
    ref: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "location": self.location,
            "ref": self.ref,
            "identity": self.identity,
            "version": self.version,
        }


@dataclass(frozen=True)
class PatchFile:
    """A patch as applied: a file, or one patch of a file holding a series (an mbox), whose
    text is then ``content`` and its name the attachment's or the message's subject."""

    name: str
    path: str
    sha256: str
    content: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Compiler:
    path: str
    version: str  # the first line of `--version`


def cache_key(
    source: SourceIdentity,
    patches: tuple[PatchFile, ...],
    configure: tuple[str, ...],
    compiler: Compiler,
    build_system: str = DEFAULT_BUILD_SYSTEM,
    *,
    profiling: bool = False,
    layout: int = 0,
) -> str:
    """The build's address in the cache: everything that changes what is built, and nothing
    else (a patch's or the source's path does not count, their contents do)."""
    identity: dict[str, object] = {
        "recipe": RECIPE_VERSION,
        "source": [source.kind, source.identity],
        "patches": [p.sha256 for p in patches],
        "configure": list(configure),
        "compiler": [compiler.version],
    }
    if profiling:  # absent otherwise, so the keys of builds made before stay theirs
        identity["profiling"] = list(PROFILING_CFLAGS)
    if build_system != DEFAULT_BUILD_SYSTEM:  # autoconf keys stay those cached before meson
        identity["build_system"] = build_system
    if layout_cflags(layout):  # the first copy of a rebuild is the plain build, cached once
        identity["layout"] = list(layout_cflags(layout))
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class VersionRecipe:
    """Flags a range of majors needs with today's compilers, and why."""

    below: tuple[int, int]  # applies to versions older than this (major, minor-major)
    cflags: tuple[str, ...]
    configure: tuple[str, ...]
    why: str


# Checked in order; every matching entry applies. Majors are (major, 0) from 10 on and
# (9, 6) style before.
VERSION_RECIPES = (
    VersionRecipe(
        (9, 5),
        ("-std=gnu99", "-fcommon"),
        (),
        "before 9.5 the tree relies on C89/gnu89 idioms and on common symbols (gcc ≥ 10 "
        "defaults to -fno-common)",
    ),
    VersionRecipe(
        (12, 0),
        (
            "-fno-strict-aliasing",
            "-Wno-error=implicit-function-declaration",
            "-Wno-error=incompatible-pointer-types",
            "-Wno-error=int-conversion",
        ),
        (),
        "before 12 some configure probes and sources trip gcc ≥ 14's new default errors",
    ),
)
DEFAULT_CFLAGS = "-O2"
# Whole stacks and named functions in CPU profiles (recorded in provenance, part of the key).
PROFILING_CFLAGS = ("-fno-omit-frame-pointer", "-g")


def layout_cflags(layout: int) -> tuple[str, ...]:
    """The flags of copy ``layout`` of a rebuilt build (`rebuild = N`). Copy 1 is the build as
    it comes (its cache entry is the plain build's); copy k aligns every function to 8·2^k
    bytes (32, 64, 128) instead of the compiler's 16: each function starts at another address,
    so the hot code falls on other cache lines and pages, while the instructions executed stay
    the same (the padding lies between functions)."""
    return (f"-falign-functions={8 << layout}",) if layout > 1 else ()


def version_key(version: str) -> tuple[int, int]:
    """(9, 6) for 9.6.24, (13, 0) for 13.16, (18, 0) for 18devel; (0, 0) when unknown."""
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]]
    if not numbers:
        return (0, 0)
    if numbers[0] >= 10:
        return (numbers[0], 0)
    return (numbers[0], numbers[1] if len(numbers) > 1 else 0)


def version_flags(version: str, configure: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """The configure arguments with the flags version needs added, and the reasons applied.

    The flags go into CFLAGS (the user's, or -O2, which configure would otherwise choose)."""
    key = version_key(version)
    wanted = [r for r in VERSION_RECIPES if key != (0, 0) and key < r.below]
    if not wanted:
        return configure, []
    extra_cflags = [flag for r in wanted for flag in r.cflags]
    extra_options = [option for r in wanted for option in r.configure]
    args = list(with_cflags(configure, extra_cflags))
    args += [o for o in extra_options if o not in args]
    return tuple(args), [r.why for r in wanted]


def with_cflags(configure: tuple[str, ...], flags: Sequence[str]) -> tuple[str, ...]:
    """The configure arguments with flags added to CFLAGS (the user's, or -O2, which
    configure would otherwise choose)."""
    args = list(configure)
    index = next((i for i, a in enumerate(args) if a.startswith("CFLAGS=")), None)
    if index is None:
        args.append("CFLAGS=" + " ".join([DEFAULT_CFLAGS, *flags]))
    else:
        args[index] = " ".join([args[index], *flags])
    return tuple(args)


def pgbench_dir(version: str) -> str:
    """Where pgbench lives in the tree: a contrib module before 9.5."""
    return "contrib/pgbench" if (0, 0) < version_key(version) < (9, 5) else "src/bin/pgbench"
