"""What a study template is computed from: this machine's CPUs, memory, free disk, the
PostgreSQL installations and builds available, and whether pgbenchlab runs as root. A frozen
record, so templates are pure functions of it and tests give the facts they want; `gather`
reads the real ones."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import builds, installs
from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.installs import Installation
from pgbenchlab.invocation.command import supports_tls
from pgbenchlab.server.settings import settings_problem
from pgbenchlab.telemetry.machine import memory_bytes

GIB = 1024**3
DEFAULT_MEMORY = 4 * GIB  # when /proc/meminfo cannot be read


@dataclass(frozen=True)
class InstallFact:
    """An installation a server may use: the name a plan's `install` gives, its major, and
    whether it can serve connection = "tls" (its server and its pgbench built with TLS)."""

    name: str
    major: str  # "15", "9.6"
    tls: bool = False


@dataclass(frozen=True)
class BuildFact:
    """A build in the build cache that a plan can ask for again by its source (Debian)."""

    source: str
    major: str
    configure: tuple[str, ...] = ()


@dataclass(frozen=True)
class MachineFacts:
    cpus: int
    memory_bytes: int
    # free disk for each data directory: where they go (the results directory by default); with
    # several, the least any one has (those on one file system share its free space)
    disk_free_bytes: int
    installs: tuple[InstallFact, ...]  # servers, newest first
    builds: tuple[BuildFact, ...] = ()
    root: bool = False  # pgbenchlab may write kernel tunables ([matrix.sysctl])

    @property
    def newest(self) -> InstallFact:
        return self.installs[0] if self.installs else InstallFact("embedded", "18")

    @property
    def newest_with_tls(self) -> InstallFact | None:
        return next((i for i in self.installs if i.tls), None)


def gather(data_paths: Sequence[Path]) -> MachineFacts:
    """The facts of this machine; free disk measured at each data path or its nearest
    parent."""
    found = installs.discover()
    servers = [i for i in found if i.has_server and not i.build]
    per_major: dict[str, InstallFact] = {}
    for install in servers:  # newest first: the first of a major is kept
        major = install.version.major_text
        if major not in per_major:
            per_major[major] = InstallFact(install.name, major, _has_tls(install))
    return MachineFacts(
        cpus=LOCAL_HOST.cpu_count() or 1,
        memory_bytes=memory_bytes() or DEFAULT_MEMORY,
        disk_free_bytes=free_per_directory(data_paths),
        installs=tuple(per_major.values()),
        builds=_cached_debian_builds(set(per_major)),
        root=os.geteuid() == 0,
    )


def _has_tls(install: Installation) -> bool:
    """Whether its server accepts ssl = on (what the campaign checks before a TLS run: a build
    without OpenSSL refuses it) and its pgbench's libpq has TLS: ~20 ms."""
    if settings_problem(install, {"ssl": "on"}) is not None:
        return False
    return install.has_pgbench and supports_tls(install.binary("pgbench"))


def free_per_directory(paths: Sequence[Path]) -> int:
    """The free disk each of the data directories can count on: its file system's free space
    shared among the directories on it, the least of these."""
    places = [_existing(p) for p in paths]
    on_device: dict[int, list[Path]] = {}
    for place in places:
        on_device.setdefault(place.stat().st_dev, []).append(place)
    return min(shutil.disk_usage(same[0]).free // len(same) for same in on_device.values())


def _existing(path: Path) -> Path:
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


def _cached_debian_builds(installed: set[str]) -> tuple[BuildFact, ...]:
    """Unpatched Debian-sourced builds of majors not installed: a plan names them by source
    again (the same source and options give the same cache key, so nothing is rebuilt)."""
    found: dict[str, BuildFact] = {}
    for cached in builds.cached_builds(builds.cache_root()):
        facts = cached.provenance
        source = facts.get("source", {})
        major = _major(str(facts.get("version", "")))
        if source.get("kind") != "debian" or facts.get("patches") or major in installed:
            continue
        configure = tuple(str(o) for o in facts.get("configure", []))
        found.setdefault(major, BuildFact(f"debian:{source.get('location')}", major, configure))
    return tuple(found.values())


def _major(version: str) -> str:
    """ "13.16" → "13", "9.6.24" → "9.6"."""
    parts = version.split(".")
    return ".".join(parts[:2]) if parts[0] == "9" else parts[0]
