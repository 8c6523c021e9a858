"""TOML text, the one writer of it: a string, a key, a value, a whole document.

Plans written for studies (`studies.toml` adds their comments), a bisection's step plans, and
a plan's strings re-written without their secrets (`redaction`) all go through here, so each
escapes alike: a basic string escapes the backslash, the quote and every control character
TOML forbids in it (tabs stay), those as \\uXXXX. Python's standard library only reads TOML.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# Covariant containers: a list[int] is a plan value as much as a list of anything.
Value = str | int | float | bool | Sequence["Value"] | Mapping[str, "Value"]

_SHORT = {"\\": "\\\\", '"': '\\"'}
_ESCAPED = re.compile(r'[\\"\x00-\x08\x0a-\x1f\x7f]')
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def string(text: str) -> str:
    """A TOML basic string holding exactly ``text``."""
    return '"' + _ESCAPED.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def key(name: str) -> str:
    """A key: bare when TOML allows it, else quoted."""
    return name if _BARE_KEY.fullmatch(name) else string(name)


def value(item: Value) -> str:
    """A value on one line: arrays and tables inline."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)  # TOML spells infinities and NaN as Python does: inf, nan
    if isinstance(item, str):
        return string(item)
    if isinstance(item, Mapping):
        inner = ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items())
        return "{ " + inner + " }" if inner else "{}"
    return "[" + ", ".join(value(v) for v in item) + "]"


def document(data: Mapping[str, Value]) -> str:
    """A whole document: the top level's plain keys, then a [table] per non-empty mapping and
    an [[array]] entry per mapping of a list of them, nested ones by dotted names."""
    lines: list[str] = []
    _table(lines, (), data, array=False)
    return "\n".join(lines).strip() + "\n"


def _table(
    lines: list[str], path: tuple[str, ...], table: Mapping[str, Value], array: bool
) -> None:
    plain = [(k, v) for k, v in table.items() if not _subtable(v) and not _tables(v)]
    name = ".".join(key(p) for p in path)
    if array:
        lines += ["", f"[[{name}]]"]
    elif path and plain:  # a table of tables alone needs no header of its own
        lines += ["", f"[{name}]"]
    lines += [f"{key(k)} = {value(v)}" for k, v in plain]
    for k, v in table.items():
        if (sub := _subtable(v)) is not None:
            _table(lines, (*path, k), sub, array=False)
        for entry in _tables(v):
            _table(lines, (*path, k), entry, array=True)


def _subtable(item: Value) -> Mapping[str, Value] | None:
    """A non-empty mapping, written as a table (an empty one is written inline: {})."""
    return item if isinstance(item, Mapping) and item else None


def _tables(item: Value) -> list[Mapping[str, Value]]:
    """The entries of an array of tables: a non-empty list of mappings only; else none."""
    if isinstance(item, str | Mapping) or not isinstance(item, Sequence) or not item:
        return []
    entries = [entry for entry in item if isinstance(entry, Mapping)]
    return entries if len(entries) == len(item) else []
