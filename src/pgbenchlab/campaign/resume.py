"""Resuming: a campaign of the same name and plan continues where it stopped (its complete
runs are kept and skipped); a plan that only adds test sets (servers, with the builds they name
and their scripts) continues it too, the new sets' cells run and the old runs kept, as
pgbench-tools users add sets to the same results; the same name with any other plan is
refused, saying what changed."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from pgbenchlab import __version__
from pgbenchlab.analysis.capacity import SearchIdentity, rules_since
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.errors import StoreError
from pgbenchlab.plan import Plan
from pgbenchlab.store import CampaignRecord, JoinedSets, Store
from pgbenchlab.telemetry import machine_facts


def open_campaign(
    store: Store,
    plan: Plan,
    pgbench: PgbenchClient,
    *,
    fresh: bool,
    note: Callable[[str], None] | None = None,
) -> tuple[int, set[str]]:
    """Continue the campaign of the same name (same plan, or one that adds test sets to it:
    told to `note`), or start a new one: its id and the run keys already complete."""
    existing = store.find_campaign(plan.name)
    redacted = plan.stored_text
    if existing is not None and not fresh:
        if existing.plan_digest != plan.digest:
            join_or_refuse(store, existing, plan, note)
        store.reopen_campaign(existing.id)
        return existing.id, store.done_run_keys(existing.id)
    versions = {"pgbenchlab": __version__, "pgbench": pgbench.version_text}
    campaign_id = store.start_campaign(
        plan.name,
        plan.path,
        redacted,
        plan.digest,
        versions,
        machine_facts(),
        plan.description,
        plan.files,
        plan.axis_orders,
    )
    return campaign_id, set()


def join_or_refuse(
    store: Store, existing: CampaignRecord, plan: Plan, note: Callable[[str], None] | None
) -> None:
    """The test sets the plan adds joined to the stored campaign (its plan replaced, the one
    before kept in its history); StoreError saying what changed for any other change."""
    joined = joinable(existing, plan)
    store.replace_plan(existing.id, plan.stored_text, plan.digest, joined)
    if note is not None:
        sets = ", ".join(joined.added)
        note(f'test set(s) {sets} join campaign "{plan.name}": their cells run, its earlier '
             "runs are kept")  # fmt: skip


def joinable(existing: CampaignRecord, plan: Plan) -> JoinedSets:
    """The test sets the plan adds to the stored campaign; StoreError saying what changed when
    it changes anything else."""
    joined = joined_sets(existing, plan)
    if joined is None:
        changed = plan_difference(existing.plan_text, plan.stored_text, existing.files, plan.files)
        raise StoreError(
            f'campaign "{plan.name}" in this results database was run with a different plan '
            f"({changed}); run with --fresh to start it anew (earlier results are kept) or "
            "rename the campaign",
        )
    return joined


def prospect(store: Store, plan: Plan, *, fresh: bool) -> str:
    """What running the plan on this results database would do, as a sentence (the dry run's);
    StoreError where the run would refuse."""
    existing = store.find_campaign(plan.name)
    if existing is None or fresh:
        kept = " (--fresh: the earlier one's results are kept)" if existing else ""
        return f'starts campaign "{plan.name}"{kept}'
    done = len(store.done_run_keys(existing.id) & {s.run_key for s in plan.specs})
    kept = f"{done} of its {len(plan.specs)} runs are done and kept"
    if existing.plan_digest == plan.digest:
        return f'continues campaign "{plan.name}": {kept}'
    added = ", ".join(joinable(existing, plan).added)
    return f'test set(s) {added} join campaign "{plan.name}": their cells run, {kept}'


def joined_sets(existing: CampaignRecord, plan: Plan) -> JoinedSets | None:
    """The test sets plan adds to the stored campaign when that is all it changes (its other
    servers, builds, tables and files as they were; new files may come with the new sets);
    None for any other change."""
    added = grown_by(existing.plan_text, existing.files, plan.stored_text, plan.files)
    return JoinedSets(added, plan.files, plan.axis_orders) if added else None


def grown_by(
    old: str, old_files: Mapping[str, str], new: str, new_files: Mapping[str, str]
) -> tuple[str, ...]:
    """The test sets the new plan adds to the old one when that is all it changes (the old
    one's files kept as they were); () otherwise."""
    kept = all(new_files.get(name) == digest for name, digest in old_files.items())
    return added_servers(old, new) if kept else ()


def added_servers(old: str, new: str) -> tuple[str, ...]:
    """The [[server]] tables the new plan text adds to the old one when nothing else differs
    but the [build.NAME] tables it adds with them; () for any other difference."""
    try:
        before, after = tomllib.loads(old), tomllib.loads(new)
    except tomllib.TOMLDecodeError:  # a plan stored by an older pgbenchlab
        return ()
    servers_before, servers_after = (
        _named(before.pop("server", [])),
        _named(after.pop("server", [])),
    )
    builds_before, builds_after = before.pop("build", {}), after.pop("build", {})
    kept = all(servers_after.get(n) == s for n, s in servers_before.items()) and all(
        builds_after.get(n) == b for n, b in builds_before.items()
    )
    if before != after or not kept:
        return ()
    return tuple(name for name in servers_after if name not in servers_before)


def _named(tables: list[Any]) -> dict[str, Any]:
    return {str(t.get("name")): t for t in tables if isinstance(t, dict)}


def plan_difference(
    old: str, new: str, old_files: Mapping[str, str], new_files: Mapping[str, str]
) -> str:
    """What changed: the plan's lines, or the content of the files it refers to."""
    changed = [
        line[1:].strip()
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
    ]
    edited = sorted(
        name for name in old_files.keys() & new_files.keys() if old_files[name] != new_files[name]
    )
    parts = []
    older = _older_search(old, new)
    if older:
        parts.append(older)
    elif changed:
        parts.append(
            f"changed lines: {'; '.join(changed[:4])}" + (" …" if len(changed) > 4 else "")
        )
    if edited:
        parts.append(f"changed file: {', '.join(edited)}")
    return "; ".join(parts) or "the plan was stored by an older pgbenchlab"


def _older_search(old: str, new: str) -> str | None:
    """A capacity search whose probes were judged by older verdict rules, said so."""
    before, now = SearchIdentity.read(old), SearchIdentity.read(new)
    if before is None or now is None or before.verdict_rules >= now.verdict_rules:
        return None
    return (
        f"its probes were judged by older verdict rules ({before.verdict_rules}; now "
        f"{now.verdict_rules}: {rules_since(before.verdict_rules)}), so a pass may hide "
        "transactions over the SLO"
    )
