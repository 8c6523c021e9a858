"""What a campaign set up around its servers, kept beside its runs: each managed cluster's
tablespaces (`server_tablespaces`) and each one-off preparation run after a start of a server
(`server_preparations`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgbenchlab.server.tablespaces import Tablespace
from pgbenchlab.store.database import Store

ROLE_SEPARATOR = ", "


@dataclass(frozen=True)
class Preparation:
    """A server's one-off preparation: pgbench's workload and clients for duration_s on the
    dataset of its first run after the start, how long it took and the TPS it reported."""

    server: str
    started_at: float
    workload: str
    clients: int
    scale: int
    duration_s: int
    seconds: float
    tps: float | None


def record_tablespaces(
    store: Store, campaign_id: int, server: str, spaces: Sequence[Tablespace]
) -> None:
    with store.transaction():
        store.db.executemany(
            "INSERT OR REPLACE INTO server_tablespaces VALUES (?,?,?,?,?)",
            [
                (campaign_id, server, s.name, s.location, ROLE_SEPARATOR.join(s.roles))
                for s in spaces
            ],
        )


def tablespaces(store: Store, campaign_id: int) -> dict[str, tuple[Tablespace, ...]]:
    """Each managed server's tablespaces in the campaign, by server name."""
    rows = store.db.execute(
        "SELECT server, name, location, roles FROM server_tablespaces WHERE campaign_id = ? "
        "ORDER BY server, roles",
        (campaign_id,),
    ).fetchall()
    found: dict[str, tuple[Tablespace, ...]] = {}
    for server, name, location, roles in rows:
        space = Tablespace(str(name), str(location), tuple(str(roles).split(ROLE_SEPARATOR)))
        found[str(server)] = (*found.get(str(server), ()), space)
    return found


def record_preparation(store: Store, campaign_id: int, done: Preparation) -> None:
    with store.transaction():
        store.db.execute(
            "INSERT INTO server_preparations VALUES (?,?,?,?,?,?,?,?,?)",
            (
                campaign_id,
                done.server,
                done.started_at,
                done.workload,
                done.clients,
                done.scale,
                done.duration_s,
                done.seconds,
                done.tps,
            ),
        )


def preparations(store: Store, campaign_id: int) -> tuple[Preparation, ...]:
    """The campaign's preparations, in the order they ran."""
    rows = store.db.execute(
        "SELECT server, started_at, workload, clients, scale, duration_s, seconds, tps "
        "FROM server_preparations WHERE campaign_id = ? ORDER BY started_at",
        (campaign_id,),
    ).fetchall()
    return tuple(
        Preparation(
            str(r[0]),
            float(r[1]),
            str(r[2]),
            int(r[3]),
            int(r[4]),
            int(r[5]),
            float(r[6]),
            None if r[7] is None else float(r[7]),
        )
        for r in rows
    )
