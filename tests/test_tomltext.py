"""The one TOML writer: whatever it writes, TOML reads back as the same data."""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pgbenchlab import tomltext

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
SCALARS = st.one_of(
    TEXT,
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)


@given(TEXT)
def test_a_string_reads_back_as_itself(text: str) -> None:
    assert tomllib.loads(f"v = {tomltext.string(text)}")["v"] == text


def test_control_characters_are_escaped_as_toml_requires() -> None:
    # TOML forbids DEL and the C0 controls but tab in a basic string; JSON does not escape DEL.
    written = tomltext.value("a\x7fb\nc\td\x00")
    assert written == '"a\\u007fb\\u000ac\td\\u0000"'
    assert tomllib.loads(f"v = {written}")["v"] == "a\x7fb\nc\td\x00"


@given(st.dictionaries(TEXT, VALUES, max_size=4))
def test_a_document_reads_back_as_its_data(data: dict[str, Any]) -> None:
    assert tomllib.loads(tomltext.document(data)) == data


def test_a_plan_document_has_its_tables_and_arrays_of_tables() -> None:
    data = {
        "campaign": {"name": "b.step", "repeats": 3},
        "build": {"good": {"source": "git:/src", "ref": "abc"}},
        "server": [{"name": "good", "install": {"build": "good"}, "settings": {}}],
        "matrix": {"clients": [1, 4], "workload": ["select-only"]},
    }
    text = tomltext.document(data)
    assert "[build.good]" in text and "[[server]]" in text and "[server.install]" in text
    assert "settings = {}" in text and "[build]" not in text
    assert tomllib.loads(text) == data
