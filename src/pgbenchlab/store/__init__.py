"""The results database: its schema and migrations, the one registry of a run's columns, and
every query of it. Nothing else in pgbenchlab writes SQL for results.db.

`database.Store` opens, migrates, locks and writes; `reading` answers with the frozen records
of `records`; `columns` describes the `runs` table; `telemetry` writes the telemetry tables;
`imports` writes an imported campaign and the files it was read from; `side_tables` the small
tables beside a campaign's runs (poolers, noise floors, the plans a campaign ran under before
test sets were added); `faults` turns the
environment's faults (full disk, lock, damage) into one-line errors; `merge` joins databases
into a new one, every table carried.
May import: errors, files (safe paths), redaction, plan (axis orders), results, server (its
facts), telemetry's records and analysis.diagnosis (what it stores); never report, runner or
cli.
"""

from pgbenchlab.store.backfills import BACKFILLS
from pgbenchlab.store.columns import RUN_COLUMNS, RunColumn, run_as_dict
from pgbenchlab.store.database import Store
from pgbenchlab.store.records import (
    BUILD_FLOOR,
    RESTART_FLOOR,
    RUN_FLOOR,
    BisectionRecord,
    CampaignRecord,
    CampaignSummary,
    DatasetRecord,
    FollowCommit,
    ImportedCampaign,
    ImportedFile,
    ImportedServer,
    JoinedSets,
    NoiseFloor,
    PlanChange,
    ProbeRecord,
    RunDiagnosis,
    RunEvent,
    RunRecord,
    RunTelemetryFacts,
    RunValue,
    ServerRecord,
    ServerStorage,
    WaitEvents,
    artifact_parts,
    run_artifacts,
)
from pgbenchlab.store.schema import MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "BACKFILLS",
    "BUILD_FLOOR",
    "MIGRATIONS",
    "RESTART_FLOOR",
    "RUN_COLUMNS",
    "RUN_FLOOR",
    "SCHEMA_VERSION",
    "BisectionRecord",
    "CampaignRecord",
    "CampaignSummary",
    "DatasetRecord",
    "FollowCommit",
    "ImportedCampaign",
    "ImportedFile",
    "ImportedServer",
    "JoinedSets",
    "NoiseFloor",
    "PlanChange",
    "ProbeRecord",
    "RunColumn",
    "RunDiagnosis",
    "RunEvent",
    "RunRecord",
    "RunTelemetryFacts",
    "RunValue",
    "ServerRecord",
    "ServerStorage",
    "Store",
    "WaitEvents",
    "artifact_parts",
    "run_artifacts",
    "run_as_dict",
]
