"""Prebuilt server binaries as an install source: the newest release matching a spec, read from a
real maven-metadata.xml (golden); the plan's `install = { binaries = … }`; a download checked
against the repository's checksum before anything is unpacked (a corrupted jar never is),
unpacked into the build cache with its provenance and used offline once cached; an unreachable
repository with nothing cached stops the campaign with one line, exit 2, before anything starts.

The download tests serve a repository of their own on loopback (PGBENCHLAB_BINARIES_REPOSITORY)
holding the real 9.6.24 jar, fetched once into the suite's shared cache like its builds.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import shutil
import socket
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ci_guard
import pg_builds
from cli_process import run_cli
from pgbenchlab import plan
from pgbenchlab.builds import cache, cached_builds, prebuilt
from pgbenchlab.errors import InstallError, PlanError

GOLDEN = Path(__file__).parent / "golden" / "maven-metadata-linux-amd64.xml"
RELEASE = "9.6.24"
ARTIFACT = prebuilt.ARTIFACTS["x86_64"]


def golden_versions() -> list[str]:
    return prebuilt.metadata_versions(GOLDEN.read_text())


@pytest.mark.parametrize(
    ("spec", "newest"),
    [
        ("9.6", "9.6.24"),
        ("9.6.10", "9.6.10"),
        ("10", "10.23.0"),
        ("10.5", "10.5.0-1"),  # a republished build of a release counts after it
        ("10.5.0", "10.5.0"),
        ("11", "11.22.1"),
        ("11.22", "11.22.1"),
        ("12", "12.22.0"),
        ("12.22", "12.22.0"),
        ("18", "18.6.0"),
        ("12.99", None),
        ("19", None),
    ],
)
def test_the_newest_release_matching_a_spec(spec: str, newest: str | None) -> None:
    assert prebuilt.newest_matching(spec, golden_versions()) == newest


def test_a_major_never_matches_a_longer_major_or_a_release_of_another() -> None:
    versions = golden_versions()
    assert all(v.startswith("12.") for v in versions if prebuilt.matches("12", v))
    assert not prebuilt.matches("1", "12.22.0")
    assert not prebuilt.matches("9.6.2", "9.6.24")
    assert prebuilt.postgres_version("9.6.24") == "9.6.24"
    assert prebuilt.postgres_version("10.5.0-1") == "10.5"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("9", "not a PostgreSQL version"),
        ("twelve", "not a PostgreSQL version"),
        ("12.", "not a PostgreSQL version"),
        ("9.5", "start at PostgreSQL 9.6"),
        ("8.4.22", "start at PostgreSQL 9.6"),
    ],
)
def test_a_spec_that_names_no_release_is_refused(spec: str, says: str) -> None:
    assert says in str(prebuilt.check_spec(spec))


def test_a_spec_that_names_a_major_or_a_release_is_taken() -> None:
    assert all(prebuilt.check_spec(s) is None for s in ("9.6", "9.6.24", "10", "12.22", "18"))


PLAN = """
[[server]]
name = "old"
install = {install}
[[server]]
name = "again"
install = {{ binaries = "9.6" }}
[matrix]
scale = [1]
clients = [1]
"""


def test_the_plan_names_binaries_once_each(tmp_path: Path) -> None:
    parsed = plan.parse(PLAN.format(install='{ binaries = "12" }'), "p.toml", base=tmp_path)
    assert [s.install for s in parsed.servers] == ["binaries:12", "binaries:9.6"]
    assert parsed.needed_binaries == ("12", "9.6")
    assert parsed.needed_builds == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (PLAN.format(install='{ binaries = "9.4" }'), "server[0].install.binaries: prebuilt"),
        (PLAN.format(install="{ binaries = 12 }"), 'must be a string, { build = "NAME" }'),
        (
            PLAN.format(install='{ binaries = "12" }') + '[pgbench]\ninstall = { binaries = "12" }',
            "pgbench.install: prebuilt binaries have no pgbench",
        ),
    ],
)
def test_a_plan_with_binaries_it_cannot_have_is_refused_in_one_line(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(PlanError) as refused:
        plan.parse(text, "p.toml", base=tmp_path)
    assert says in str(refused.value) and "\n" not in str(refused.value)


# -- downloads from a repository of the tests' own ------------------------------------------------


@pytest.fixture(scope="module")
def real_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published 9.6.24 jar and its sha256, fetched once into the suite's shared cache."""
    folder = pg_builds.cache_root(tmp_path_factory) / "binaries-jars"
    jar = folder / f"{ARTIFACT}-{RELEASE}.jar"
    if not jar.is_file():
        url = prebuilt.Coordinates(prebuilt.DEFAULT_REPOSITORY, ARTIFACT, RELEASE).jar_url
        try:
            body, digest = prebuilt.fetch(url), prebuilt.fetch(f"{url}.sha256")
        except OSError as exc:
            if ci_guard.under_ci():
                raise
            pytest.skip(f"the repository cannot be reached ({exc}): download tests NOT run")
        folder.mkdir(parents=True, exist_ok=True)
        Path(f"{jar}.sha256").write_bytes(digest)
        staged = jar.with_suffix(f".{os.getpid()}")
        staged.write_bytes(body)
        staged.rename(jar)
    return jar


