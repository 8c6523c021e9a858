"""A run's matrix cell as a record: what the plan expands into (`RunSpec.cell`), what a run
result carries and the store keeps as ``spec_json``, and what the store's readers give back.

`stored` is the JSON the store writes and the cell's identity is computed from: an option left
at pgbench's default is left out of it (so cell ids of plans written before the option existed
stay the same); `from_stored` reads it back, from any schema the store migrates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_TRIES = 1  # pgbench's own default: failed transactions are not retried
DEFAULT_CONNECTION = "socket"
PROFILED_EXTRA = "extra"  # a spec's profile: the extra repeat `auto` adds

Pairs = tuple[tuple[str, str], ...]


def _pairs(stored: Mapping[str, Any] | None) -> Pairs:
    return tuple(sorted((str(k), str(v)) for k, v in (stored or {}).items()))


@dataclass(frozen=True)
class RunCell:
    """Every option of a run's cell, and whether the run was profiled."""

    server: str
    server_settings: Pairs  # sorted by name, as are the kernel tunables
    scale: int
    workload: str
    clients: int
    duration_s: int | None
    transactions: int | None  # per client (-t)
    warmup_s: int
    protocol: str
    threads: int
    rate: float | None
    latency_limit_ms: float | None
    connect: bool
    vacuum: str
    checkpoint: bool
    latency_log: str
    max_tries: int = DEFAULT_MAX_TRIES
    connection: str = DEFAULT_CONNECTION
    sysctl: Pairs = ()  # kernel tunables set for the run's cell
    profile: str | None = None  # "on" or PROFILED_EXTRA for a profiled run; None: not profiled
    count: str | None = None  # "instructions": a counted run (callgrind); None: a timed one

    def stored(self) -> dict[str, Any]:
        """The cell as JSON: options at pgbench's default and an unprofiled run's profile
        left out, as cells were written before those options existed."""
        found: dict[str, Any] = {
            "server": self.server,
            "server_settings": dict(self.server_settings),
            "scale": self.scale,
            "workload": self.workload,
            "clients": self.clients,
            "duration_s": self.duration_s,
            "transactions": self.transactions,
            "warmup_s": self.warmup_s,
            "protocol": self.protocol,
            "threads": self.threads,
            "rate": self.rate,
            "latency_limit_ms": self.latency_limit_ms,
            "connect": self.connect,
            "vacuum": self.vacuum,
            "checkpoint": self.checkpoint,
            "latency_log": self.latency_log,
        }
        if self.max_tries != DEFAULT_MAX_TRIES:
            found["max_tries"] = self.max_tries
        if self.connection != DEFAULT_CONNECTION:
            found["connection"] = self.connection
        if self.sysctl:
            found["sysctl"] = dict(self.sysctl)
        if self.profile is not None:
            found["profile"] = self.profile
        if self.count is not None:
            found["count"] = self.count
        return found

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> RunCell:
        """The cell `stored` wrote (options a run stored before they existed at their default)."""
        return cls(
            server=str(stored["server"]),
            server_settings=_pairs(stored.get("server_settings")),
            scale=stored["scale"],
            workload=str(stored["workload"]),
            clients=stored["clients"],
            duration_s=stored.get("duration_s"),
            transactions=stored.get("transactions"),
            warmup_s=stored.get("warmup_s", 0),
            protocol=str(stored["protocol"]),
            threads=stored["threads"],
            rate=stored.get("rate"),  # as stored: 1000 stays an int, as in the cell's identity
            latency_limit_ms=stored.get("latency_limit_ms"),
            connect=bool(stored.get("connect", False)),
            vacuum=str(stored.get("vacuum", "pgbench")),
            checkpoint=bool(stored.get("checkpoint", True)),
            latency_log=str(stored.get("latency_log", "auto")),
            max_tries=stored.get("max_tries", DEFAULT_MAX_TRIES),
            connection=str(stored.get("connection", DEFAULT_CONNECTION)),
            sysctl=_pairs(stored.get("sysctl")),
            profile=stored.get("profile"),
            count=stored.get("count"),
        )
