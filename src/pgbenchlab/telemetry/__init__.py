"""Telemetry: what the machine, the server and the OS were and did during each run.

`machine` holds the facts recorded once (machine, storage, pg_config), `capture` the sampler
beside pgbench (`samples`: the figures derived from its samples), `campaign` what a campaign
does once per server (facts, pg_test_fsync) and per run (capture, diagnosis inputs). The
per-run records themselves are `records.telemetry`.
"""

from pgbenchlab.telemetry.machine import machine_facts, storage_facts

__all__ = ["machine_facts", "storage_facts"]
