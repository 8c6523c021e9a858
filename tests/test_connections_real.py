"""Connection kinds on real servers: one small campaign over the socket, TCP and TLS on a
managed 15 and on the session's 18 built with OpenSSL (the embedded 18 has no TLS), with -C and
without, 2 repeats of 1 s, run by that 18's pgbench. What it stored (the kind, the negotiated
TLS protocol and cipher), where its password went (nowhere), and the connection cost its
report and compare show (as text and JSON); a certificate authority that does not match is
refused by both servers' clients."""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard

import ci_guard
from pg_builds import Pg18Build
from pgbenchlab import installs, osuser
from pgbenchlab.analysis.connection_cost import KINDS
from pgbenchlab.campaign import RESULTS_DB, remove_clusters
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.cli import main
from pgbenchlab.installs import Installation
from pgbenchlab.invocation import command
from pgbenchlab.report.views.compare import JSON_VERSION
from pgbenchlab.server import Endpoint, ManagedServer, managed, tls
from pgbenchlab.server.cluster_files import TLS_CA, TLS_KEY
from pgbenchlab.store import Store
from support import managed_server, require_installs

# The session's 18 may be built here (minutes) when this module runs first or alone.
pytestmark = [pytest.mark.server, pytest.mark.timeout(1800)]

PASSWORD = "pw-connections-" + os.urandom(6).hex()
PGBENCH_15 = "/usr/lib/postgresql/15/bin/pgbench"
PLAN = """
[pgbench]
install = { build = "pg18" }
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
connection = ["socket", "tcp", "tls"]
[[server]]
name = "pg15"
install = "15"
[[server]]
name = "pg18"
install = { build = "pg18" }
"""


@dataclass(frozen=True)
class Ran:
    results: Path
    clusters: Path
    printed: str
    exit_code: int
    compared: dict[str, Any]  # compare --json


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, pg18_build: Pg18Build) -> Iterator[Ran]:
    """The campaign, run by the CLI with every server's password known to the test."""
    require_installs("15")
    base = tmp_path_factory.mktemp("connections")
    (base / "kinds.toml").write_text(pg18_build.recipe + PLAN)
    results = base / "results"
    compare = ["compare", "--results", str(results), "--baseline", "pg15", "--candidate", "pg18"]
    with pytest.MonkeyPatch.context() as patch, _captured(base) as printed:
        made: list[int] = []
        patch.setattr(managed.secrets, "token_urlsafe", lambda n: made.append(n) or PASSWORD)
        code = main(["run", str(base / "kinds.toml"), "--results", str(results), "-q"])
        code = code or main(compare)
        code = code or main(["report", "--results", str(results), "--format", "markdown",
                             "-o", str(results / "kinds.md")])  # fmt: skip
    with redirect_stdout(io.StringIO()) as as_json:  # what compare prints: stdout alone
        code = code or main([*compare, "--json"])
    clusters = cluster_root(results, osuser.server_account())
    try:
        assert len(made) == 2  # each server's password was this one
        compared = json.loads(as_json.getvalue()) if code == 0 else {}
        yield Ran(results, clusters, printed.read_text(), code, compared)
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
        for server in ("pg15", "pg18")
        for kind in ("socket", "tcp", "tls")
        for connect in (0, 1)
    }
    assert all(r["status"] == "ok" for r in runs), runs
    assert all(str(r["pgbench_version"]).startswith("pgbench (PostgreSQL) 18.") for r in runs)
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
    keys = list(ran.clusters.rglob(TLS_KEY))
    assert len(keys) == 2  # one per server
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert key.stat().st_uid == osuser.server_account().uid


def test_the_report_and_compare_show_the_connection_cost(ran: Ran) -> None:
    assert ran.exit_code == 0, ran.printed
    markdown = (ran.results / "kinds.md").read_text()
    for text in (markdown, ran.printed):
        assert "Connection cost per transaction" in text
        assert "TLS on top of a new TCP connection" in text
    rows = [line for line in markdown.splitlines() if "a new connection per transaction" in line]
    assert len(rows) == 6  # socket, tcp, tls on each server
    # A new connection costs milliseconds; a persistent one's transaction, a fraction of one.
    for row in rows:
        estimate = float(row.split("|")[3].strip())
        assert estimate > 0.5, row
        assert " … " in row.split("|")[4], row  # an interval, from 2 repeats a side


def test_compare_json_has_the_connection_costs(ran: Ran) -> None:
    assert ran.exit_code == 0, ran.printed
    assert ran.compared["schema_version"] == JSON_VERSION and ran.compared["changes"]
    costs = ran.compared["connection_costs"]
    assert {(c["side"], c["server"], c["cost_of"], c["over"]) for c in costs} == {
        (server, server, cost_of, over)
        for server in ("pg15", "pg18")
        for cost_of, over in [*(("new_connection", k) for k in KINDS), ("tls", "tcp")]
    }
    for cost in costs:
        assert cost["ci_low_ms"] < cost["estimate_ms"] < cost["ci_high_ms"], cost
        assert (cost["runs_without"], cost["runs_with"], cost["confidence"]) == (2, 2, 0.95)
        assert f"{cost['estimate_ms']:+.3f}" in ran.printed  # the figure the text shows
        if cost["cost_of"] == "new_connection":
            assert cost["estimate_ms"] > 0.5, cost


def test_an_authority_that_does_not_match_is_refused(tmp_path: Path) -> None:
    require_installs("15")
    with tls_server(_install("15")) as server:
        _refused_once_the_authority_changes(server, Path(PGBENCH_15), tmp_path)
        foreign = tls.make_material("127.0.0.1", "another").ca_cert
        # An external server's dsn naming an authority that did not sign its certificate:
        # exit 2 before anything starts.
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


def test_the_built_18_refuses_an_authority_that_does_not_match(
    pg18_build: Pg18Build, tmp_path: Path
) -> None:
    ci_guard.require_server_mark()
    install = osuser.reachable_install(pg18_build.install, osuser.server_account())
    with tls_server(install) as server:
        _refused_once_the_authority_changes(server, install.binary("pgbench"), tmp_path)


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


def _install(spec: str) -> Installation:
    return osuser.reachable_install(
        installs.resolve(spec, installs.discover()), osuser.server_account()
    )


@contextmanager
def tls_server(install: Installation) -> Iterator[ManagedServer]:
    """A started managed server of install serving TLS, removed afterwards."""
    with managed_server("tls", install, tls=True) as server:
        yield server


def _refused_once_the_authority_changes(server: ManagedServer, pgbench: Path, cwd: Path) -> None:
    """pgbench connects over TLS against the cluster's authority, then not once the cluster's
    authority file (what pgbench verifies against) is another one."""
    endpoint = server.client_endpoint("tls").with_dbname("postgres")
    assert _pgbench_select(pgbench, endpoint, cwd).returncode == 0
    foreign = tls.make_material("127.0.0.1", "another").ca_cert
    server.host.write_text(server.data_dir / TLS_CA, foreign, mode=0o600, owner=server.account)
    refused = _pgbench_select(pgbench, endpoint, cwd)
    assert refused.returncode != 0 and "certificate verify failed" in refused.stderr


def _pgbench_select(pgbench: Path, endpoint: Endpoint, cwd: Path) -> command.Completed:
    """One SELECT 1 by this pgbench over this endpoint."""
    (cwd / "one.sql").write_text("SELECT 1;\n")
    argv = [str(pgbench), "-n", "-t", "1", "-f", str(cwd / "one.sql"), endpoint.dbname]
    return command.execute(command.Call(tuple(argv), endpoint.libpq_env(), cwd))
