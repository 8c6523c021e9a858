"""A campaign against a password-protected server: the password appears in no file pgbenchlab
wrote, and managed servers only listen where they should."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from pgbenchlab import plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.errors import UserError
from pgbenchlab.server import ManagedServer
from support import QuietReporter, embedded_server

pytestmark = pytest.mark.server


@pytest.fixture
def protected_server() -> Iterator[tuple[ManagedServer, str]]:
    """A managed server with a role that logs in over TCP with a password."""
    with embedded_server("protected") as server:
        password = "pw-" + secrets.token_hex(8)
        with server.endpoint.connect() as conn:
            conn.execute(f"CREATE ROLE bench LOGIN PASSWORD '{password}'")
            conn.execute("CREATE DATABASE bench OWNER bench")
        yield server, password


def every_text(root: Path) -> Iterator[tuple[Path, bytes]]:
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".zst":
                data = zstandard.ZstdDecompressor().stream_reader(data).read()
            yield path, data


def test_password_is_never_written(
    protected_server: tuple[ManagedServer, str], tmp_path: Path, results_dir: Path
) -> None:
    server, password = protected_server
    dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=bench password={password}"
    text = f"""
[campaign]
name = "secret"
[defaults]
duration = "2s"
warmup = "1s"
latency_log = "full"
[[server]]
name = "ext"
dsn = "{dsn}"
init = true
[matrix]
scale = [1]
workload = ["tpcb-like"]
clients = [2]
"""
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert [r.status for r in outcome.results] == ["ok"], outcome.results[0].error
    assert password not in repr(outcome.results)
    written = list(every_text(results_dir))
    assert written
    for path, data in written:
        assert password.encode() not in data, f"the password leaked into {path}"
    # The run did happen against that server, with the plan's text kept (redacted).
    with server.endpoint.with_dbname("bench").connect() as conn:
        row = conn.execute("SELECT count(*) FROM pgbench_history").fetchone()
    assert row is not None and row[0] > 0


def test_wrong_password_is_a_clear_error(
    protected_server: tuple[ManagedServer, str], tmp_path: Path
) -> None:
    server, password = protected_server
    dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=bench password=wrong{password}"
    text = f'[[server]]\nname = "ext"\ndsn = "{dsn}"\n[matrix]\nclients = [1]\n'
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    with pytest.raises(UserError, match="password authentication failed") as caught:
        run_campaign(the_plan, tmp_path / "results", QuietReporter())
    assert password not in str(caught.value)


def test_managed_server_listens_on_loopback_and_a_private_socket(
    protected_server: tuple[ManagedServer, str],
) -> None:
    server, _ = protected_server
    with server.endpoint.connect() as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('listen_addresses', 'unix_socket_directories', 'unix_socket_permissions')"
            ).fetchall()
        )
        hba = conn.execute(
            "SELECT type, address, auth_method FROM pg_hba_file_rules WHERE address IS NOT NULL"
        ).fetchall()
    assert settings["listen_addresses"] == "127.0.0.1"
    assert settings["unix_socket_permissions"] == "0700"
    socket_dir = Path(settings["unix_socket_directories"])
    assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700
    assert all(method != "trust" for _, _, method in hba), "trust only on the local socket"
    assert stat.S_IMODE(server.data_dir.stat().st_mode) == 0o700
    assert os.stat(server.data_dir).st_uid == server.account.uid
