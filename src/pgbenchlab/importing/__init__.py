"""Results made elsewhere, imported as campaigns (`pgbenchlab import`): a directory of pgbench
outputs and -l logs as shell loops leave them (`outputs`, through `scan`, `axes` and `logs`),
and pgbench-tools' results database (`pgbench_tools`).

An imported campaign has the status ``imported``, the files it was read from with their
SHA-256 (`Store.imported_files`) and each run's output kept as a run's stdout is; the report,
`runs`, `show` and `compare` read it as any campaign. Every file is read before the results
database is opened: a bad directory or pattern changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import zstandard

from pgbenchlab import files
from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.errors import UserError
from pgbenchlab.importing.axes import AxisMap
from pgbenchlab.importing.outputs import KEPT_OUTPUT, Imported, read_outputs
from pgbenchlab.importing.pgbench_tools import read_pgbench_tools
from pgbenchlab.store import ImportedCampaign, ImportedFile, Store, artifact_parts
from pgbenchlab.store.faults import results_writes

__all__ = ["AxisMap", "ImportOutcome", "import_outputs", "import_pgbench_tools"]


@dataclass(frozen=True)
class ImportOutcome:
    """What an import did: the campaign stored, or the one that already held these files."""

    campaign: ImportedCampaign
    campaign_id: int | None  # None: nothing was done (`already`)
    already: str | None = None  # the campaign of the same files and pattern
    files: tuple[ImportedFile, ...] = ()  # as stored

    @property
    def unread(self) -> tuple[ImportedFile, ...]:
        return tuple(f for f in self.files if f.role == "unread")


def import_outputs(results: Path, root: Path, axis_map: AxisMap, name: str) -> ImportOutcome:
    """Read the directory and store it as campaign `name` in the results directory; a no-op
    when the same files were imported with the same pattern before; refused when `name` is
    another campaign's."""
    found = read_outputs(root, axis_map, name)
    campaign = found.campaign
    with Store(results / RESULTS_DB) as store:
        already = store.imported_as(campaign.digest)
        if already is not None:
            return ImportOutcome(campaign, None, already)
        if store.find_campaign(name) is not None:
            raise UserError(
                f'a campaign "{name}" is already in {store.path}: give the import another '
                "name with --name"
            )
        store.acquire()
        campaign_id = store.record_import(campaign)
        keep_outputs(results, campaign_id, found)
        return ImportOutcome(campaign, campaign_id, None, store.imported_files(campaign_id))


def import_pgbench_tools(results: Path, conninfo: str, duration_s: int) -> list[ImportOutcome]:
    """Every test set of a pgbench-tools results database as a campaign; a set imported before
    (the same tests) is left as it is; nothing is stored when a set's name is another
    campaign's."""
    found = read_pgbench_tools(conninfo, duration_s)
    with Store(results / RESULTS_DB) as store:
        outcomes = [ImportOutcome(c, None, store.imported_as(c.digest)) for c in found]
        for outcome in outcomes:
            if outcome.already is None and store.find_campaign(outcome.campaign.name):
                raise UserError(
                    f'a campaign "{outcome.campaign.name}" is already in {store.path}, from '
                    "other tests: import into another --results directory"
                )
        store.acquire()
        stored = []
        for outcome in outcomes:
            if outcome.already is not None:
                stored.append(outcome)
                continue
            campaign_id = store.record_import(outcome.campaign)
            files = store.imported_files(campaign_id)
            stored.append(ImportOutcome(outcome.campaign, campaign_id, None, files))
        return stored


def keep_outputs(results_dir: Path, campaign_id: int, found: Imported) -> None:
    """Each run's output, kept where a run's stdout is (`show` prints it as pgbench did)."""
    compressor = zstandard.ZstdCompressor(level=3)
    for run, text in zip(found.campaign.runs, found.texts, strict=True):
        parts = artifact_parts(found.campaign.name, campaign_id, run.sequence, run.run_key)
        path = files.inside(results_dir, *parts)
        with results_writes(path):
            path.mkdir(parents=True, exist_ok=True)
            (path / KEPT_OUTPUT).write_bytes(compressor.compress(text.encode()))
