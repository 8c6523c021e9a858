"""The metrics runs are compared on: every run column whose registry entry says which way is
better (`RunColumn.better`). `compare --metric`, `bisect --metric`, the change points and
`repeats = "auto"` with `decide` all take their metrics from here, so a column added to the
registry with a direction is a metric everywhere.

A metric's name is its column's without the ``_ms`` suffix (``p99`` for ``p99_ms``); the
column's own name is accepted too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pgbenchlab.errors import UserError
from pgbenchlab.store.columns import HIGHER, RUN_COLUMNS, RunColumn

# The metrics compared when none is named: what `compare` and the report have always shown.
DEFAULT_METRICS = ("tps", "p99", "p50")
# Shorter labels than the names, where the tables have always printed them.
_LABELS = {"tps": "TPS", "p50": "p50 latency", "p99": "p99 latency"}
WORK_UNITS = frozenset({"instructions", "bytes", "blocks"})


@dataclass(frozen=True)
class Metric:
    name: str
    column: str  # the run column's key: RunRecord[column], RunView.figures[name]
    label: str
    unit: str
    higher_is_better: bool

    @property
    def counts_work(self) -> bool:
        """A count of the work done (instructions, WAL bytes, buffers): the same under a CPU
        simulator, where times, rates and cycles are the simulator's."""
        return self.unit in WORK_UNITS

    def format(self, value: float) -> str:
        """A value as the tables print it."""
        if self.name == "tps":
            return f"{value:,.0f}"
        if self.unit == "ms":
            return f"{value:.3f} ms"
        return f"{value:,.4g} {self.unit}".rstrip()


def _metric(column: RunColumn) -> Metric:
    name = column.key.removesuffix("_ms")
    label = _LABELS.get(name, name)
    return Metric(name, column.key, label, column.unit, column.better == HIGHER)


METRICS: dict[str, Metric] = {m.name: m for m in (_metric(c) for c in RUN_COLUMNS if c.better)}
_BY_COLUMN = {m.column: m for m in METRICS.values()}


def metric(name: str) -> Metric:
    """The metric called ``name`` (or its column's name); a user error naming the choices."""
    found = METRICS.get(name.strip()) or _BY_COLUMN.get(name.strip())
    if found is None:
        raise UserError(f"no metric {name.strip()!r}; metrics: {', '.join(METRICS)}")
    return found


def metrics(names: Iterable[str]) -> tuple[Metric, ...]:
    """The metrics named, each name alone or a comma list ("tps,p99"), in order, once each."""
    wanted = [part for name in names for part in name.split(",") if part.strip()]
    return tuple({m.name: m for m in map(metric, wanted)}.values())


def figures(asked: Sequence[Metric], values: Sequence[Any]) -> tuple[tuple[str, float], ...]:
    """(name, value) of the metrics that have a value, in order."""
    return tuple((m.name, float(v)) for m, v in zip(asked, values, strict=True) if v is not None)
