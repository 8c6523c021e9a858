"""A managed PgBouncer in front of a managed server (connection = "pgbouncer").

It runs on the server's host as the server's account, pinned to its CPU list when the plan
gives one, and reaches the server through the server's own private socket, which the server
already trusts (pg_hba.conf: local trust).

On this machine it listens only on a Unix socket in a private directory (mode 0700, the
account's), as the server itself does. Authentication is that socket's: the pooler trusts the
clients that can reach its directory (pgbench, run by the same user as pgbenchlab). No
password exists on either path: the auth_file names the user with an empty password field,
which PgBouncer's trust mode needs only to know the user.

On another host pgbench reaches it over TCP at the host's address, as it reaches the server
there: by the server's own password, which PgBouncer checks against the auth_file's verifier
(SCRAM, md5 before PostgreSQL 10; the same verifier the server holds, computed by libpq: the
password itself is in no file). pgbenchlab's admin connection goes over an SSH forward to the
pooler's socket, with the same password.

Its directory holds the configuration, the auth_file, the log and the pid file. It is started
after its server and stopped before it (each server restart starts it again, in front of the
server's new socket); the server's data directory records that directory, so a pooler a killed
campaign left running is stopped when the cluster is next used or cleaned
(`cluster_files.stop_recorded_pooler`).
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePath

import psycopg

from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import LOCAL_HOST, Host, pinned, process_running
from pgbenchlab.osuser import OsAccount
from pgbenchlab.server.cluster_files import POOLER_PREFIX, SOCKET_PARENT, remove_socket_dir
from pgbenchlab.server.endpoint import LOST_NETWORK_OPTIONS, Endpoint

DEBIAN_PGBOUNCER = PurePath("/usr/sbin/pgbouncer")  # Debian's place: not on a user's PATH
ADMIN_DB = "pgbouncer"  # the admin console's database
# max_prepared_statements (protocol-level prepared statements in transaction and statement
# pools) came in 1.21.
PREPARED_SINCE = (1, 21)
PREPARED_STATEMENTS = 200
START_TIMEOUT_S, STOP_TIMEOUT_S = 10.0, 10.0
_VERSION = re.compile(r"PgBouncer\s+(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class PoolerConfig:
    """How the pooler runs: its binary, pool mode, server connections per database and user,
    client connections accepted, the CPU list it is pinned to, and its user name."""

    binary: PurePath
    pool_mode: str
    pool_size: int
    max_client_conn: int
    cpus: str | None
    user: str


@dataclass(frozen=True)
class PoolerFacts:
    """What is recorded of a pooler with the campaign: its version and every setting it was
    started with (its private paths left out), its CPU list."""

    server: str
    kind: str
    version: str
    settings: dict[str, str]
    binary: str


def find_pgbouncer(named: str | None, host: Host = LOCAL_HOST) -> PurePath:
    """The pgbouncer program a plan names (the program or its directory), else the one on PATH,
    else Debian's: on the host the pooler runs on."""
    where = "" if host is LOCAL_HOST else f" on host {host.name}"
    if named is not None:
        path = PurePath(named)
        program = path / "pgbouncer" if host.exists(path / "pgbouncer") else path
        if not host.exists(program):
            raise ServerError(f"no pgbouncer program at {program}{where}", where="[pooler] install")
        return program
    on_path = _on_path(host)
    if on_path is not None:
        return on_path
    if host.exists(DEBIAN_PGBOUNCER):
        return DEBIAN_PGBOUNCER
    raise ServerError(
        f'connection "pgbouncer" needs PgBouncer{where}: install Debian\'s package pgbouncer '
        "there, or name its program with [pooler] install"
    )


def _on_path(host: Host) -> PurePath | None:
    if host is LOCAL_HOST:
        found = shutil.which("pgbouncer")
        return None if found is None else Path(found)
    done = host.run(["sh", "-c", "command -v pgbouncer || true"], timeout=20)
    found = done.stdout.strip()
    return PurePath(found) if found.startswith("/") else None


