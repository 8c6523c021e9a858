"""`ManagedServer`: a cluster pgbenchlab creates, configures, starts and stops on a host."""

from __future__ import annotations

import ipaddress
import json
import secrets
from pathlib import Path, PurePath

import psycopg
from psycopg import sql

from pgbenchlab import builds
from pgbenchlab.claims import CREATING, READY, Claim
from pgbenchlab.cpusets import NumaPolicy
from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import LOCAL_HOST, Finished, Host, pinned
from pgbenchlab.installs import Installation
from pgbenchlab.osuser import OsAccount
from pgbenchlab.redaction import redact_setting
from pgbenchlab.server import tls
from pgbenchlab.server.cluster_files import (
    HBA_FILE,
    LOG_FILE,
    MARKER,
    POOLER_RECORD,
    SOCKET_PARENT,
    SOCKET_PREFIX,
    SOCKET_RECORD,
    TLS_CA,
    TLS_CERT,
    TLS_KEY,
    check_data_dir,
    postmaster_socket_dir,
    remove_cluster_files,
    remove_recorded_socket_dir,
    remove_socket_dir,
    stop_recorded_pooler,
)
from pgbenchlab.server.counting import COUNT_DIR, counted_start
from pgbenchlab.server.endpoint import (
    LOST_NETWORK_OPTIONS,
    Endpoint,
    Server,
    ServerFacts,
    query_facts,
)
from pgbenchlab.server.pooler import Login, PgBouncer
from pgbenchlab.server.settings import BASE_SETTINGS, SETTINGS_FILE, postgres_env, settings_text

SUPERUSER = "pgbenchlab"
LOOPBACK = "127.0.0.1"
SCRAM_SINCE = (10,)  # before 10 a TCP password is md5; never anything weaker


def password_method(install: Installation) -> str:
    """How a TCP login proves its password to this installation's server."""
    return "scram-sha-256" if install.version.major >= SCRAM_SINCE else "md5"


