"""What a campaign set up around a server, as (title, text) facts: the tablespaces of its
cluster (where the dataset's tables, indexes and temporary files lay) and its one-off
preparations. The report's servers table and `show` print the same facts."""

from __future__ import annotations

from pgbenchlab.durations import duration_text
from pgbenchlab.report.views.model import Pairs
from pgbenchlab.store import Store
from pgbenchlab.store.server_setup import Preparation, preparations, tablespaces

SHOWN_PREPARATIONS = 3  # the first ones in full; after a few restarts, a count


def setup_facts(store: Store, campaign_id: int) -> dict[str, Pairs]:
    """Each server's setup facts, by server name (servers without any: absent)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for server, spaces in tablespaces(store, campaign_id).items():
        found[server] = [
            (f"tablespace for {' and '.join(s.roles)}", f"{s.location} ({s.name})") for s in spaces
        ]
    done: dict[str, list[Preparation]] = {}
    for prepared in preparations(store, campaign_id):
        done.setdefault(prepared.server, []).append(prepared)
    for server, runs in done.items():
        found.setdefault(server, []).append(("one-off preparation", preparation_text(runs)))
    return {server: tuple(facts) for server, facts in found.items()}


def preparation_text(runs: list[Preparation]) -> str:
    """Each as "select-only, 4 clients, 5 min on scale 10: 41,200 TPS (took 5 min)", the
    first few of them and a count of the rest."""
    texts = [_one(p) for p in runs[:SHOWN_PREPARATIONS]]
    more = len(runs) - SHOWN_PREPARATIONS
    after = f"; and {more} more" if more > 0 else ""
    each = f"{len(runs)}, after its starts: " if len(runs) > 1 else ""
    return each + "; ".join(texts) + after


def _one(p: Preparation) -> str:
    tps = "no TPS reported" if p.tps is None else f"{p.tps:,.0f} TPS"
    clients = f"{p.clients} client" + ("" if p.clients == 1 else "s")
    planned, took = duration_text(p.duration_s), duration_text(p.seconds)
    return f"{p.workload}, {clients}, {planned} on scale {p.scale}: {tps} (took {took})"
