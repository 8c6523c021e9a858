"""A build's source: pinned down (`identify`, cheap, before the cache is asked) and unpacked
into a fresh tree (`unpack`). A git checkout is read with `git archive`, never modified.

Debian source packages come from Debian's archive through an apt configuration of our own
(its sources list, lists and cache under the build cache), so the system's apt is untouched;
the downloaded files are kept, so a package is fetched once.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from pgbenchlab.builds.cache import build_lock, prepare_root
from pgbenchlab.builds.recipe import BuildRecipe, SourceIdentity
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST, Host

DEBIAN_SUITES = ("bullseye", "bookworm", "trixie", "sid")  # PostgreSQL 13, 15, 17, 18
DEFAULT_MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
VERSION_IN_CONFIGURE = re.compile(r"^PACKAGE_VERSION='([^']+)'", re.M)
_VERSION_IN_MESON = re.compile(r"version\s*:\s*'([^']+)'")
_VERSION_IN_NAME = re.compile(r"postgresql-(\d+(?:\.\d+)*(?:devel|beta\d+|rc\d+)?)")


def check(recipe: BuildRecipe, host: Host = LOCAL_HOST) -> None:
    """BuildError unless the recipe's source is there: a git repository where the ref names a
    commit, a tarball file, a directory holding a source tree. Nothing is read whole or
    fetched (a Debian package is looked up when it is fetched)."""
    kind, path = recipe.kind, Path(recipe.location)
    if kind == "debian":
        return
    problem = None
    if not path.exists():
        problem = "does not exist"
    elif kind == "git":
        resolve_ref(path, recipe.ref or "HEAD", host)
    elif kind == "tar" and not path.is_file():
        problem = "is not a file"
    elif kind == "dir" and not any((path / n).is_file() for n in ("configure", "meson.build")):
        problem = "holds no PostgreSQL source tree"
    if problem:
        raise BuildError(
            f"source {recipe.source}: {path} {problem}: correct the source of [build.{recipe.name}]"
        )


def identify(recipe: BuildRecipe, root: Path, host: Host = LOCAL_HOST) -> SourceIdentity:
    """The recipe's source pinned down (a commit or a content digest); BuildError when it
    does not exist or the ref names nothing (`check`)."""
    check(recipe, host)
    kind, location = recipe.kind, recipe.location
    if kind == "debian":
        tarball = debian_tarball(location, root, host)
        version = tarball.name.split("_")[-1].split(".orig")[0]  # postgresql-13_13.16.orig…
        return SourceIdentity(kind, location, file_digest(tarball), version)
    path = Path(location)
    if kind == "git":
        ref = recipe.ref or "HEAD"
        commit = resolve_ref(path, ref, host)
        return SourceIdentity(kind, location, commit, git_version(path, commit, host), ref)
    if kind == "tar":
        found = _VERSION_IN_NAME.search(path.name)
        return SourceIdentity(kind, location, file_digest(path), found[1] if found else "")
    return SourceIdentity(kind, location, tree_digest(path), tree_version(path))


def unpack(source: SourceIdentity, into: Path, root: Path, host: Host = LOCAL_HOST) -> Path:
    """A fresh copy of the source tree under into; returns the tree's top directory."""
    into.mkdir(parents=True, exist_ok=True)
    if source.kind == "dir":
        tree = into / "src"
        shutil.copytree(source.location, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return tree
    if source.kind == "git":
        archive = into / "source.tar"
        _check(
            host,
            [
                "git",
                "-C",
                source.location,
                "archive",
                f"--output={archive}",
                "--prefix=src/",
                source.identity,
            ],
            "git archive",
        )
    else:
        archive = (
            Path(source.location)
            if source.kind == "tar"
            else debian_tarball(source.location, root, host)
        )
    _check(host, ["tar", "-xf", str(archive), "-C", str(into)], f"unpacking {archive.name}")
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildError(f"{archive}: expected one top directory in the archive, found {len(tops)}")
    return tops[0]


def resolve_ref(repo: Path, ref: str, host: Host = LOCAL_HOST) -> str:
    inside = host.run(["git", "-C", str(repo), "rev-parse", "--git-dir"], timeout=30)
    if inside.returncode != 0:
        raise BuildError(f"source git:{repo}: not a git repository")
    found = host.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        timeout=30,
    )
    if found.returncode != 0 or not found.stdout.strip():
        raise BuildError(f'source git:{repo}: ref "{ref}" is not a commit, tag or branch there')
    return found.stdout.strip()


