"""The one cell-matching rule `compare` and the report share, on hand-made cells."""

from __future__ import annotations

from dataclasses import dataclass

from pgbenchlab.analysis.cells import (
    Dims,
    Matched,
    cell_label,
    match_cells,
    match_key,
    varying_axes,
)


@dataclass(frozen=True)
class Cell:
    name: str
    dims: Dims


def cell(name: str, **axes: str) -> Cell:
    return Cell(name, tuple(axes.items()))


def dims(c: Cell) -> Dims:
    return c.dims


def names(found: list[Matched[Cell]]) -> list[tuple[str, str]]:
    return [(m.baseline.name, m.candidate.name) for m in found]


PG15 = [
    cell("a1", server="pg15", scale="10", clients="1"),
    cell("a8", server="pg15", scale="10", clients="8"),
    cell("a100", server="pg15", scale="100", clients="8"),
]
PG18 = [
    cell("b8", server="pg18", scale="10", clients="8"),
    cell("b1", server="pg18", scale="10", clients="1"),
    cell("b32", server="pg18", scale="10", clients="32"),  # no pg15 counterpart
]


def test_servers_match_on_every_other_axis_in_the_candidate_order() -> None:
    found = match_cells(PG15, PG18, dims, ignore=("server",))
    assert names(found) == [("a8", "b8"), ("a1", "b1")]
    assert found[0].key == (("scale", "10"), ("clients", "8"))


def test_without_ignoring_the_server_different_servers_never_match() -> None:
    assert match_cells(PG15, PG18, dims) == []
    same = [cell("c8", server="pg15", scale="10", clients="8")]
    assert names(match_cells(PG15, same, dims)) == [("a8", "c8")]


def test_a_cell_missing_on_either_side_is_left_out() -> None:
    assert match_cells([], PG18, dims, ignore=("server",)) == []
    assert match_cells(PG15, [], dims, ignore=("server",)) == []
    found = match_cells(PG18, PG15, dims, ignore=("server",))
    assert names(found) == [("b1", "a1"), ("b8", "a8")]  # a100: no scale 100 on pg18


def test_an_axis_only_one_side_has_keeps_the_cells_apart() -> None:
    with_options = [cell("o8", server="pg18", scale="10", clients="8", options="-N")]
    assert match_cells(PG15, with_options, dims, ignore=("server",)) == []
    assert names(match_cells(PG15, with_options, dims, ignore=("server", "options"))) == [
        ("a8", "o8")
    ]


def test_the_key_keeps_the_cells_axis_order() -> None:
    assert match_key((("server", "x"), ("b", "1"), ("a", "2")), ("server",)) == (
        ("b", "1"),
        ("a", "2"),
    )


def test_should_two_baseline_cells_share_a_key_the_later_one_is_used() -> None:
    twins = [cell("first", server="s", clients="1"), cell("second", server="t", clients="1")]
    found = match_cells(twins, [cell("c", server="u", clients="1")], dims, ignore=("server",))
    assert names(found) == [("second", "c")]


def test_labels_name_only_the_axes_that_vary() -> None:
    keys = [match_key(c.dims, ("server",)) for c in PG15]
    varying = varying_axes(keys)
    assert varying == {"scale", "clients"}
    assert cell_label(keys[0], varying) == "scale=10, clients=1"
    assert cell_label(keys[0], varying_axes(keys[:1])) == "all"
    assert varying_axes([]) == set()