def repository_of(root: Path, jar: Path, *, corrupt: bool = False) -> Path:
    """A Maven layout under root publishing the jar (a byte flipped when corrupt), with the
    repository's own sha256 of the intact jar beside it."""
    base = root / prebuilt.GROUP.replace(".", "/") / ARTIFACT
    (base / RELEASE).mkdir(parents=True)
    versions = "".join(f"<version>{v}</version>" for v in ("9.6.10", RELEASE))
    metadata = f"<metadata><versioning><versions>{versions}</versions></versioning></metadata>"
    (base / "maven-metadata.xml").write_text(metadata)
    published = base / RELEASE / jar.name
    shutil.copyfile(jar, published)
    shutil.copyfile(f"{jar}.sha256", f"{published}.sha256")
    if corrupt:
        data = bytearray(published.read_bytes())
        data[len(data) // 2] ^= 0xFF
        published.write_bytes(bytes(data))
    return root


Serve = Callable[[Path], str]


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Serve]:
    """serve(directory): an HTTP server on loopback for the directory, made the repository."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(directory: Path) -> str:
        handler = functools.partial(QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv(prebuilt.REPOSITORY_ENV, url)
        return url

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_jar_whose_checksum_differs_is_never_unpacked(
    real_jar: Path, serve: Serve, tmp_path: Path
) -> None:
    serve(repository_of(tmp_path / "repo", real_jar, corrupt=True))
    root = tmp_path / "cache"
    with pytest.raises(InstallError) as refused:
        prebuilt.ensure("9.6", root)
    assert "sha256 of the download is" in str(refused.value)
    assert "nothing was unpacked" in str(refused.value)
    assert not cached_builds(root)
    assert not list((root / "builds").iterdir()) and not list((root / "tmp").iterdir())


def test_a_download_is_unpacked_with_its_provenance_then_used_offline(
    real_jar: Path, serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = serve(repository_of(tmp_path / "repo", real_jar))
    root = tmp_path / "cache"
    install = prebuilt.ensure("9.6", root)
    assert install.version.text == RELEASE and install.has_server and not install.has_pgbench
    assert install.binaries == "9.6" and install.name == "binaries-9.6.24"
    [cached] = cached_builds(root)
    assert install.bin_dir == cached.path / "bin"
    facts = cached.provenance
    assert facts["source"]["location"] == f"{prebuilt.GROUP}:{ARTIFACT}:{RELEASE}"
    assert facts["source"]["url"].startswith(url)
    assert facts["checksum"] == {"sha256": Path(f"{real_jar}.sha256").read_text().split()[0]}
    assert facts["postgres_version"] == f"postgres (PostgreSQL) {RELEASE}"
    assert (cached.path / "share/postgresql/extension/pg_stat_statements.control").is_file()
    monkeypatch.setenv(prebuilt.REPOSITORY_ENV, f"http://127.0.0.1:{closed_port()}")
    assert prebuilt.ensure("9.6", root).bin_dir == install.bin_dir  # offline: the cached one
    assert prebuilt.ensure(RELEASE, root).bin_dir == install.bin_dir
    with pytest.raises(InstallError, match="no matching release is cached"):
        prebuilt.ensure("9.6.10", root)
    with cache.using():  # as a command holds what it runs
        prebuilt.ensure(RELEASE, root)
        assert cache.prune(root, keep=set()).in_use == [cached]  # never pruned while in use
    assert cache.prune(root, keep=set()).removed == [cached]  # `builds --prune` removes it


def test_an_unreachable_repository_stops_the_campaign_before_anything_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / "plan.toml").write_text(PLAN.format(install='{ binaries = "11" }'))
    env = {
        **os.environ,
        prebuilt.REPOSITORY_ENV: f"http://127.0.0.1:{closed_port()}",
        "PGBENCHLAB_BUILD_CACHE": str(tmp_path / "empty-cache"),
    }
    results = tmp_path / "results"
    done = run_cli("run", tmp_path / "plan.toml", "--results", results, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert 'binaries "11": the repository http://127.0.0.1:' in line
    assert "cannot be reached" in line and "no matching release is cached" in line
    assert not results.exists()


def jar_holding(path: Path, *members: tarfile.TarInfo) -> Path:
    """A jar whose .txz holds these members (regular files get a few bytes)."""
    txz = io.BytesIO()
    with tarfile.open(fileobj=txz, mode="w:xz") as tar:
        for member in members:
            body = b"x" if member.isfile() else b""
            member.size = len(body)
            tar.addfile(member, io.BytesIO(body))
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("postgres-linux-x86_64.txz", txz.getvalue())
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, target, 0o755
    return info


@pytest.mark.parametrize(
    "escaping",
    [
        member("../outside"),
        member("/tmp/absolute"),
        member("lib/escape", tarfile.SYMTYPE, "../../outside"),
        member("lib/passwd", tarfile.SYMTYPE, "/etc/passwd"),
    ],
    ids=["dot-dot", "absolute", "relative-link", "absolute-link"],
)
def test_a_member_that_would_land_outside_the_target_is_refused(
    tmp_path: Path, escaping: tarfile.TarInfo
) -> None:
    jar = jar_holding(tmp_path / "evil.jar", member("bin/postgres"), escaping)
    target = tmp_path / "area" / "install"
    with pytest.raises(InstallError, match="outside"):
        prebuilt.unpack(jar, target)
    assert not (tmp_path / "area" / "outside").exists() and not (tmp_path / "outside").exists()
    assert not Path("/tmp/absolute").exists()


def test_build_downloads_the_plans_binaries_for_an_offline_run(
    real_jar: Path, serve: Serve, tmp_path: Path
) -> None:
    url = serve(repository_of(tmp_path / "repo", real_jar))
    (tmp_path / "plan.toml").write_text(PLAN.format(install=f'{{ binaries = "{RELEASE}" }}'))
    env = {
        **os.environ,
        prebuilt.REPOSITORY_ENV: url,
        "PGBENCHLAB_BUILD_CACHE": str(tmp_path / "cache"),
    }
    done = run_cli("build", tmp_path / "plan.toml", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    # the download said so on stderr, with its size (a line every few seconds while it lasts)
    size = Path(real_jar).stat().st_size / 1e6
    said = [line for line in done.stderr.splitlines() if "downloaded" in line]
    assert said == [
        f"downloaded {prebuilt.GROUP}:{ARTIFACT}:{RELEASE}: {size:.1f} MB in "
        + said[0].rsplit(" in ", 1)[1]
    ], done.stderr
    cached = tmp_path / "cache" / "builds" / f"binaries-amd64-{RELEASE}"
    assert done.stdout.splitlines() == [
        f"binaries {RELEASE}: PostgreSQL {RELEASE} · binaries-amd64-{RELEASE} · {cached}/bin",
        f"binaries 9.6: PostgreSQL {RELEASE} · binaries-amd64-{RELEASE} · {cached}/bin",
    ]
    # `installs` lists the cached release beside what is installed, as a plan names it
    listed = run_cli("installs", "--json", env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    [entry] = [i for i in json.loads(listed.stdout) if i["source"] == "binaries"]
    assert entry["plan"] == f'{{ binaries = "{RELEASE}" }}'
    assert entry["version"] == RELEASE and entry["server"] and not entry["pgbench"]
    assert entry["bin_dir"] == f"{cached}/bin"
