"""One campaign on several machines: where each run was made (`run_origin`), and the results
directories of the machines that ran a plan's shards (`run --shard K/N`) joined into a new one
(`merge_results`), whose campaigns read as if one machine had run them.

The latest campaign of a name in each input becomes one campaign; the runs keep their origin
(machine and shard) and their hosts. A campaign lacking some of its plan's shards is stored as
incomplete, naming them. Shards of a plan that grew (test sets added to it on some machines:
`run` joins them to the campaign) merge under the grown plan, incomplete by the new sets' runs
in the shards that ran the plan before it grew. A merge is refused, with one line and nothing
written, when an input's schema version is not this pgbenchlab's, a campaign name was run with
different plans (neither grown from the other), a run
is in two inputs (a shard merged twice, or run on two machines), shards of different counts
meet (2/2 and 1/3), or a bisection of one name differs between inputs.

An input is data from another machine: every stored name that may become a path (campaign,
server and bisection names, run keys) must be a plain name, as a plan's are, and its archives
may hold only directories and regular files inside it (no link leading out, no pipe to hang
the copy).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import files
from pgbenchlab.campaign.layout import RESULTS_DB
from pgbenchlab.campaign.resume import grown_by, plan_difference
from pgbenchlab.errors import StoreError
from pgbenchlab.plan import MAX_RUNS, Plan, Shard, missing_shards, shard_of
from pgbenchlab.results import RunOrigin
from pgbenchlab.store import SCHEMA_VERSION
from pgbenchlab.store import merge as store_merge
from pgbenchlab.store.faults import results_writes
from pgbenchlab.store.merge import Joined, Moved, Source, SourceCampaign
from pgbenchlab.store.records import campaign_artifacts

NOT_OURS = "merge only results directories pgbenchlab wrote"
Part = tuple[Path, SourceCampaign]  # an input and a campaign of it


def run_origin(plan: Plan) -> RunOrigin:
    """This machine, and the plan's shard when it runs one."""
    return RunOrigin(socket.gethostname(), None if plan.shard is None else str(plan.shard))


@dataclass(frozen=True)
class MergedCampaign:
    name: str
    inputs: int  # how many inputs held it
    runs: int  # run keys (no two inputs share one)
    missing: tuple[str, ...] = ()  # shards of its plan no input held ("2/3"): incomplete


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
        MergedCampaign(name, len(j.parts), sum(len(p.run_keys) for p in j.parts), j.missing)
        for name, j in joined.items()
    ]


def _write_results(out_dir: Path, sources: Sequence[Source], joined: dict[str, Joined]) -> None:
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
    for source in sources:
        _check_names(source, "bisection name", [name for _, name in source.named])
        for campaign in source.campaigns:
            _check_names(source, "campaign name", [campaign.name])
            _check_names(source, "run key", sorted(campaign.run_keys))
            _check_names(source, "server name", sorted(campaign.server_names))
            _check_archive(source, campaign)
    return sources


def _check_names(source: Source, what: str, names: Sequence[str]) -> None:
    """Stored names that become paths: plain names, as a plan's (`files.PLAIN_NAME`)."""
    bad = next((n for n in names if not files.is_plain_name(n)), None)
    if bad is not None:
        raise StoreError(
            f"{source.path}: {what} {bad!r} is no plain name (a letter or digit, then letters, "
            f"digits, '.', '_' or '-'): {NOT_OURS}"
        )


def _check_archive(source: Source, campaign: SourceCampaign) -> None:
    """A campaign's archived run files: inside the input, only directories and regular files
    (a link would have the copy read outside it, a named pipe would hang it)."""
    root = source.path.parent
    kept = campaign_artifacts(root, campaign.name, campaign.id)
    if kept is None:
        raise StoreError(
            f'{root}: the archive of campaign "{campaign.name}" leads out of the results '
            f"directory (a symbolic link on the way): {NOT_OURS}"
        )
    for directory, subdirectories, names in os.walk(kept):  # links are not followed
        for name in subdirectories + names:
            path = Path(directory, name)
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise StoreError(f"{path} is a symbolic link, never archived: {NOT_OURS}")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise StoreError(f"{path} is not a regular file or directory: {NOT_OURS}")


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