def pgbouncer_version(binary: PurePath, host: Host = LOCAL_HOST) -> tuple[str, tuple[int, ...]]:
    """The version pgbouncer prints ("PgBouncer 1.18.0") and its numbers."""
    try:
        done = host.run([str(binary), "--version"], timeout=20)
    except OSError as exc:
        raise ServerError(f"cannot run {binary}: {exc}") from None
    found = _VERSION.search(done.stdout)
    if found is None:
        raise ServerError(f"{binary} --version printed no PgBouncer version: {done.stdout!r}")
    numbers = tuple(int(n) for n in found.groups() if n is not None)
    return found.group(0), numbers


def prepared_problem(mode: str, version: tuple[int, ...], version_text: str) -> str | None:
    """Why pgbench's -M prepared cannot run through this pool (None: it can): a transaction or
    statement pool hands each transaction any server connection, where the statements prepared
    on another are missing, unless the pooler tracks them (1.21's max_prepared_statements)."""
    if mode == "session" or version >= PREPARED_SINCE:
        return None
    return (
        f'protocol "prepared" through a {mode} pool needs PgBouncer 1.21 or later '
        f'(max_prepared_statements); {version_text} has none: use protocol = "extended" '
        'or "simple", pool_mode = "session", or a newer PgBouncer ([pooler] install)'
    )


@dataclass(frozen=True)
class Login:
    """How clients on other hosts log in to the pooler there: the server's password (kept in
    memory only) and its verifier, which the pooler's auth_file holds."""

    password: str = field(repr=False)
    verifier: str = field(repr=False)

    @property
    def auth_type(self) -> str:
        return "scram-sha-256" if self.verifier.startswith("SCRAM-SHA-256$") else "md5"


