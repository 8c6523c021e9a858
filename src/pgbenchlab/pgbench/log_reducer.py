"""pgbench's per-transaction logs reduced where they were written: the exact count of each
distinct value of each measure, and per-second sums, over the lines completed in a window.

Stdlib only: the same file is imported as part of pgbenchlab and shipped to a load generator
host and run there (``python3 log_reducer.py [options] FILE...``, the reduction as JSON on its
standard output), so a run split across hosts brings back reductions, not whole logs. It runs
on a host's older python3 too (3.8 on: its annotations are never evaluated there).

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
BLOCK_BYTES = 1 << 24  # lines read at a time
LIMIT = (1 << 56) - 1  # the largest value a measure takes (`log_lines.LIMIT`)
WORDS = ("skipped", "failed", "serialization", "deadlock")  # in the time column
MEASURES = ("latency", "lag", "service", "retries")
# Per second: integer sums of the second's lines, a list in this order (a minimum or maximum is
# None when the second has no value of it).
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
(N, LATENCY_SUM, SQUARES, LATENCY_MIN, LATENCY_MAX, LAG_SUM, LAG_MAX, RETRIED, RETRIES) = range(9)
WORD_INDEX = {word.encode(): 9 + i for i, word in enumerate(WORDS)}
_LOWEST, _HIGHEST = (LATENCY_MIN,), (LATENCY_MAX, LAG_MAX)


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
    seconds: dict[int, list[int | None]] = field(default_factory=dict)

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
            "seconds": [[second, *fields] for second, fields in sorted(self.seconds.items())],
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
                {int(row[0]): _second_of(row[1:]) for row in document["seconds"]},
            )
        except (KeyError, TypeError, IndexError, json.JSONDecodeError) as error:
            raise ValueError(f"not a log reduction: {error!r}") from None


def _add_counts(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    merged = dict(a)
    for value, count in b.items():
        merged[value] = merged.get(value, 0) + count
    return merged


def _second_of(row: list[int | None]) -> list[int | None]:
    if len(row) != len(SECOND_FIELDS):
        raise TypeError(f"a second has {len(SECOND_FIELDS)} fields, not {len(row)}")
    return [None if v is None else int(v) for v in row]


def _new_second() -> list[int | None]:
    return [0, 0, 0, None, None, 0, None, 0, 0, *(0 for _ in WORDS)]


def _merge_second(a: list[int | None], b: list[int | None]) -> list[int | None]:
    merged: list[int | None] = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if i in _LOWEST or i in _HIGHEST:
            present = [v for v in (x, y) if v is not None]
            merged.append((min if i in _LOWEST else max)(present) if present else None)
        else:
            merged.append((x or 0) + (y or 0))
    return merged


def reduce_logs(paths: Iterable[str], layout: Layout) -> Reduction:
    """The reduction of these log files (thread files of one or more pgbench processes), read
    a block of lines at a time: memory does not grow with the file."""
    reduction = Reduction()
    for path in paths:
        reduction.files.append(path.rsplit("/", 1)[-1])
        with open(path, "rb") as file:
            while rows := file.readlines(BLOCK_BYTES):
                if not rows[-1].endswith(b"\n"):  # the file's partial last line
                    reduction.truncated += 1
                    rows.pop()
                _reduce_rows(rows, layout, reduction)
    return reduction


def _reduce_rows(rows: list[bytes], layout: Layout, reduction: Reduction) -> None:
    """Each complete line counted into reduction (its hot loop: locals, no calls per field)."""
    columns, shift = layout.columns, layout.shift_us
    start, end = -(1 << 127), 1 << 127
    if layout.window is not None:
        start, end = (round(w * 1_000_000) for w in layout.window)
    latencies, lags = reduction.values["latency"], reduction.values["lag"]
    services, retries_of = reduction.values["service"], reduction.values["retries"]
    seconds, words = reduction.seconds, reduction.words
    rate_limited, has_retries = layout.rate_limited, layout.has_retries
    for row in rows:
        fields = row.split(b" ")  # its line end stays: int() takes "123\r\n" as 123
        if len(fields) != columns:
            reduction.malformed += 1
            continue
        try:  # the numbers pgbench writes (pgbench writes no sign, space or underscore)
            int(fields[0]), int(fields[1]), int(fields[3])
            done_us = int(fields[4]) * 1_000_000 + int(fields[5]) - shift
            extra = [int(f) for f in fields[6:]]
        except ValueError:
            reduction.malformed += 1
            continue
        if not start <= done_us < end:
            reduction.outside += 1
            continue
        time_field = fields[2]
        word = WORD_INDEX.get(time_field)
        if word is None and not (time_field.isdigit() and int(time_field) <= LIMIT):
            reduction.malformed += 1
            continue
        reduction.lines += 1
        second = seconds.get(done_us // 1_000_000)
        if second is None:
            second = seconds[done_us // 1_000_000] = _new_second()
        if word is not None:
            words[time_field.decode()] += 1
            second[word] = (second[word] or 0) + 1
        else:
            latency = int(time_field)
            latencies[latency] = latencies.get(latency, 0) + 1
            _add_latency(second, latency)
            if rate_limited:
                lag = extra[0]
                if not 0 <= lag <= LIMIT:
                    reduction.malformed += 1
                else:
                    lags[lag] = lags.get(lag, 0) + 1
                    service = max(0, latency - lag)  # both rounded to 1 µs: may be -1
                    services[service] = services.get(service, 0) + 1
                    _add_lag(second, lag)
        if has_retries:
            retries = extra[-1]
            if not 0 <= retries <= LIMIT:
                reduction.malformed += 1
                continue
            retries_of[retries] = retries_of.get(retries, 0) + 1
            second[RETRIED] = (second[RETRIED] or 0) + (retries > 0)
            second[RETRIES] = (second[RETRIES] or 0) + retries


def _add_latency(second: list[int | None], latency: int) -> None:
    second[N] = (second[N] or 0) + 1
    second[LATENCY_SUM] = (second[LATENCY_SUM] or 0) + latency
    second[SQUARES] = (second[SQUARES] or 0) + latency * latency
    low, high = second[LATENCY_MIN], second[LATENCY_MAX]
    second[LATENCY_MIN] = latency if low is None or latency < low else low
    second[LATENCY_MAX] = latency if high is None or latency > high else high


def _add_lag(second: list[int | None], lag: int) -> None:
    second[LAG_SUM] = (second[LAG_SUM] or 0) + lag
    high = second[LAG_MAX]
    second[LAG_MAX] = lag if high is None or lag > high else high


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
