"""`ExternalServer`: a server pgbenchlab only connects to."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import Host
from pgbenchlab.server.endpoint import (
    Endpoint,
    ServerFacts,
    libpq_environment,
    libpq_environment_names,
    query_facts,
)


class ExternalServer:
    """A server pgbenchlab only connects to: never started, stopped or reconfigured."""

    managed = False
    init_allowed: bool

    def __init__(
        self, name: str, dsn: str, *, init_allowed: bool = False, host: Host | None = None
    ) -> None:
        self.name = name
        self.init_allowed = init_allowed
        self.host = host  # the host it runs on, when the plan names it: telemetry read there
        try:
            parsed = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ServerError(f"invalid connection string for server {name}: {exc}") from None
        # What libpq takes from the environment (PGPASSFILE, PGSSLMODE, …) when the plan check
        # connects becomes part of the endpoint, so pgbench connects the same way.
        params = libpq_environment() | {k: str(v) for k, v in parsed.items()}
        names = libpq_environment_names()
        if lost := sorted(k for k in params if k not in names):
            raise ServerError(
                f"server {name}: the dsn's {', '.join(lost)} cannot reach pgbench, which takes its "
                "connection from libpq's environment variables only (libpq has none for these); "
                "remove them from the dsn"
            )
        self._endpoint = Endpoint(
            host=params.pop("host", "/var/run/postgresql"),
            port=int(params.pop("port", "5432")),
            user=params.pop("user", "postgres"),
            dbname=params.pop("dbname", "postgres"),
            password=params.pop("password", "") or None,
            options=params,
        )

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def client_endpoint(self, connection: str) -> Endpoint:
        """The dsn's: the plan has checked that the connection kind is the dsn's own."""
        return self._endpoint

    def prepare(self) -> None:
        try:
            with self._endpoint.connect() as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError as exc:
            message = str(exc).strip().splitlines()[0]
            raise ServerError(f"cannot connect to external server {self.name}: {message}") from None

    def restart(self) -> None:
        self.prepare()

    def stop(self) -> None:
        """Nothing to do: pgbenchlab never manages an external server's lifecycle."""

    def is_alive(self) -> bool:
        try:
            self.prepare()
        except ServerError:
            return False
        return True

    def facts(self) -> ServerFacts:
        version, number, settings = query_facts(self._endpoint)
        return ServerFacts(self.name, "external", version, number, settings, {}, None, None)

    def log_tail(self, lines: int = 20) -> list[str]:
        return []

    def log_problems(self, lines: int = 3) -> list[str]:
        return []