def _joined_campaigns(sources: Sequence[Source]) -> dict[str, Joined]:
    """The latest campaign of each name in each input, by name, with the shards none holds;
    refused when two of a name were run with different plans, share a run, or are shards of
    different counts."""
    parts: dict[str, list[Part]] = {}
    for source in sources:
        for campaign in source.campaigns:
            if campaign.latest:
                parts.setdefault(campaign.name, []).append((source.path, campaign))
    lacking: dict[str, tuple[str, ...]] = {}
    for name in parts:
        parts[name], lacking[name] = _grown_first(name, parts[name])
    for name, found in parts.items():
        first_path, first = found[0]
        seen = {key: first_path for key in first.run_keys}
        for path, campaign in found[1:]:
            _check_versions(name, first_path, first, path, campaign)
            shared = sorted(k for k in campaign.run_keys if k in seen)
            if shared:
                raise StoreError(
                    f'campaign "{name}": {len(shared)} run(s) are in both {seen[shared[0]]} and '
                    f"{path} (run {shared[0]}): each shard's results may be merged once"
                )
            seen.update(dict.fromkeys(campaign.run_keys, path))
    return {
        name: Joined(tuple(c for _, c in found), _missing(name, found) + lacking[name])
        for name, found in parts.items()
    }


def _grown_first(name: str, found: list[Part]) -> tuple[list[Part], tuple[str, ...]]:
    """The parts, the one whose plan every other part's plan is (or grew into) first, and
    what the parts run before the plan grew lack ("2/2 of test set fast"); refused when two
    parts' plans differ otherwise."""
    digests = {c.row["plan_digest"] for _, c in found}
    if len(digests) == 1:
        return found, ()
    for path, grown in found:
        older = [
            (c, grown_by(c.row["plan_text"], store_merge.stored_files(c.row),
                         grown.row["plan_text"], store_merge.stored_files(grown.row)))
            for _, c in found if c.row["plan_digest"] != grown.row["plan_digest"]
        ]  # fmt: skip
        if all(sets for _, sets in older):
            lacks = tuple(
                f"{shard or '1/1'} of test set(s) {', '.join(sets)}"
                for c, sets in older for shard in sorted(c.shards, key=str)
            )  # fmt: skip
            return [(path, grown), *(p for p in found if p[1] is not grown)], lacks
    (first_path, first), (path, other) = (
        found[0],
        next(p for p in found if p[1].row["plan_digest"] != found[0][1].row["plan_digest"]),
    )
    raise StoreError(
        f'campaign "{name}" was run with different plans in {first_path} and {path} '
        f"({_difference(first, other)}): merge only the shards of one plan, or of a plan and "
        "that plan with test sets added"
    )


def _missing(name: str, found: Sequence[tuple[Path, SourceCampaign]]) -> tuple[str, ...]:
    """The shards of the plan that no part's runs were made in ("2/3"); refused when the runs
    are of shards of different counts (a run made unsharded is of the one shard 1/1)."""
    present: dict[Shard, Path] = {}
    for path, campaign in found:
        for text in campaign.shards:
            shard = Shard(1, 1) if text is None else shard_of(text)
            if shard is None or shard.count > MAX_RUNS:
                raise StoreError(
                    f'{path}: campaign "{name}" has a run of shard {text!r}: {NOT_OURS}'
                )
            present.setdefault(shard, path)
    first, *others = present or [Shard(1, 1)]
    other = next((s for s in others if s.count != first.count), None)
    if other is not None:
        raise StoreError(
            f'campaign "{name}": shard {first} in {present[first]} and shard {other} in '
            f"{present[other]} are shards of different counts ({first.count} and "
            f"{other.count} machines): merge the shards of one --shard K/N"
        )
    return tuple(str(s) for s in missing_shards(present.keys()))


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
        old, new = campaign.old_artifacts, campaign.new_artifacts(out_dir)
        assert old is not None and new is not None  # names and links checked (`_sources`)
        if old.is_dir():
            shutil.copytree(
                old, new, symlinks=True, copy_function=_link_or_copy, dirs_exist_ok=True
            )


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