def git_version(repo: Path, commit: str, host: Host = LOCAL_HOST) -> str:
    for name, pattern in (("configure", VERSION_IN_CONFIGURE), ("meson.build", _VERSION_IN_MESON)):
        shown = host.run(["git", "-C", str(repo), "show", f"{commit}:{name}"], timeout=30)
        if shown.returncode == 0 and (found := pattern.search(shown.stdout)):
            return found[1]
    return ""


def tree_version(tree: Path) -> str:
    """PostgreSQL's version as an unpacked tree states it ("" when it does not)."""
    for name, pattern in (("configure", VERSION_IN_CONFIGURE), ("meson.build", _VERSION_IN_MESON)):
        path = tree / name
        if path.is_file() and (found := pattern.search(path.read_text(errors="replace"))):
            return found[1]
    return ""


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def tree_digest(tree: Path) -> str:
    """The digest of a directory's files (names and contents; .git left out)."""
    digest = hashlib.sha256()
    for directory, dirs, names in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(names):
            path = Path(directory, name)
            digest.update(str(path.relative_to(tree)).encode() + b"\0")
            digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
    return digest.hexdigest()


# -- Debian source packages -------------------------------------------------------------------


def debian_tarball(package: str, root: Path, host: Host = LOCAL_HOST) -> Path:
    """The upstream tarball (`.orig.tar.*`) of a Debian source package, downloaded once (a
    second campaign fetching the same package waits for the first, then finds it)."""
    found = fetched_tarball(package, root)
    if found is not None:
        return found
    prepare_root(root)
    with build_lock(root, f"debian-{package}", None, host):
        return fetched_tarball(package, root) or _download_tarball(package, root, host)


def _download_tarball(package: str, root: Path, host: Host) -> Path:
    where = root / "sources" / "debian" / package
    staging = where.with_name(f".{package}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    options = apt_options(root, host)
    got = host.run(
        ["apt-get", *options, "source", "--download-only", package], cwd=staging, timeout=1800
    )
    if got.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(
            f"source debian:{package}: apt-get source failed: {_apt_error(got.stderr)}"
        )
    shutil.rmtree(where, ignore_errors=True)
    staging.rename(where)
    tarballs = sorted(where.glob("*.orig.tar.*"))
    if not tarballs:
        raise BuildError(f"source debian:{package}: the package has no upstream tarball")
    return tarballs[-1]


def fetched_tarball(package: str, root: Path) -> Path | None:
    """The upstream tarball of a Debian source package when it was fetched before."""
    where = root / "sources" / "debian" / package
    found = sorted(where.glob("*.orig.tar.*")) if where.is_dir() else []
    return found[-1] if found else None


def apt_options(root: Path, host: Host = LOCAL_HOST) -> list[str]:
    """apt-get options for our own configuration, its package lists updated once (under a
    lock: apt refuses a second update of the same lists meanwhile)."""
    apt = root / "apt"
    sources = apt / "sources.list"
    options = [
        f"-oDir::Etc::SourceList={sources}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt / 'lists'}",
        f"-oDir::Cache={apt / 'cache'}",
    ]
    if os.geteuid() == 0:  # our files are root's: apt's download user could not write them
        options.append("-oAPT::Sandbox::User=root")
    if (apt / "updated").is_file():
        return options
    prepare_root(root)
    with build_lock(root, "apt-lists", None, host):
        if not (apt / "updated").is_file():
            _update_lists(apt, options, host)
    return options


def _update_lists(apt: Path, options: list[str], host: Host) -> None:
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    mirror = system_mirror()
    (apt / "sources.list").write_text(
        "".join(f"deb-src [signed-by={KEYRING}] {mirror} {s} main\n" for s in DEBIAN_SUITES)
    )
    updated = host.run(["apt-get", *options, "update"], timeout=1800)
    if updated.returncode != 0 or "\nE: " in f"\n{updated.stderr}":
        raise BuildError(f"apt-get update for Debian sources failed: {_apt_error(updated.stderr)}")
    (apt / "updated").write_text("")


def system_mirror() -> str:
    """The Debian mirror this machine's apt uses (its main archive, not security)."""
    texts: list[str] = []
    for place in APT_SOURCES:
        files = sorted(place.glob("*")) if place.is_dir() else [place]
        texts += [f.read_text(errors="replace") for f in files if f.is_file()]
    for text in texts:
        uris: list[str] = re.findall(r"(?:^URIs:|^deb)\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M)
        for uri in uris:
            if uri.rstrip("/").endswith("/debian"):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _apt_error(stderr: str) -> str:
    errors = [line[3:] for line in stderr.splitlines() if line.startswith("E: ")]
    return errors[0] if errors else (stderr.strip().splitlines() or ["no output"])[-1]


def _check(host: Host, argv: list[str], what: str) -> None:
    done = host.run(argv, timeout=1800)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"{what} failed: {reason}")
