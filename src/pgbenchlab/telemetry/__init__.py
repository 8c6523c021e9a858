"""Telemetry: what the machine, the server and the OS were and did during each run.

`machine` holds the facts recorded once (machine, storage, pg_config), `records` the
immutable per-run records, `capture` the sampler beside pgbench, `campaign` what a campaign
does once per server (facts, pg_test_fsync) and per run (capture, diagnosis inputs).
"""

from pgbenchlab.telemetry.machine import machine_facts, storage_facts
from pgbenchlab.telemetry.records import (
    LogEvent,
    Point,
    RunTelemetry,
    SourceStatus,
    Statement,
    Total,
    WaitCount,
)

__all__ = [
    "LogEvent",
    "Point",
    "RunTelemetry",
    "SourceStatus",
    "Statement",
    "Total",
    "WaitCount",
    "machine_facts",
    "storage_facts",
]
