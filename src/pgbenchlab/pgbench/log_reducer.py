"""pgbench's per-transaction logs reduced where they were written: the exact count of each
distinct value of each measure, and per-second sums, over the lines completed in a window.

Stdlib only: the same file is imported as part of pgbenchlab and shipped to a load generator
host and run there (``python3 log_reducer.py [options] FILE...``, the reduction as JSON on its
standard output), so a run split across hosts brings back reductions, not whole logs.

Two reductions merge by adding counts and sums and taking minima and maxima, so the merge of
each host's reduction equals the reduction of the union of their logs, exactly. Latencies are
integer µs: the value counts give exact nearest-rank percentiles (and any fixed-bucket
histogram); the per-second integer sums give each second's count, mean, standard deviation,
minimum and maximum. The line rules are `log_lines`' (the whole-log path): a completion time
moved onto the campaign's clock by the writing host's offset, lines outside [start, end)
counted apart, a file's partial last line ignored and counted, anything malformed counted
(the reader refuses a log with malformed lines).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

FORMAT = "pgbench-log-reduction-1"
LIMIT = (1 << 56) - 1  # the largest value a measure takes (`log_lines.LIMIT`)
WORDS = ("skipped", "failed", "serialization", "deadlock")  # in the time column
MEASURES = ("latency", "lag", "service", "retries")
# Per second: integer sums of the second's lines (minima and maxima None when none).
SECOND_FIELDS = (
    "successful",
    "latency_sum",
    "latency_squares",
    "latency_min",
    "latency_max",
    "lag_sum",
    "lag_max",
    "retried",
    "retries",
    *WORDS,
)
_LOWEST = ("latency_min",)
_HIGHEST = ("latency_max", "lag_max")


@dataclass(frozen=True)
class Layout:
    """Which optional columns the lines have, and which of their completions count."""

    rate_limited: bool  # a schedule-lag column (-R)
    has_retries: bool  # a retries column (15+, --max-tries other than 1)
    window: tuple[float, float] | None = None  # [start, end) in epoch seconds, our clock
    shift_us: int = 0  # the writing host's clock minus ours

    @property
    def columns(self) -> int:
        return 6 + self.rate_limited + self.has_retries


@dataclass
class Reduction:
    """The reduction of some log files (see the module docstring)."""

    files: list[str] = field(default_factory=list)
    lines: int = 0  # complete lines in the window (successful or a word)
    outside: int = 0  # complete lines completed outside the window
    malformed: int = 0
    truncated: int = 0  # files ending in a partial line
    words: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WORDS, 0))
    values: dict[str, dict[int, int]] = field(default_factory=lambda: {m: {} for m in MEASURES})
    seconds: dict[int, dict[str, int | None]] = field(default_factory=dict)

    def merge(self, other: Reduction) -> Reduction:
        """Both reductions together (exact); self is left as it was."""
        merged = Reduction(
            [*self.files, *other.files],
            self.lines + other.lines,
            self.outside + other.outside,
            self.malformed + other.malformed,
            self.truncated + other.truncated,
            {w: self.words[w] + other.words[w] for w in WORDS},
        )
        for measure in MEASURES:
            merged.values[measure] = _add_counts(self.values[measure], other.values[measure])
        for second in sorted(self.seconds.keys() | other.seconds.keys()):
            ours, theirs = self.seconds.get(second), other.seconds.get(second)
            merged.seconds[second] = _merge_second(ours or _new_second(), theirs or _new_second())
        return merged

    def to_json(self) -> str:
        """Canonical JSON (values and seconds ascending)."""
        document = {
            "format": FORMAT,
            "files": self.files,
            "lines": self.lines,
            "outside": self.outside,
            "malformed": self.malformed,
            "truncated": self.truncated,
            "words": self.words,
            "values": {m: sorted(self.values[m].items()) for m in MEASURES},
            "seconds": [
                [second, *(fields[f] for f in SECOND_FIELDS)]
                for second, fields in sorted(self.seconds.items())
            ],
        }
        return json.dumps(document, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Reduction:
        """Inverse of `to_json`; ValueError for anything else."""
        try:
            document = json.loads(text)
            if document["format"] != FORMAT:
                raise ValueError(f"not a {FORMAT} document")
            return cls(
                [str(f) for f in document["files"]],
                int(document["lines"]),
                int(document["outside"]),
                int(document["malformed"]),
                int(document["truncated"]),
                {w: int(document["words"][w]) for w in WORDS},
                {m: {int(v): int(n) for v, n in document["values"][m]} for m in MEASURES},
                {
                    int(row[0]): dict(zip(SECOND_FIELDS, row[1:], strict=True))
                    for row in document["seconds"]
                },
            )
        except (KeyError, TypeError, IndexError, json.JSONDecodeError) as error:
            raise ValueError(f"not a log reduction: {error!r}") from None


def _add_counts(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    merged = dict(a)
    for value, count in b.items():
        merged[value] = merged.get(value, 0) + count
    return merged


def _new_second() -> dict[str, int | None]:
    second: dict[str, int | None] = dict.fromkeys(SECOND_FIELDS, 0)
    second.update(dict.fromkeys(_LOWEST + _HIGHEST))
    return second


def _merge_second(a: dict[str, int | None], b: dict[str, int | None]) -> dict[str, int | None]:
    merged: dict[str, int | None] = {}
    for name in SECOND_FIELDS:
        x, y = a[name], b[name]
        if name in _LOWEST + _HIGHEST:
            present = [v for v in (x, y) if v is not None]
            pick = min if name in _LOWEST else max
            merged[name] = pick(present) if present else None
        else:
            merged[name] = (x or 0) + (y or 0)
    return merged


def reduce_logs(paths: Iterable[str], layout: Layout) -> Reduction:
    """The reduction of these log files (thread files of one or more pgbench processes)."""
    reduction = Reduction()
    window = None
    if layout.window is not None:
        window = (round(layout.window[0] * 1_000_000), round(layout.window[1] * 1_000_000))
    for path in paths:
        with open(path, "rb") as file:
            data = file.read()
        reduction.files.append(path.rsplit("/", 1)[-1])
        if not data:
            continue
        rows = data.split(b"\n")
        if rows[-1]:
            reduction.truncated += 1
        for row in rows[:-1]:
            _reduce_line(
                row.removesuffix(b"\r").decode("utf-8", "replace"), layout, window, reduction
            )
    return reduction


def _integer(text: str) -> int | None:
    """An integer as polars reads one (optional sign, ASCII digits), else None."""
    digits = text[1:] if text[:1] in ("-", "+") else text
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(text)


def _reduce_line(
    line: str, layout: Layout, window: tuple[int, int] | None, reduction: Reduction
) -> None:
    fields = line.split(" ")
    if len(fields) != layout.columns:
        reduction.malformed += 1
        return
    numbers = [_integer(f) for i, f in enumerate(fields) if i != 2]
    if any(n is None for n in numbers):
        reduction.malformed += 1
        return
    epoch, us = numbers[3], numbers[4]
    assert epoch is not None and us is not None
    done_us = epoch * 1_000_000 + us - layout.shift_us
    if window is not None and not window[0] <= done_us < window[1]:
        reduction.outside += 1
        return
    time_text = fields[2]
    latency = int(time_text) if time_text.isascii() and time_text.isdigit() else None
    if latency is None or latency > LIMIT:
        latency = None
        if time_text not in WORDS:
            reduction.malformed += 1
            return
    reduction.lines += 1
    second = reduction.seconds.setdefault(done_us // 1_000_000, _new_second())
    extra = numbers[5:]
    if latency is None:
        reduction.words[time_text] += 1
        second[time_text] = (second[time_text] or 0) + 1
    else:
        _successful(latency, extra[0] if layout.rate_limited else None, second, reduction)
    if layout.has_retries:
        _retries(extra[-1], second, reduction)


def _count(values: dict[int, int], value: int) -> None:
    values[value] = values.get(value, 0) + 1


def _successful(
    latency: int, lag: int | None, second: dict[str, int | None], reduction: Reduction
) -> None:
    _count(reduction.values["latency"], latency)
    second["successful"] = (second["successful"] or 0) + 1
    second["latency_sum"] = (second["latency_sum"] or 0) + latency
    second["latency_squares"] = (second["latency_squares"] or 0) + latency * latency
    low, high = second["latency_min"], second["latency_max"]
    second["latency_min"] = latency if low is None else min(low, latency)
    second["latency_max"] = latency if high is None else max(high, latency)
    if lag is None:
        return
    if not 0 <= lag <= LIMIT:
        reduction.malformed += 1
        return
    _count(reduction.values["lag"], lag)
    _count(reduction.values["service"], max(0, latency - lag))  # both rounded: may be -1
    second["lag_sum"] = (second["lag_sum"] or 0) + lag
    high = second["lag_max"]
    second["lag_max"] = lag if high is None else max(high, lag)


def _retries(retries: int | None, second: dict[str, int | None], reduction: Reduction) -> None:
    if retries is None or not 0 <= retries <= LIMIT:
        reduction.malformed += 1
        return
    _count(reduction.values["retries"], retries)
    second["retried"] = (second["retried"] or 0) + (retries > 0)
    second["retries"] = (second["retries"] or 0) + retries


def arguments(layout: Layout) -> list[str]:
    """The command-line options that give `main` this layout."""
    options = ["--rate-limited"] if layout.rate_limited else []
    options += ["--retries"] if layout.has_retries else []
    if layout.window is not None:  # repr: the float read back is the same float
        options += ["--window", repr(layout.window[0]), repr(layout.window[1])]
    return [*options, "--shift-us", str(layout.shift_us)]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description="reduce pgbench per-transaction logs")
    parser.add_argument("--rate-limited", action="store_true")
    parser.add_argument("--retries", action="store_true")
    parser.add_argument("--window", nargs=2, type=float, metavar=("START", "END"))
    parser.add_argument("--shift-us", type=int, default=0)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    window = None if args.window is None else (args.window[0], args.window[1])
    layout = Layout(args.rate_limited, args.retries, window, args.shift_us)
    sys.stdout.write(reduce_logs(args.files, layout).to_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
