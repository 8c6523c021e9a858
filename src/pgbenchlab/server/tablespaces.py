"""A managed cluster's tablespaces (the plan's `[dataset]` tablespace, index_tablespace and
temp_tablespaces): for each directory the plan names, a directory of the cluster's own under
it, owned by the server account like the data directory and marked as pgbenchlab's, made a
tablespace (`CREATE TABLESPACE`) once the server runs; removed with the cluster, found through
its `pg_tblspc` links (only the directories pgbenchlab marked: a tablespace a setup script made
elsewhere is never touched).

Each cluster has a directory of its own (named by the server and its data directory) because
PostgreSQL keeps one `PG_<major>_<catalog>` directory per tablespace location: two clusters of
one major cannot share a location.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import suppress
from dataclasses import dataclass
from pathlib import PurePath

from psycopg import sql

from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import LOCAL_HOST, Account, Host
from pgbenchlab.plan import DatasetOptions
from pgbenchlab.plan.dataset import tablespace_name
from pgbenchlab.server.endpoint import Endpoint

MARKER = "pgbenchlab-tablespace.json"
LINKS = "pg_tblspc"  # in the data directory: a link per tablespace, to its location


@dataclass(frozen=True)
class Tablespace:
    """One tablespace of a cluster: its name, where it lies and what of the dataset it holds."""

    name: str
    location: str
    roles: tuple[str, ...]  # tables | indexes | temporary files


def location(directory: str, server: str, data_dir: PurePath) -> PurePath:
    """The cluster's own directory under a directory the plan names."""
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:8]
    return PurePath(directory) / f"{server}-{digest}"


def planned(options: DatasetOptions, server: str, data_dir: PurePath) -> tuple[Tablespace, ...]:
    return tuple(
        Tablespace(tablespace_name(d), str(location(d, server, data_dir)), roles)
        for d, roles in options.tablespaces.items()
    )


def ensure(
    endpoint: Endpoint,
    wanted: tuple[Tablespace, ...],
    account: Account,
    host: Host = LOCAL_HOST,
) -> None:
    """Each tablespace made in the running cluster (endpoint: its superuser), its directory
    first; one the cluster has already is kept."""
    for space in wanted:
        place = PurePath(space.location)
        if not host.exists(place.parent):
            host.mkdir(place.parent, owner=account)
        host.mkdir(place, owner=account)
        host.write_text(place / MARKER, json.dumps({"tablespace": space.name}) + "\n",
                        mode=0o600, owner=account)  # fmt: skip
        with endpoint.connect() as conn:
            row = conn.execute(
                "SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname = %s",
                (space.name,),
            ).fetchone()
            if row is None:
                conn.execute(
                    sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                        sql.Identifier(space.name), sql.Literal(space.location)
                    )
                )
            elif str(row[0]) != space.location:
                raise ServerError(
                    f"tablespace {space.name} of this cluster lies in {row[0]}, not in "
                    f"{space.location}: remove the cluster (pgbenchlab clean) to make it anew"
                )


def remove_linked(data_dir: PurePath, host: Host = LOCAL_HOST) -> None:
    """The tablespace directories pgbenchlab made for a cluster that is stopped and about to go
    (those its pg_tblspc links lead to that carry pgbenchlab's marker)."""
    links = data_dir / LINKS
    try:
        names = host.list_dir(links)
    except OSError:
        return
    for name in names:
        with suppress(OSError):
            target = host.resolve(links / name)
            if target != links / name and host.exists(target / MARKER):
                host.remove_tree(target)
