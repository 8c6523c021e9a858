"""Matrix cells matched across two selections: the one rule `compare` and the report share.

A cell is known here only by its dims: (axis, value) pairs, every axis of the matrix. Two cells
match when they agree on every axis but the ignored ones (the server, when servers are
compared). Pure functions, so the rule is tested on hand-made cells.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Dims = tuple[tuple[str, str], ...]
Cell = TypeVar("Cell")


@dataclass(frozen=True)
class Matched(Generic[Cell]):
    """A candidate cell with the baseline cell it is compared with."""

    key: Dims  # the axes they agree on: every axis but the ignored ones, in the cell's order
    baseline: Cell
    candidate: Cell


def match_key(dims: Dims, ignore: Collection[str]) -> Dims:
    return tuple(d for d in dims if d[0] not in ignore)


def match_cells(
    baseline: Iterable[Cell],
    candidate: Iterable[Cell],
    dims: Callable[[Cell], Dims],
    ignore: Collection[str] = (),
) -> list[Matched[Cell]]:
    """Every candidate cell (in its order) that has a baseline cell with the same key.

    Cells without a counterpart are left out. Within a selection, cells have distinct keys
    (the matrix's axes tell its cells apart); should two share one, the later baseline wins.
    """
    index = {match_key(dims(cell), ignore): cell for cell in baseline}
    found = []
    for cell in candidate:
        key = match_key(dims(cell), ignore)
        if key in index:
            found.append(Matched(key, index[key], cell))
    return found


def varying_axes(keys: Sequence[Dims]) -> set[str]:
    """The axes whose value differs between cells: the ones worth naming in a label."""
    values: dict[str, set[str]] = {}
    for key in keys:
        for axis, value in key:
            values.setdefault(axis, set()).add(value)
    return {axis for axis, seen in values.items() if len(seen) > 1}


def cell_label(key: Dims, varying: Collection[str]) -> str:
    """A cell named by the axes that vary ("all" when none does)."""
    return ", ".join(f"{k}={v}" for k, v in key if k in varying) or "all"
