"""Connection kinds on real servers: one small campaign over the socket, TCP and TLS on a
managed 15 (TLS: the embedded 18 is built without it) and over the socket and TCP on the
embedded 18, with -C and without, 2 repeats of 1 s. What it stored (the kind, the negotiated
TLS protocol and cipher), where its password went (nowhere), and the connection cost its
report and compare show; a certificate authority that does not match is refused."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard

from pgbenchlab import installs, osuser
from pgbenchlab.campaign import RESULTS_DB, remove_clusters
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.cli import main
from pgbenchlab.pgbench import command
from pgbenchlab.server import Endpoint, ManagedServer, managed, tls
from pgbenchlab.server.cluster_files import TLS_CA, TLS_KEY
from pgbenchlab.store import Store
from support import require_installs

pytestmark = pytest.mark.server

PASSWORD = "pw-connections-" + os.urandom(6).hex()
PGBENCH_15 = "/usr/lib/postgresql/15/bin/pgbench"
PLAN = """
[campaign]
name = "kinds"
repeats = 2
[defaults]
duration = "1s"
warmup = "0s"
vacuum = "none"
checkpoint = false
[matrix]
scale = 1
clients = [2]
connect = [false, true]
[[server]]
name = "pg15"
install = "15"
connection = ["socket", "tcp", "tls"]
[[server]]
name = "pg18"
install = "embedded"
connection = ["socket", "tcp"]
"""


@dataclass(frozen=True)
class Ran:
    results: Path
    clusters: Path
    printed: str
    exit_code: int


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    """The campaign, run by the CLI with every server's password known to the test."""
    require_installs("15", "embedded")
    base = tmp_path_factory.mktemp("connections")
    (base / "kinds.toml").write_text(PLAN)
    results = base / "results"
    with pytest.MonkeyPatch.context() as patch, _captured(base) as printed:
        made: list[int] = []
        patch.setattr(managed.secrets, "token_urlsafe", lambda n: made.append(n) or PASSWORD)
        code = main(["run", str(base / "kinds.toml"), "--results", str(results), "-q"])
        code = code or main(["compare", "--results", str(results), "--baseline", "pg15",
                             "--candidate", "pg18"])  # fmt: skip
        code = code or main(["report", "--results", str(results), "--format", "markdown",
                             "-o", str(results / "kinds.md")])  # fmt: skip
    clusters = cluster_root(results, osuser.server_account())
    try:
        assert len(made) == 2  # each server's password was this one
        yield Ran(results, clusters, printed.read_text(), code)
    finally:
        remove_clusters(results)


@pytest.fixture
def runs(ran: Ran) -> list[dict[str, object]]:
    assert ran.exit_code == 0, ran.printed
    with Store(ran.results / RESULTS_DB) as store:
        rows = store.db.execute(
            "SELECT server, connection, connect, status, tls_protocol, tls_cipher, "
            "pgbench_version FROM runs"
        ).fetchall()
    return [dict(r) for r in rows]


def test_every_kind_ran_and_tls_is_in_the_stored_facts(runs: list[dict[str, object]]) -> None:
    kinds = {(r["server"], r["connection"], r["connect"]) for r in runs}
    assert kinds == {
        (server, kind, connect)
        for server, kinds in (("pg15", ("socket", "tcp", "tls")), ("pg18", ("socket", "tcp")))
        for kind in kinds
        for connect in (0, 1)
    }
    assert all(r["status"] == "ok" for r in runs), runs
    # The newest pgbench whose libpq has TLS: the embedded 18's has none.
    assert all(str(r["pgbench_version"]).startswith("pgbench (PostgreSQL) 15.") for r in runs)
    for r in runs:
        if r["connection"] == "tls":
            assert str(r["tls_protocol"]).startswith("TLSv1."), r
            assert r["tls_cipher"], r
        else:
            assert r["tls_protocol"] is None and r["tls_cipher"] is None, r


def test_the_password_is_in_nothing_written_and_the_key_is_private(ran: Ran) -> None:
    assert ran.exit_code == 0, ran.printed
    written = [*_files(ran.results), *_files(ran.clusters)]
    assert any(p.name == RESULTS_DB for p, _ in written)
    assert any(p.name == "pgbenchlab-server.log" for p, _ in written)  # the server log too
    for path, data in written:
        assert PASSWORD.encode() not in data, f"the password leaked into {path}"
    assert PASSWORD not in ran.printed
    (key,) = ran.clusters.rglob(TLS_KEY)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.stat().st_uid == osuser.server_account().uid


