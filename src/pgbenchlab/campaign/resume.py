"""Resuming: a campaign of the same name and plan continues where it stopped (its complete
runs are kept and skipped); the same name with another plan is refused, saying what changed."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from pgbenchlab import __version__
from pgbenchlab.analysis.capacity import SearchIdentity, rules_since
from pgbenchlab.campaign.client import PgbenchClient
from pgbenchlab.errors import StoreError
from pgbenchlab.plan import Plan
from pgbenchlab.store import Store
from pgbenchlab.telemetry import machine_facts


def open_campaign(
    store: Store, plan: Plan, pgbench: PgbenchClient, *, fresh: bool
) -> tuple[int, set[str]]:
    """Continue the campaign of the same name (same plan), or start a new one: its id and the
    run keys already complete."""
    existing = store.find_campaign(plan.name)
    redacted = plan.stored_text
    if existing is not None and not fresh:
        if existing.plan_digest != plan.digest:
            old_files = existing.files
            raise StoreError(
                f'campaign "{plan.name}" in this results database was run with a different plan '
                f"({plan_difference(existing.plan_text, redacted, old_files, plan.files)})"
                "; run with --fresh to start it anew (earlier results are kept) or rename the "
                "campaign",
            )
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