class PgBouncer:
    """One PgBouncer process in front of one server, on its host, started and stopped with
    it."""

    def __init__(
        self, name: str, config: PoolerConfig, account: OsAccount, host: Host = LOCAL_HOST
    ) -> None:
        self.name = name  # its server's
        self.config = config
        self.account = account
        self.host = host
        self.version_text, self.version = pgbouncer_version(config.binary, host)
        self.directory: PurePath | None = None
        self.port = 0
        self.pid: int | None = None
        self._login: Login | None = None  # on another host: TCP logins by password

    # -- how clients reach it ------------------------------------------------------------------

    def client_endpoint(self, dbname: str) -> Endpoint:
        """pgbench's way in: the pooler's socket here, TCP at the host's address elsewhere."""
        if self.directory is None:
            raise RuntimeError(f"the pooler of server {self.name} is not started")
        if self._login is None:
            return Endpoint(str(self.directory), self.port, self.config.user, dbname)
        options = {"sslmode": "disable", **LOST_NETWORK_OPTIONS}
        return Endpoint(
            self.host.address, self.port, self.config.user, dbname, options, self._login.password
        )

    @property
    def admin_endpoint(self) -> Endpoint:
        """pgbenchlab's own connection to the admin console: the socket (forwarded over SSH
        from another host)."""
        if self.directory is None:
            raise RuntimeError(f"the pooler of server {self.name} is not started")
        address, port = self.host.reach(self.directory, self.port)
        password = None if self._login is None else self._login.password
        return Endpoint(address, port, self.config.user, ADMIN_DB, password=password)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, server_socket_dir: PurePath, server_port: int, login: Login | None) -> None:
        """Start it in front of the server's socket; login: how clients on other hosts log in
        (None on this machine, where the socket's directory is the access control)."""
        self._login = login
        self.directory = self.host.make_temp_dir(POOLER_PREFIX, SOCKET_PARENT, owner=self.account)
        self.port = self.host.free_port()
        self._write("pgbouncer.ini", self._config_text(server_socket_dir, server_port))
        verifier = "" if login is None else login.verifier
        self._write("users.txt", f'"{self.config.user}" "{verifier}"\n')
        argv = pinned([str(self.config.binary), "-d", str(self.directory / "pgbouncer.ini")],
                      self.config.cpus, self.host)  # fmt: skip
        done = self.host.run(argv, timeout=30, as_user=self.account, new_session=True)
        if done.returncode != 0 or not self._answers():
            problem = (done.stderr.strip() or " | ".join(self.log_tail(3)))[-400:]
            self.stop()
            raise ServerError(f"the pooler of server {self.name} did not start: {problem}")
        self.pid = int(self.host.read_text(self.directory / "pgbouncer.pid").strip())

    def stop(self) -> None:
        """Stop it (SIGTERM: at once; SIGKILL if it lingers) and remove its directory."""
        if self.directory is None:
            return
        pid = self.pid or self._recorded_pid()
        if pid is not None:
            with suppress(ProcessLookupError):  # gone already
                self.host.signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while process_running(pid, self.host) and time.monotonic() < deadline:
                time.sleep(0.02)
            if process_running(pid, self.host):
                with suppress(ProcessLookupError):  # gone already
                    self.host.signal(pid, signal.SIGKILL)
        remove_socket_dir(self.directory, self.host)
        self.directory, self.pid = None, None

    def release_servers(self, dbname: str) -> None:
        """Close its server connections to dbname now (KILL, then RESUME to take clients
        again): the server's backends exit and report their statistics, as pgbench's own do
        when it disconnects from the server directly."""
        with self.admin_endpoint.connect(timeout=5) as conn:
            for command in (f"KILL {dbname}", f"RESUME {dbname}"):
                result = conn.pgconn.exec_(command.encode())
                if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
                    message = result.error_message.decode(errors="replace").strip()
                    raise psycopg.OperationalError(f"{command}: {message}")

    def facts(self) -> PoolerFacts:
        return PoolerFacts(
            self.name, "pgbouncer", self.version_text, self.settings(), str(self.config.binary)
        )

    def settings(self) -> dict[str, str]:
        """What it is started with, its private paths left out."""
        private = {"listen_port", "unix_socket_dir", "logfile", "pidfile", "auth_file"}
        return {k: v for k, v in self._settings().items() if k not in private}

    def log_tail(self, lines: int = 20) -> list[str]:
        if self.directory is None:
            return []
        try:
            return self.host.read_text(self.directory / "pgbouncer.log").splitlines()[-lines:]
        except OSError:
            return []

    # -- internals -----------------------------------------------------------------------------

    def _settings(self) -> dict[str, str]:
        config, here = self.config, self.directory or PurePath("/")
        login = self._login
        settings = {
            # here no TCP: its socket's directory is its access control
            "listen_addr": "" if login is None else self.host.address,
            "listen_port": str(self.port),
            "unix_socket_dir": str(here),
            "auth_type": "trust" if login is None else login.auth_type,
            "auth_file": str(here / "users.txt"),
            "admin_users": config.user,
            "pool_mode": config.pool_mode,
            "default_pool_size": str(config.pool_size),
            "max_client_conn": str(config.max_client_conn),
            "logfile": str(here / "pgbouncer.log"),
            "pidfile": str(here / "pgbouncer.pid"),
            # -C opens a client connection per transaction: a log line each would be the
            # observer's cost, not the pooler's
            "log_connections": "0",
            "log_disconnections": "0",
        }
        if self.version >= PREPARED_SINCE:
            settings["max_prepared_statements"] = str(PREPARED_STATEMENTS)
        return settings

    def _config_text(self, server_socket_dir: PurePath, server_port: int) -> str:
        server = f"host={server_socket_dir} port={server_port}"
        lines = ["[databases]", f"* = {server}", "", "[pgbouncer]"]
        lines += [f"{k} = {v}" for k, v in self._settings().items()]
        return "\n".join(lines) + "\n"

    def _write(self, name: str, text: str) -> None:
        assert self.directory is not None
        self.host.write_text(self.directory / name, text, mode=0o600, owner=self.account)

    def _answers(self) -> bool:
        """Its admin console answers (it daemonises before it listens)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with self.admin_endpoint.connect(timeout=2) as conn:
                    conn.pgconn.exec_(b"SHOW VERSION")
                return True
            except psycopg.Error:
                time.sleep(0.05)
        return False

    def _recorded_pid(self) -> int | None:
        assert self.directory is not None
        try:
            return int(self.host.read_text(self.directory / "pgbouncer.pid").strip())
        except (OSError, ValueError):
            return None
