"""One campaign on several machines: where each run was made (`run_origin`), and the results
directories of the machines that ran a plan's shards (`run --shard K/N`) joined into a new one
(`merge_results`), whose campaigns read as if one machine had run them.

The latest campaign of a name in each input becomes one campaign; the runs keep their origin
(machine and shard) and their hosts. A merge is refused, with one line and nothing written, when
an input's schema version is not this pgbenchlab's, a campaign name was run with different
plans, a run is in two inputs (a shard merged twice, or run on two machines), or a bisection
of one name differs between inputs.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.campaign.layout import RESULTS_DB
from pgbenchlab.campaign.resume import plan_difference
from pgbenchlab.errors import StoreError
from pgbenchlab.plan import Plan
from pgbenchlab.results import RunOrigin
from pgbenchlab.store import SCHEMA_VERSION
from pgbenchlab.store import merge as store_merge
from pgbenchlab.store.faults import results_writes
from pgbenchlab.store.merge import Moved, Source, SourceCampaign


def run_origin(plan: Plan) -> RunOrigin:
    """This machine, and the plan's shard when it runs one."""
    return RunOrigin(socket.gethostname(), None if plan.shard is None else str(plan.shard))


@dataclass(frozen=True)
class MergedCampaign:
    name: str
    inputs: int  # how many inputs held it
    runs: int  # run keys (no two inputs share one)


def merge_results(out_dir: Path, inputs: Sequence[Path]) -> list[MergedCampaign]:
    """Write a new results directory joining the inputs (results directories or databases)."""
    sources = _sources(inputs)
    joined = _joined_campaigns(sources)
    differing = store_merge.differing_named(sources)
    if differing:
        raise StoreError(f"{differing[0]} differs between the inputs: merge them separately")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise StoreError(
            f"{out_dir} is not an empty directory: merge writes a new results directory "
            "(give an existing one as an input)"
        )
    _write_results(out_dir, sources, joined)
    return [
        MergedCampaign(name, len(parts), sum(len(p.run_keys) for p in parts))
        for name, parts in joined.items()
    ]


def _write_results(
    out_dir: Path, sources: Sequence[Source], joined: dict[str, list[SourceCampaign]]
) -> None:
    """The database (renamed into place last) and the archived outputs; nothing is left of
    them when writing fails."""
    created = not out_dir.exists()
    temporary = out_dir / f".{RESULTS_DB}.merging"
    try:
        with results_writes(out_dir, running=False):
            out_dir.mkdir(parents=True, exist_ok=True)
            moved = store_merge.write(temporary, sources, joined)
            _carry_artifacts(moved, out_dir)
            os.replace(temporary, out_dir / RESULTS_DB)
    except BaseException:
        shutil.rmtree(out_dir if created else out_dir / "artifacts", ignore_errors=True)
        for leftover in out_dir.glob(f".{RESULTS_DB}.merging*"):
            leftover.unlink()
        raise


def _sources(inputs: Sequence[Path]) -> list[Source]:
    """What each input holds: each given once, at this pgbenchlab's schema version."""
    databases = [_database(p) for p in inputs]
    for index, database in enumerate(databases):
        if database.resolve() in (d.resolve() for d in databases[:index]):
            raise StoreError(f"{database} is given twice: merge each input once")
    sources = [store_merge.inspect(d) for d in databases]
    _check_schemas(sources)
    return sources


def _database(path: Path) -> Path:
    return path / RESULTS_DB if path.is_dir() else path


def _check_schemas(sources: Sequence[Source]) -> None:
    for source in sources:
        if source.schema > SCHEMA_VERSION:
            raise StoreError(
                f"{source.path} has results schema {source.schema}, newer than this pgbenchlab's "
                f"({SCHEMA_VERSION}): merge with the newer pgbenchlab"
            )
        if source.schema < SCHEMA_VERSION:
            raise StoreError(
                f"{source.path} has results schema {source.schema}, this pgbenchlab writes "
                f"{SCHEMA_VERSION}: bring it up to date first (`pgbenchlab campaigns --results "
                f"{source.path.parent}` migrates it), then merge"
            )


def _joined_campaigns(sources: Sequence[Source]) -> dict[str, list[SourceCampaign]]:
    """The latest campaign of each name in each input, by name; refused when two of a name were
    run with different plans or share a run."""
    parts: dict[str, list[tuple[Path, SourceCampaign]]] = {}
    for source in sources:
        for campaign in source.campaigns:
            if campaign.latest:
                parts.setdefault(campaign.name, []).append((source.path, campaign))
    for name, found in parts.items():
        first_path, first = found[0]
        seen = {key: first_path for key in first.run_keys}
        for path, campaign in found[1:]:
            if campaign.row["plan_digest"] != first.row["plan_digest"]:
                raise StoreError(
                    f'campaign "{name}" was run with different plans in {first_path} and {path} '
                    f"({_difference(first, campaign)}): merge only the shards of one plan"
                )
            _check_versions(name, first_path, first, path, campaign)
            shared = sorted(k for k in campaign.run_keys if k in seen)
            if shared:
                raise StoreError(
                    f'campaign "{name}": {len(shared)} run(s) are in both {seen[shared[0]]} and '
                    f"{path} (run {shared[0]}): each shard's results may be merged once"
                )
            seen.update(dict.fromkeys(campaign.run_keys, path))
    return {name: [c for _, c in found] for name, found in parts.items()}


def _check_versions(
    name: str, first_path: Path, first: SourceCampaign, path: Path, other: SourceCampaign
) -> None:
    """Shards of one plan ran the same servers: a server's version may not differ (its other
    facts, such as storage, are the first input's)."""
    for server, version in other.server_versions.items():
        found = first.server_versions.get(server, version)
        if found != version:
            raise StoreError(
                f'campaign "{name}": server {server} ran PostgreSQL {found} in {first_path} and '
                f"{version} in {path}: merge only shards whose servers ran the same versions"
            )


def _difference(first: SourceCampaign, other: SourceCampaign) -> str:
    return plan_difference(
        str(first.row["plan_text"]),
        str(other.row["plan_text"]),
        store_merge.stored_files(first.row),
        store_merge.stored_files(other.row),
    )


def _carry_artifacts(moved: Sequence[Moved], out_dir: Path) -> None:
    """Each campaign's archived run files under its new id (hard links where the file system
    allows: archives are never rewritten, a rerun replaces its directory)."""
    for campaign in moved:
        if campaign.old_artifacts.is_dir():
            shutil.copytree(
                campaign.old_artifacts,
                campaign.new_artifacts(out_dir),
                copy_function=_link_or_copy,
                dirs_exist_ok=True,
            )


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
