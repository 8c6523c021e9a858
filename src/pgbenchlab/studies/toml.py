"""Plan text written line by line: tables, keys and the comments that explain them (the values
are written by `tomltext`, the one TOML writer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pgbenchlab.tomltext import Value, key, value


@dataclass
class Text:
    """A plan being written: tables with keys, each key or table with an optional comment."""

    lines: list[str] = field(default_factory=list)

    def comment(self, *texts: str) -> Text:
        self.lines += [f"# {t}" if t else "#" for t in texts]
        return self

    def blank(self) -> Text:
        self.lines.append("")
        return self

    def table(self, name: str, comment: str = "", *, array: bool = False) -> Text:
        if self.lines and self.lines[-1] and not self.lines[-1].startswith("#"):
            self.blank()  # a comment right above a table is about it
        header = f"[[{name}]]" if array else f"[{name}]"
        self.lines.append(f"{header}  # {comment}" if comment else header)
        return self

    def key(self, name: str, item: Value, comment: str = "") -> Text:
        line = f"{key(name)} = {value(item)}"
        self.lines.append(f"{line:<34}  # {comment}" if comment else line)
        return self

    def items(self, name: str, items: Sequence[Value]) -> Text:
        """An array written one item a line (inline tables are long)."""
        self.lines += [f"{key(name)} = [", *(f"    {value(item)}," for item in items), "]"]
        return self

    def keys(self, items: Mapping[str, Value]) -> Text:
        for name, item in items.items():
            self.key(name, item)
        return self

    def count_tables(self, name: str) -> int:
        """How many [name] or [[name]] tables are written so far."""
        return sum(line.startswith((f"[{name}]", f"[[{name}]]")) for line in self.lines)

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"