class ManagedServer:
    """A cluster pgbenchlab creates, configures, starts and stops, owned by `account` on
    `host`."""

    managed = True
    init_allowed = True

    def __init__(
        self,
        name: str,
        install: Installation,
        data_dir: Path,
        account: OsAccount,
        settings: dict[str, str] | None = None,
        *,
        owner_tag: str = "",
        claim: Claim | None = None,
        host: Host = LOCAL_HOST,
        cpus: str | None = None,
        numa: NumaPolicy | None = None,
        tls: bool = False,
        address: str = LOOPBACK,
        client_network: str | None = None,
        counting: bool = False,
        pooler: PgBouncer | None = None,
    ) -> None:
        self.name = name
        self.install = install
        self.data_dir = data_dir
        self.account = account
        self.settings = dict(settings or {})
        self.owner_tag = owner_tag
        self.claim = claim  # records initdb's progress, so a cut-short one is made again
        self.host = host
        self.cpus = cpus  # the CPU list the postmaster is started on; its children inherit it
        self.numa = numa  # its NUMA placement, inherited alike
        # On another host pgbenchlab's own SQL goes over an SSH forward to the socket, and
        # pgbench over TCP to the host's address (a socket there is out of its reach).
        self.remote = host.state_dir() is not None
        self.tls = tls  # serve TLS: ssl = on with a certificate for `address`
        self.address = address  # where clients reach it over TCP: the host's address
        # where pgbench connects from (pg_hba.conf): the address itself on one machine
        self.client_network = client_network or _network(address)
        # TCP logins take this SCRAM password: made per server object, kept in memory only,
        # handed to pgbench in its environment.
        self._password = secrets.token_urlsafe(24)
        self.counting = counting  # run under callgrind: every process's instructions counted
        self.port = 0
        self.socket_dir: PurePath | None = None
        self.pooler = pooler  # connection = "pgbouncer": started and stopped with the server

    @property
    def endpoint(self) -> Endpoint:
        """pgbenchlab's own connection: the server's socket (forwarded over SSH from another
        host)."""
        if self.socket_dir is None:
            raise RuntimeError(f"server {self.name} is not started")
        address, port = self.host.reach(self.socket_dir, self.port)
        return Endpoint(address, port, SUPERUSER, "postgres")

    def client_endpoint(self, connection: str) -> Endpoint:
        """How pgbench connects: the socket, TCP with the password, or TLS verified against the
        cluster's own authority (whose certificate pgbench reads where the server keeps it, or,
        from another host, a copy of it: never the server's key)."""
        if connection == "socket" and not self.remote:
            return self.endpoint
        if connection == "pgbouncer":
            if self.pooler is None:
                raise RuntimeError(f"server {self.name} was not started with a pooler")
            return self.pooler.client_endpoint("postgres")
        if connection == "tls" and not self.tls:
            raise RuntimeError(f"server {self.name} was not started with TLS")
        options = {"sslmode": "verify-full" if connection == "tls" else "disable"}
        authority = None
        if connection == "tls" and self.remote:  # its certificate, to be placed beside pgbench
            authority = self.host.read_text(self.data_dir / TLS_CA)
        elif connection == "tls":
            options["sslrootcert"] = str(self.data_dir / TLS_CA)
        if self.remote:  # over a network that may be lost: pgbench fails then, never hangs
            options |= LOST_NETWORK_OPTIONS
        return Endpoint(
            self.address, self.port, SUPERUSER, "postgres", options, self._password, authority
        )

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """initdb when needed (only into an empty directory or one pgbenchlab made), then start."""
        if self._half_made():
            remove_cluster_files(self.data_dir, self.host)
            self._initdb()
        elif self._is_ours():
            if self._pg_major_on_disk() != self.install.version.major_text:
                self._stop_if_running()
                remove_cluster_files(self.data_dir, self.host)
                self._initdb()
            else:
                self._stop_if_running()
        else:
            self._initdb()
        self.start()

    def start(self) -> None:
        self.socket_dir = self.host.make_temp_dir(SOCKET_PREFIX, SOCKET_PARENT, owner=self.account)
        # Recorded first, so that a kill -9 at any later moment leaves nothing unfound.
        self._write_owned(self.data_dir / SOCKET_RECORD, f"{self.socket_dir}\n")
        self._write_hba()
        if self.tls:
            self._ensure_tls_files()
        for _attempt in range(3):
            self.port = self.host.free_port()
            self._write_settings()
            wait = "300" if self.counting else "120"  # under callgrind it starts slowly
            result = self._pg_ctl(
                "start", "-w", "-t", wait, "-l", str(self.log_path), *self._counted(),
                cpus=self.cpus, numa=self.numa,
            )  # fmt: skip
            if result.returncode == 0:
                self._check_settings()
                verifier = self._set_password()
                self._start_pooler(verifier)
                return
            if "could not bind" not in "\n".join(self.log_tail(10)):
                break
        raise ServerError(
            f"server {self.name} did not start: " + " | ".join(self.log_tail(5)),
            where=str(self.data_dir),
        )

    def stop(self) -> None:
        if self.pooler is not None:
            self.pooler.stop()
        self._stop_if_running()
        if self.socket_dir is not None:
            remove_socket_dir(self.socket_dir, self.host)
            self.socket_dir = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def is_alive(self) -> bool:
        """Accepting connections. (pg_ctl status alone is fooled for a moment after a crash:
        the dead postmaster lingers as a zombie until it is reaped.)"""
        if self.socket_dir is None:
            return False
        try:
            with self.endpoint.connect(timeout=5) as conn:
                conn.execute("SELECT 1")
        except (psycopg.Error, OSError):  # OSError: its host unreachable
            return False
        return True

    def facts(self) -> ServerFacts:
        version, number, settings = query_facts(self.endpoint)
        return ServerFacts(
            self.name,
            "managed",
            version,
            number,
            settings,
            dict(self.settings),
            self.install.name,
            str(self.data_dir),
            builds.provenance_of(self.install),
        )

    def log_tail(self, lines: int = 20) -> list[str]:
        try:
            text = self.host.read_text(self.log_path)
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def log_problems(self, lines: int = 3) -> list[str]:
        """The last PANIC, FATAL or ERROR lines of the server log: why it went down."""
        levels = ("PANIC:", "FATAL:", "ERROR:")
        found = [line for line in self.log_tail(200) if any(lv in line for lv in levels)]
        return found[-lines:]

    @property
    def count_dir(self) -> Path:
        """Where callgrind writes each process's counts (callgrind.PID) when it exits."""
        return self.data_dir / COUNT_DIR

    # -- internals ---------------------------------------------------------------------------

    def _counted(self) -> list[str]:
        """pg_ctl's -p for a counting server (none otherwise)."""
        postgres = self.install.binary("postgres")
        return (
            counted_start(self.host, postgres, self.count_dir, self.account)
            if self.counting
            else []
        )

    def _start_pooler(self, verifier: str) -> None:
        """The pooler in front of the server's socket (on another host taking the server's
        password over TCP); if it cannot start, neither does the server (a half-started pair
        would be reused by the next run)."""
        if self.pooler is None:
            return
        assert self.socket_dir is not None
        login = Login(self._password, verifier) if self.remote else None
        try:
            self.pooler.start(self.socket_dir, self.port, login)
        except ServerError:
            self.stop()
            raise
        assert self.pooler.directory is not None  # recorded: a kill -9 leaves nothing unfound
        self._write_owned(self.data_dir / POOLER_RECORD, f"{self.pooler.directory}\n")

    def _pg_ctl(
        self, *args: str, cpus: str | None = None, numa: NumaPolicy | None = None
    ) -> Finished:
        argv = [str(self.install.binary("pg_ctl")), "-D", str(self.data_dir), *args]
        argv = pinned(argv, cpus, self.host, numa)  # pg_ctl's postmaster inherits its place
        # A new session keeps a terminal's Ctrl-C away from the postmaster: we stop it ourselves.
        return self.host.run(
            argv,
            env=postgres_env(self.install),
            timeout=300,
            as_user=self.account,
            new_session=True,
        )

    def _half_made(self) -> bool:
        """An initdb pgbenchlab began here and never finished (a signal or a kill)."""
        return (
            self.claim is not None
            and self.claim.state == CREATING
            and self.host.exists(self.data_dir)
            and not self.host.exists(self.data_dir / MARKER)
        )

    def _is_ours(self) -> bool:
        check_data_dir(self.data_dir, self.host)
        return self.host.exists(self.data_dir / MARKER)

    def _pg_major_on_disk(self) -> str:
        try:
            return self.host.read_text(self.data_dir / "PG_VERSION").strip()
        except OSError:
            return ""

    def _stop_if_running(self) -> None:
        if self._pg_ctl("status").returncode == 0:
            leftover_socket_dir = postmaster_socket_dir(self.data_dir, self.host)
            # A postmaster that no longer accepts connections (a crash whose recovery cannot
            # write, as on a full disk) would spend the whole timeout on a fast stop.
            healthy = self.is_alive()
            stopped = self._pg_ctl("stop", "-m", "fast", "-w", "-t", "60") if healthy else None
            if stopped is None or stopped.returncode != 0:  # its shutdown checkpoint cannot write
                self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "60")
            # A killed campaign's server: its private socket directory goes with it.
            if leftover_socket_dir and leftover_socket_dir != self.socket_dir:
                remove_socket_dir(leftover_socket_dir, self.host)
        remove_recorded_socket_dir(self.data_dir, keep=self.socket_dir, host=self.host)
        stop_recorded_pooler(self.data_dir, self.host)

    def _initdb(self) -> None:
        if self.claim is not None:
            self.claim.set_state(CREATING)
        self.host.mkdir(self.data_dir, owner=self.account)
        argv = [
            str(self.install.binary("initdb")),
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            f"--auth-host={password_method(self.install)}",  # pg_hba.conf: rewritten at start
            "--encoding=UTF8",
            "--locale=C",
            "-N",  # no fsync: --nosync before 10, --no-sync from 10
        ]
        env = postgres_env(self.install)
        result = self.host.run(argv, env=env, timeout=600, as_user=self.account)
        if result.returncode != 0:
            raise ServerError(f"initdb failed: {result.stderr.strip()[-500:]}")
        conf = self.data_dir / "postgresql.conf"
        text = self.host.read_text(conf)
        self._write_owned(conf, text + f"\ninclude_if_exists = '{SETTINGS_FILE}'\n")
        marker = {"created_by": "pgbenchlab", "server": self.name, "owner": self.owner_tag}
        self._write_owned(self.data_dir / MARKER, json.dumps(marker) + "\n")  # complete now
        if self.claim is not None:
            self.claim.set_state(READY)

    def _write_settings(self) -> None:
        assert self.socket_dir is not None
        ours = {
            "port": str(self.port),
            "listen_addresses": self.address,
            "unix_socket_directories": str(self.socket_dir),
            "unix_socket_permissions": "0700",
        }
        if self.tls:
            ours |= {"ssl": "on", "ssl_cert_file": TLS_CERT, "ssl_key_file": TLS_KEY}
        merged = BASE_SETTINGS | self.settings | ours
        self._write_owned(self.data_dir / SETTINGS_FILE, settings_text(merged))

    def _write_hba(self) -> None:
        """The socket (a private directory, mode 0700) trusts; TCP and TLS take the password
        (SCRAM; md5 before 10), from where pgbench connects from."""
        network, method = self.client_network, password_method(self.install)
        lines = ["local all all trust"]
        if self.tls:
            lines.append(f"hostssl all all {network} {method}")
        lines.append(f"host all all {network} {method}")
        self._write_owned(self.data_dir / HBA_FILE, "\n".join(lines) + "\n")

    def _ensure_tls_files(self) -> None:
        """The cluster's authority and server certificate, made when missing or when the
        certificate does not name the address (the key: mode 0600, the server's account)."""
        try:
            current = self.host.read_text(self.data_dir / TLS_CERT)
        except OSError:
            current = ""
        if tls.covers(current, self.address) and self.host.exists(self.data_dir / TLS_CA):
            return
        made = tls.make_material(self.address, self.name)
        self._write_owned(self.data_dir / TLS_KEY, made.server_key)
        self._write_owned(self.data_dir / TLS_CERT, made.server_cert)
        self._write_owned(self.data_dir / TLS_CA, made.ca_cert)

    def _set_password(self) -> str:
        """Set the superuser's SCRAM (md5 before 10) verifier, computed here, and return it:
        the password itself never reaches the server, its log or a file."""
        method = password_method(self.install).encode()
        with self.endpoint.connect() as conn:
            verifier = conn.pgconn.encrypt_password(
                self._password.encode(), SUPERUSER.encode(), method
            ).decode()
            conn.execute("SET log_statement = 'none'")
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(SUPERUSER), sql.Literal(verifier)
                )
            )
        return verifier

    def _write_owned(self, path: Path, text: str) -> None:
        self.host.write_text(path, text, mode=0o600, owner=self.account)

    def _check_settings(self) -> None:
        """Every setting the plan asked for was accepted by the server."""
        if not self.settings:
            return
        with self.endpoint.connect() as conn:
            rows = conn.execute(
                "SELECT name, error FROM pg_file_settings "
                "WHERE sourcefile LIKE %s AND (error IS NOT NULL OR NOT applied)",
                (f"%/{SETTINGS_FILE}",),
            ).fetchall()
        bad = {str(name): str(error) for name, error in rows if name in self.settings}
        if bad:
            self.stop()
            detail = "; ".join(
                f"{k} = {redact_setting(k, self.settings[k])!r}: {v}" for k, v in bad.items()
            )
            raise ServerError(f"server {self.name} rejected settings: {detail}")


def _network(address: str) -> str:
    """An address as pg_hba.conf names it: an IP address as a /32 or /128, a name as is."""
    try:
        return str(ipaddress.ip_network(address))
    except ValueError:
        return address


def client_endpoint(server: Server, endpoint: Endpoint) -> Endpoint:
    """Where pgbench's own `-i` reaches endpoint's database: over TCP to a managed server on
    another host, otherwise as pgbenchlab itself does."""
    if isinstance(server, ManagedServer) and server.remote:
        return server.client_endpoint("tcp").with_dbname(endpoint.dbname)
    return endpoint
