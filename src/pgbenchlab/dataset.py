"""pgbench datasets: ``pgbench -i`` once per server × scale, reuse, and hygiene between runs.

On a managed server each scale lives in its own database (``pgbench_s<scale>``), so scales
alternate without re-initialising. On an external server pgbenchlab only uses the pgbench tables
of the configured database, and initialises them only with the server's ``init = true``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pgbenchlab.errors import ServerError
from pgbenchlab.pgbench.command import execute
from pgbenchlab.server import Endpoint, Server

COMMENT_PREFIX = "pgbenchlab dataset"
PGBENCH_TABLES = ("pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history")


@dataclass(frozen=True)
class Prepared:
    endpoint: Endpoint
    init_seconds: float | None  # None when an existing dataset was reused


def database_name(server: Server, scale: int) -> str:
    return f"pgbench_s{scale}" if server.managed else server.endpoint.dbname


def current_scale(endpoint: Endpoint) -> int | None:
    """The scale of the pgbench tables in endpoint's database, or None when absent/unusable."""
    try:
        with endpoint.connect() as conn:
            row = conn.execute("SELECT count(*) FROM pgbench_branches").fetchone()
            conn.execute("SELECT 1 FROM pgbench_accounts LIMIT 1")
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


def ensure(
    server: Server,
    scale: int,
    *,
    pgbench: Path,
    work_dir: Path,
    force: bool,
) -> Prepared:
    """A database holding pgbench tables of this scale: reused when valid, else initialised."""
    endpoint = server.endpoint.with_dbname(database_name(server, scale))
    if server.managed:
        _create_database(server.endpoint, endpoint.dbname)
    if not force and current_scale(endpoint) == scale:
        return Prepared(endpoint, None)
    if not server.init_allowed:
        found = current_scale(endpoint)
        state = "no pgbench tables" if found is None else f"pgbench tables of scale {found}"
        raise ServerError(
            f"external server {server.name} has {state} in {endpoint.dbname}, the plan needs "
            f"scale {scale}: initialise it yourself or set init = true for that server"
        )
    started = time.monotonic()
    argv = [str(pgbench), "-i", "-q", "-s", str(scale), endpoint.dbname]
    done = execute(argv, endpoint.libpq_env(), cwd=work_dir)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise ServerError(f"pgbench -i -s {scale} failed on {server.name}: {tail}")
    return Prepared(endpoint, time.monotonic() - started)


def _create_database(admin: Endpoint, dbname: str) -> None:
    with admin.connect() as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{dbname}"')
            conn.execute(f"COMMENT ON DATABASE \"{dbname}\" IS '{COMMENT_PREFIX}'")


def vacuum(endpoint: Endpoint, mode: str) -> None:
    """Before a measured run: what pgbench's own pre-run step does, or all pgbench tables.

    "pgbench": vacuum branches and tellers, truncate history (pgbench's default without -n).
    "all": the same, then VACUUM ANALYZE of every pgbench table (what users do for
    read-write runs). "none": nothing.
    """
    if mode == "none":
        return
    with endpoint.connect() as conn:
        conn.execute("VACUUM pgbench_branches")
        conn.execute("VACUUM pgbench_tellers")
        conn.execute("TRUNCATE pgbench_history")
        if mode == "all":
            for table in PGBENCH_TABLES:
                conn.execute(f"VACUUM ANALYZE {table}")


def checkpoint(endpoint: Endpoint) -> str | None:
    """CHECKPOINT and wait for it; a warning text when the server refused (no privilege)."""
    try:
        with endpoint.connect() as conn:
            conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        return "CHECKPOINT refused (needs superuser or pg_checkpoint): runs start without one"
    return None
