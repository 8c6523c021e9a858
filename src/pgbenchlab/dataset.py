"""pgbench datasets: ``pgbench -i`` once per server × scale, reuse, and hygiene between runs.

On a managed server each scale lives in its own database (``pgbench_s<scale>``, and
``pgbench_s<scale>_<identity>`` when the plan's `[dataset]` changes how pgbench -i makes it), so
scales alternate without re-initialising. On an external server pgbenchlab only uses the pgbench
tables of the configured database, and initialises them only with the server's ``init = true``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.invocation.command import Call, execute, version_of
from pgbenchlab.pgbench.progress import SERVER_CAUSE, error_summary
from pgbenchlab.plan import DatasetOptions
from pgbenchlab.records.version import parse_version
from pgbenchlab.server import LOST_NETWORK_OPTIONS, Endpoint, Server, client_endpoint

COMMENT_PREFIX = "pgbenchlab dataset"
DEFAULTS = DatasetOptions()  # pgbench -i as it comes
PGBENCH_TABLES = ("pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history")


@dataclass(frozen=True)
class Prepared:
    endpoint: Endpoint
    init_seconds: float | None  # None when an existing dataset was reused


def database_name(server: Server, scale: int, options: DatasetOptions = DEFAULTS) -> str:
    """A managed server's database for a scale, named by how its dataset is made too."""
    if not server.managed:
        return server.endpoint.dbname
    identity = options.identity
    return f"pgbench_s{scale}_{identity}" if identity else f"pgbench_s{scale}"


# A dataset is complete when its three keyed tables have their primary keys and the rows of
# its scale. pgbench -i adds the keys last, so a cut-short initialisation lacks them.
_SHAPE_SQL = """
SELECT (SELECT count(*) FROM pg_constraint WHERE contype = 'p' AND conrelid IN
          ('pgbench_branches'::regclass, 'pgbench_tellers'::regclass,
           'pgbench_accounts'::regclass)),
       (SELECT count(*) FROM pgbench_branches),
       (SELECT count(*) FROM pgbench_tellers),
       (SELECT {accounts} FROM pgbench_accounts),
       (SELECT count(*) FROM pg_class WHERE relname = 'pgbench_history')
"""
ROWS_PER_SCALE = (1, 10, 100_000)  # branches, tellers, accounts


def current_scale(endpoint: Endpoint, *, exact: bool = False) -> int | None:
    """The scale of complete pgbench tables in endpoint's database, or None when they are
    absent, unkeyed or not of one scale. ``exact`` counts every account (after pgbench -i);
    otherwise the highest key stands for the count (the key makes it unique)."""
    sql = _SHAPE_SQL.format(accounts="count(*)" if exact else "coalesce(max(aid), 0)")
    try:
        with endpoint.connect() as conn:
            row = conn.execute(sql).fetchone()
    except psycopg.Error:
        return None
    if row is None or row[0] != 3 or row[4] != 1:
        return None
    scale = int(row[1])
    counts = tuple(int(n) for n in row[1:4])
    return scale if counts == tuple(scale * n for n in ROWS_PER_SCALE) else None


def _state(admin: Endpoint, dbname: str) -> str:
    """The dataset state recorded on a managed server's database ("" when none)."""
    with admin.connect() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (dbname,),
        ).fetchone()
    recorded = str(row[0] or "") if row else ""
    return recorded.removeprefix(f"{COMMENT_PREFIX}: ")


def _record_state(admin: Endpoint, dbname: str, state: str) -> None:
    with admin.connect() as conn:
        conn.execute(f"COMMENT ON DATABASE \"{dbname}\" IS '{COMMENT_PREFIX}: {state}'")


