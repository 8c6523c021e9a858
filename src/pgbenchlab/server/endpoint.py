"""What every server is to the rest of pgbenchlab: an `Endpoint` to connect to, recorded
`ServerFacts`, and the `Server` interface."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import psycopg

from pgbenchlab.redaction import libpq_options

# Settings pgbenchlab owns: where and how the server listens, and what it logs.
RESERVED_SETTINGS = frozenset(
    {"port", "listen_addresses", "unix_socket_directories", "unix_socket_permissions"}
    | {"ssl", "ssl_cert_file", "ssl_key_file"}
)

# A client on another host notices a lost network within about 10 s: data left unacknowledged
# (tcp_user_timeout) or an idle connection's keepalives unanswered, where the kernel's defaults
# wait some 15 minutes. libpq reads these from no environment variable: they reach pgbench in
# its dbname argument, a connection string it expands (`Endpoint.client_dbname`).
LOST_NETWORK_OPTIONS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
TCP_USER_TIMEOUT_SINCE = (12,)  # the libpq that knows it; an older one refuses the string


@dataclass(frozen=True)
class Endpoint:
    """How a client reaches a server. The password is never printed, stored or put in argv."""

    host: str
    port: int
    user: str
    dbname: str
    options: dict[str, str] = field(default_factory=dict)
    password: str | None = field(default=None, repr=False)
    # TLS to a server on another host: the PEM certificate of the authority to verify it
    # against, which the client's side gets as a file of its own (sslrootcert).
    authority: str | None = field(default=None, repr=False)

    def with_dbname(self, dbname: str) -> Endpoint:
        return replace(self, dbname=dbname)

    def trusting(self, authority_file: str) -> Endpoint:
        """This endpoint verifying the server against the authority in that file."""
        return replace(self, options=self.options | {"sslrootcert": authority_file}, authority=None)

    def connect(self, *, autocommit: bool = True, timeout: int = 10) -> psycopg.Connection[Any]:
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "dbname": self.dbname,
            "connect_timeout": timeout,
            # text read as UTF-8: from a SQL_ASCII database psycopg would return bytes
            "client_encoding": "UTF8",
            **self.options,
        }
        if self.password is not None:
            params["password"] = self.password
        return psycopg.connect(**params, autocommit=autocommit)

    def libpq_env(self) -> dict[str, str]:
        """Environment for libpq clients such as pgbench (keeps secrets out of argv): the same
        connection as `connect` makes, option for option."""
        env = {
            "PGHOST": self.host,
            "PGPORT": str(self.port),
            "PGUSER": self.user,
            "PGDATABASE": self.dbname,
        }
        names = libpq_environment_names()
        env |= {names[k]: v for k, v in self.options.items() if k in names}
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        return env

    def client_dbname(self, libpq: tuple[int, ...]) -> str:
        """pgbench's dbname argument: the database's name, or a connection string naming it
        with the lost-network options this endpoint has (those a libpq of that version knows):
        no environment variable carries them."""
        extra = {
            k: v
            for k, v in self.options.items()
            if k in LOST_NETWORK_OPTIONS
            and (k != "tcp_user_timeout" or libpq >= TCP_USER_TIMEOUT_SINCE)
        }
        if not extra:
            return self.dbname
        return " ".join(f"{k}={v}" for k, v in {"dbname": self.dbname, **extra}.items())

    def public(self) -> dict[str, str]:
        """What may be recorded about this endpoint: no password, no local socket path."""
        host = "local socket" if self.host.startswith("/") else self.host
        return {"host": host, "port": str(self.port), "user": self.user, "dbname": self.dbname}


@dataclass(frozen=True)
class ServerFacts:
    """What a server is, as recorded with every campaign."""

    name: str
    kind: str  # managed | external
    version: str  # server_version
    version_num: int
    settings: dict[str, str]  # every setting not at its default, as SHOW prints it
    requested: dict[str, str]  # what the plan asked for
    install: str | None  # installation name (managed)
    data_dir: str | None
    build: Mapping[str, Any] | None = None  # provenance of a server built from source


class Server(Protocol):
    name: str

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def managed(self) -> bool: ...

    def client_endpoint(self, connection: str) -> Endpoint:
        """How pgbench reaches the server for a run of this connection kind."""
        ...

    @property
    def init_allowed(self) -> bool: ...

    def prepare(self) -> None: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...

    def is_alive(self) -> bool: ...

    def facts(self) -> ServerFacts: ...

    def log_tail(self, lines: int = 20) -> list[str]: ...

    def log_problems(self, lines: int = 3) -> list[str]: ...


def libpq_environment_names() -> dict[str, str]:
    """libpq connection keyword → the environment variable libpq reads it from."""
    return {o.keyword.decode(): o.envvar.decode() for o in libpq_options() if o.envvar}


def libpq_environment() -> dict[str, str]:
    """The connection options libpq would take from this process's environment."""
    names = libpq_environment_names()
    return {k: os.environ[v] for k, v in names.items() if v in os.environ}


def query_facts(endpoint: Endpoint) -> tuple[str, int, dict[str, str]]:
    """server_version, server_version_num and every non-default setting."""
    with endpoint.connect() as conn:
        version = conn.execute("SHOW server_version").fetchone()
        number = conn.execute("SHOW server_version_num").fetchone()
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings "
            "WHERE source NOT IN ('default', 'override') ORDER BY name"
        ).fetchall()
    assert version is not None and number is not None
    hidden = RESERVED_SETTINGS | {"data_directory", "config_file", "hba_file", "ident_file"}
    hidden -= {"ssl"}  # a fact about the server; its files' places are not
    settings = {str(name): str(value) for name, value in rows if name not in hidden}
    return str(version[0]), int(number[0]), settings
