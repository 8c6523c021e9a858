"""How each of a run's columns is read from its result (`columns.RUN_COLUMNS` names them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pgbenchlab.records.cell import Pairs, RunCell
from pgbenchlab.records.costs import GROUP_NOTE, RunCosts, per_transaction
from pgbenchlab.redaction import redact_settings
from pgbenchlab.results import LatencySummary, RunResult


def spec_field(name: str) -> Callable[[RunResult], Any]:
    return lambda r: getattr(r.spec, name)


def latency(read: Callable[[LatencySummary], Any]) -> Callable[[RunResult], Any]:
    return lambda r: read(r.latency) if r.latency is not None else None


def percentile(p: str) -> Callable[[RunResult], Any]:
    return latency(lambda lat: lat.percentiles_ms.get(p))


def service(p: str) -> Callable[[RunResult], Any]:
    return latency(lambda lat: (lat.service_percentiles_ms or {}).get(p))


def lag(p: str) -> Callable[[RunResult], Any]:
    return latency(lambda lat: (lat.lag_percentiles_ms or {}).get(p))


def stored_cell(r: RunResult) -> RunCell:
    """The run's cell as stored: its server settings masked."""
    return replace(r.spec, server_settings=masked(r.spec.server_settings))


def masked(settings: Pairs) -> Pairs:
    return tuple(redact_settings(dict(settings)).items())


def attr(name: str) -> Callable[[RunResult], Any]:
    return lambda r: getattr(r, name)


def tls(index: int) -> Callable[[RunResult], Any]:
    def read(r: RunResult) -> str | None:
        if r.telemetry is None:
            return None
        return (r.telemetry.tls_protocol, r.telemetry.tls_cipher)[index]

    return read


def run_costs(r: RunResult) -> RunCosts:
    """What the run's server spent (`telemetry.costs`), or a record saying why nothing."""
    if r.servers:
        return RunCosts(notes={"costs": GROUP_NOTE})
    if r.telemetry is None or r.telemetry.costs is None:
        return RunCosts(notes={"costs": "no telemetry was captured"})
    return r.telemetry.costs


def per_tx(figure: str, unit: str) -> Callable[[RunResult], Any]:
    """A run's cost per committed transaction (None: not measured, or no transaction); CPU
    seconds in µs."""
    scale = 1e6 if unit == "µs" else 1.0
    return lambda r: per_transaction(getattr(run_costs(r), figure), r.transactions, scale)


def instructions_per_tx(r: RunResult) -> float | None:
    """Counted by callgrind (count = "instructions"), else by perf stat where the host has
    hardware counters (`telemetry.costs`), else None."""
    if r.instructions_per_tx is not None:
        return r.instructions_per_tx
    return per_transaction(run_costs(r).instructions, r.transactions, 1.0)


def instructions_tool(r: RunResult) -> str | None:
    if r.instructions_tool is not None:
        return r.instructions_tool
    return "perf stat" if run_costs(r).instructions is not None else None
