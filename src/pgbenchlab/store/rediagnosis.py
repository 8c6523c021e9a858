"""Stored runs diagnosed again when the rules have changed since they were stored.

A run's diagnosis is stored with the version of the rules that made it (`rules_version`).
Reading a diagnosis made by other rules, the store diagnoses the run again from what it stored
(`diagnosing.diagnose`: the run's figures, per-second series, load generators and telemetry;
its server's measured sync rates; the load generator host whose pgbench the samplers
watched), so that a report never shows a verdict that today's rules would not give. A group
member's part is judged again the same way, from the member's run as its own that the part
kept (`ServerPart.observed`: the group's run stores no telemetry of its own); a verdict with
nothing left to judge is dropped.
"""

from __future__ import annotations

import json
import sqlite3

from pgbenchlab.analysis.diagnosis import Diagnosis
from pgbenchlab.diagnosing import Evidence, diagnose, judged, stale, usable_cpus
from pgbenchlab.records.observed import ObservedRun
from pgbenchlab.results import ServerPart
from pgbenchlab.store.telemetry import read_telemetry

LOCAL = "local"  # the name run_hosts gives this machine


def rediagnose(db: sqlite3.Connection, run_id: int) -> Diagnosis | None:
    """The stored run diagnosed by today's rules (None: nothing to judge)."""
    row = db.execute(
        "SELECT campaign_id, server, tps, spec_json FROM runs WHERE id = ?", (run_id,)
    ).fetchone()
    if row is None:
        return None
    campaign_id, server, tps, spec_json = row
    spec = json.loads(spec_json)
    seconds = db.execute(
        "SELECT t, tps FROM run_seconds WHERE run_id = ? ORDER BY t", (run_id,)
    ).fetchall()
    generators = db.execute(
        "SELECT host, busy, threads, cpus FROM run_generators WHERE run_id = ?", (run_id,)
    ).fetchall()
    observed = ObservedRun(
        tps,
        tuple((int(t), float(v)) for t, v in seconds),
        spec.get("rate") is not None,
        spec.get("clients"),
        tuple((h, busy, usable_cpus(threads, cpus)) for h, busy, threads, cpus in generators),
        read_telemetry(db, run_id),
    )
    return diagnose(observed, _evidence(db, run_id, campaign_id, server))


def rediagnosed_parts(
    db: sqlite3.Connection, run_id: int, parts: tuple[ServerPart, ...]
) -> tuple[ServerPart, ...]:
    """A group's run's member parts, each judged by today's rules (from what it kept)."""
    if not any(_of_other_rules(p) for p in parts):
        return parts
    (campaign_id,) = db.execute("SELECT campaign_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    return tuple(_again(db, run_id, campaign_id, p) if _of_other_rules(p) else p for p in parts)


def _of_other_rules(part: ServerPart) -> bool:
    return (part.verdict is not None or part.observed is not None) and stale(part.details)


def _again(db: sqlite3.Connection, run_id: int, campaign_id: int, part: ServerPart) -> ServerPart:
    if part.observed is None:
        return judged(part, None)  # nothing left to judge
    return judged(part, diagnose(part.observed, _evidence(db, run_id, campaign_id, part.server)))


def _evidence(db: sqlite3.Connection, run_id: int, campaign_id: int, server: str) -> Evidence:
    facts = db.execute(
        "SELECT fsync_json FROM server_facts WHERE campaign_id = ? AND server = ? "
        "AND fsync_json IS NOT NULL",
        (campaign_id, server),
    ).fetchone()
    fsync = json.loads(facts[0])["ops_per_s"] if facts else {}
    hosts = [
        h
        for (h,) in db.execute(
            "SELECT host FROM run_hosts WHERE run_id = ? AND role = 'pgbench'", (run_id,)
        )
    ]
    # the samplers watched pgbench on its host when one generator, not this machine, ran it
    watched = hosts[0] if len(hosts) == 1 and hosts[0] != LOCAL else None
    return Evidence({str(k): float(v) for k, v in fsync.items()}, watched)