def test_the_report_and_compare_show_the_connection_cost(ran: Ran) -> None:
    assert ran.exit_code == 0, ran.printed
    markdown = (ran.results / "kinds.md").read_text()
    for text in (markdown, ran.printed):
        assert "Connection cost per transaction" in text
        assert "TLS on top of a new TCP connection" in text
    rows = [line for line in markdown.splitlines() if "a new connection per transaction" in line]
    assert len(rows) == 5  # socket, tcp, tls on pg15; socket, tcp on pg18
    # A new connection costs milliseconds; a persistent one's transaction, a fraction of one.
    for row in rows:
        estimate = float(row.split("|")[3].strip())
        assert estimate > 0.5, row
        assert " … " in row.split("|")[4], row  # an interval, from 2 repeats a side


def test_an_authority_that_does_not_match_is_refused(tmp_path: Path) -> None:
    require_installs("15")
    with tls_server() as server:
        endpoint = server.client_endpoint("tls").with_dbname("postgres")
        assert _pgbench_select(endpoint, tmp_path).returncode == 0
        foreign = tls.make_material("127.0.0.1", "another").ca_cert
        server.host.write_text(server.data_dir / TLS_CA, foreign, mode=0o600, owner=server.account)
        refused = _pgbench_select(endpoint, tmp_path)
        assert refused.returncode != 0 and "certificate verify failed" in refused.stderr
        # An external server's dsn naming that authority: exit 2 before anything starts.
        (tmp_path / "ca.crt").write_text(foreign)
        dsn = (
            f"host=127.0.0.1 port={server.port} user=pgbenchlab dbname=postgres "
            f"sslmode=verify-full sslrootcert={tmp_path / 'ca.crt'}"
        )
        plan = f'[pgbench]\ninstall = "15"\n[[server]]\nname = "ext"\ndsn = "{dsn}"\n'
        (tmp_path / "ext.toml").write_text(plan)
        results = tmp_path / "results"
        with _captured(tmp_path) as printed:
            code = main(["run", str(tmp_path / "ext.toml"), "--results", str(results)])
        said = printed.read_text().strip()
        assert code == 2 and "certificate verify failed" in said and "\n" not in said
        assert not results.exists()


def test_tls_is_refused_where_the_server_or_pgbench_lacks_it(tmp_path: Path) -> None:
    require_installs("15", "embedded")
    cases = {
        'install = "15"\n[[server]]\nname = "pg18"\ninstall = "embedded"': (
            'server pg18: connection "tls" needs a PostgreSQL built with TLS support'
        ),
        'install = "embedded"\n[[server]]\nname = "pg15"\ninstall = "15"': (
            'connection "tls" needs a pgbench whose libpq has TLS support'
        ),
    }
    for i, (servers, message) in enumerate(cases.items()):
        plan = f'[pgbench]\n{servers}\n[matrix]\nconnection = "tls"\n'
        (tmp_path / f"{i}.toml").write_text(plan)
        with _captured(tmp_path) as printed:
            code = main(["run", str(tmp_path / f"{i}.toml"), "--results", str(tmp_path / "r")])
        assert code == 2 and message in printed.read_text()
        assert not (tmp_path / "r").exists()


# -- helpers -----------------------------------------------------------------------------------


@contextmanager
def _captured(base: Path) -> Iterator[Path]:
    """stdout and stderr of in-process CLI calls, into a file (at the fd level: what child
    processes print too)."""
    path = base / f"printed-{os.urandom(3).hex()}.txt"
    with path.open("w") as file:
        saved = [os.dup(1), os.dup(2)]
        for fd in (1, 2):
            os.dup2(file.fileno(), fd)
        try:
            with redirect_stdout(file), redirect_stderr(file):
                yield path
        finally:
            for fd, kept in zip((1, 2), saved, strict=True):
                os.dup2(kept, fd)
                os.close(kept)


def _files(root: Path) -> Iterator[tuple[Path, bytes]]:
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".zst":
                data = zstandard.ZstdDecompressor().stream_reader(data).read()
            yield path, data


@contextmanager
def tls_server() -> Iterator[ManagedServer]:
    """A started managed 15 serving TLS, removed afterwards."""
    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve("15", installs.discover()), account)
    home = account.make_dir(Path(tempfile.mkdtemp(prefix="pgbl-tls-", dir="/var/tmp")), 0o755)
    server = ManagedServer("tls15", install, home / "data", account, {}, tls=True)
    server.prepare()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def _pgbench_select(endpoint: Endpoint, cwd: Path) -> command.Completed:
    """One SELECT 1 by the 15's pgbench over this endpoint."""
    (cwd / "one.sql").write_text("SELECT 1;\n")
    argv = [PGBENCH_15, "-n", "-t", "1", "-f", str(cwd / "one.sql"), endpoint.dbname]
    return command.execute(argv, endpoint.libpq_env(), cwd=cwd)
