"""What the diagnosis rules read of a run itself (`diagnosing`), as a record and as JSON.

A single server's run is stored whole (its figures, series, load generators and telemetry in
their tables), so the store rebuilds this record from them; a group member's run as its own
(`campaign.together.as_member`) exists nowhere else, so its part keeps this record as JSON
(`stored`), and a change of the rules judges the member again from it (`from_stored`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgbenchlab.records.telemetry import RunTelemetry


@dataclass(frozen=True)
class ObservedRun:
    """What the rules read of the run itself: its TPS and per-second TPS (second t covers
    (t − 1, t]), whether a rate (-R) set its pace, its clients, its load generators (host,
    share of its usable CPUs it wanted, those CPUs) and its telemetry."""

    tps: float | None
    seconds: tuple[tuple[int, float], ...]
    rate_limited: bool
    clients: int | None
    generators: tuple[tuple[str, float | None, int], ...]
    telemetry: RunTelemetry | None

    def stored(self) -> dict[str, Any]:
        return {
            "tps": self.tps,
            "seconds": [list(s) for s in self.seconds],
            "rate_limited": self.rate_limited,
            "clients": self.clients,
            "generators": [list(g) for g in self.generators],
            "telemetry": None if self.telemetry is None else self.telemetry.stored(),
        }

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> ObservedRun:
        telemetry = stored["telemetry"]
        return cls(
            stored["tps"],
            tuple((int(t), float(tps)) for t, tps in stored["seconds"]),
            bool(stored["rate_limited"]),
            stored["clients"],
            tuple((str(h), busy, int(cpus)) for h, busy, cpus in stored["generators"]),
            None if telemetry is None else RunTelemetry.from_stored(telemetry),
        )