def ensure(
    server: Server,
    scale: int,
    *,
    pgbench: Path,
    work_dir: Path,
    force: bool,
    host: Host = LOCAL_HOST,
    options: DatasetOptions = DEFAULTS,
) -> Prepared:
    """A database holding pgbench tables of this scale, made with these options: reused when
    valid, else initialised (by the pgbench of host) and its setup SQL run."""
    endpoint = server.endpoint.with_dbname(database_name(server, scale, options))
    ready = f"scale {scale} ready"
    if server.managed:
        _create_database(server.endpoint, endpoint.dbname)
        # Only a dataset whose initialisation was recorded as finished is reused: one that a
        # signal or a kill cut short is made again.
        reusable = _state(server.endpoint, endpoint.dbname) == ready
    else:
        reusable = True
    if not force and reusable and current_scale(endpoint) == scale:
        return Prepared(endpoint, None)
    if not server.init_allowed:
        raise _not_initialisable(server, endpoint, scale)
    started = time.monotonic()
    if server.managed:
        _record_state(server.endpoint, endpoint.dbname, f"initialising scale {scale}")
    # pgbench's way in: over TCP when it runs on another host than the server's.
    client = client_endpoint(server, endpoint)
    argv = [str(pgbench), "-i", "-q", *options.init_arguments(), "-s", str(scale)]
    argv.append(init_dbname(client, pgbench, host))
    done = execute(Call(tuple(argv), client.libpq_env(), work_dir), host=host)
    if done.interrupted:
        raise KeyboardInterrupt
    if done.returncode != 0:
        raise _init_failed(server, scale, done.stderr)
    if current_scale(endpoint, exact=True) != scale:
        raise ServerError(f"pgbench -i -s {scale} on {server.name} left an incomplete dataset")
    if options.setup_text.strip():
        _set_up(endpoint, options, server.name)
    if server.managed:
        _record_state(server.endpoint, endpoint.dbname, ready)
    return Prepared(endpoint, time.monotonic() - started)


def _init_failed(server: Server, scale: int, stderr: str) -> ServerError:
    """pgbench -i's failure in its own words; when they hold none of the server's (its
    connection broke: a server that crashed, as on a full disk's PANIC), the managed server's
    log says why."""
    text = f"pgbench -i -s {scale} failed on {server.name}: {error_summary(stderr)}"
    problems: list[str] = []
    if server.managed and not SERVER_CAUSE.search(stderr):
        with contextlib.suppress(OSError):  # its host unreachable: pgbench's words stand
            problems = server.log_problems()
    return ServerError(f"{text} [its log: {' | '.join(problems)}]" if problems else text)


def _set_up(endpoint: Endpoint, options: DatasetOptions, server: str) -> None:
    """The plan's setup SQL in the new dataset, in one transaction: all of it or none."""
    try:
        with endpoint.connect() as conn, conn.transaction():
            conn.execute(options.setup_text.encode())
    except psycopg.Error as exc:
        reason = (str(exc).strip().splitlines() or ["no message"])[0]
        raise ServerError(
            f"setup_sql {options.setup_sql} failed in {endpoint.dbname} on {server}: {reason}"
        ) from None


def require_datasets(server: Server, scales: Iterable[int]) -> None:
    """A server pgbenchlab may not initialise (external, without init = true) must hold every
    scale the plan needs already: checked before the campaign starts, so it never starts."""
    for scale in sorted(set(scales)):
        endpoint = server.endpoint.with_dbname(database_name(server, scale))
        if current_scale(endpoint) != scale:
            raise _not_initialisable(server, endpoint, scale)


def init_dbname(client: Endpoint, pgbench: Path, host: Host = LOCAL_HOST) -> str:
    """pgbench -i's dbname: with the lost-network options over a network that may be lost
    (as a run's pgbench has them), so a lost server fails the load instead of hanging it."""
    if not LOST_NETWORK_OPTIONS.keys() & client.options.keys():
        return client.dbname
    return client.client_dbname(parse_version(version_of(pgbench, host)).major)


def _not_initialisable(server: Server, endpoint: Endpoint, scale: int) -> ServerError:
    found = current_scale(endpoint)
    state = "no pgbench tables" if found is None else f"pgbench tables of scale {found}"
    return ServerError(
        f"external server {server.name} has {state} in {endpoint.dbname}, the plan needs "
        f"scale {scale}: initialise it yourself or set init = true for that server"
    )


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
