"""pgbench's per-transaction log files: one per thread, maybe zstd-compressed, maybe cut short.

A file cut short by a killed pgbench ends in a partial line: only its complete lines are read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import zstandard

from pgbenchlab.errors import PgbenchParseError

_THREAD_FILE = re.compile(r"\.(\d+)(?:\.(\d+))?(\.zst)?")


def thread_log_files(prefix: Path | str, pid: int | None = None) -> tuple[Path, ...]:
    """The thread files ``prefix.PID[.k][.zst]`` of one pgbench process, thread 0 first."""
    prefix = Path(prefix)
    found: dict[int, list[tuple[int, Path]]] = {}
    for path in prefix.parent.glob(prefix.name + ".*"):
        match = _THREAD_FILE.fullmatch(path.name[len(prefix.name) :])
        if match:
            thread = int(match.group(2) or 0)
            found.setdefault(int(match.group(1)), []).append((thread, path))
    if pid is None and len(found) > 1:
        raise ValueError(f"log files of several pgbench processes: {sorted(found)}; give pid")
    files = found.get(pid, []) if pid is not None else next(iter(found.values()), [])
    return tuple(path for _, path in sorted(files))


@dataclass(frozen=True)
class PreparedLog:
    path: Path  # readable plain-text file
    complete_lines: int | None  # None: the file ends with a newline (read it all)
    shift_us: int = 0  # subtracted from its completion times: its clock's offset to ours


def prepare(
    paths: Sequence[Path], scratch: Path, shifts_s: Mapping[Path, float] | None = None
) -> tuple[list[PreparedLog], int]:
    """Plain-text copies of .zst files, where each file's last complete line ends, and the
    offset of the clock that wrote it (shifts_s; none: ours)."""
    prepared, truncated = [], 0
    for index, path in enumerate(paths):
        plain = _decompressed(path, scratch / f"{index}.log") if path.suffix == ".zst" else path
        shift = round((shifts_s or {}).get(path, 0.0) * 1_000_000)
        if plain.stat().st_size == 0:
            continue
        if _ends_with_newline(plain):
            prepared.append(PreparedLog(plain, None, shift))
            continue
        truncated += 1
        complete = _count_newlines(plain)
        if complete:
            prepared.append(PreparedLog(plain, complete, shift))
    return prepared, truncated


def _decompressed(path: Path, target: Path) -> Path:
    try:
        with path.open("rb") as source, target.open("wb") as sink:
            zstandard.ZstdDecompressor().copy_stream(source, sink)
    except zstandard.ZstdError as error:
        raise PgbenchParseError(f"{path}: not a readable zstd file: {error}") from None
    return target


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as file:
        file.seek(-1, 2)
        return file.read(1) == b"\n"


def _count_newlines(path: Path) -> int:
    count = 0
    with path.open("rb") as file:
        while block := file.read(1 << 22):
            count += block.count(b"\n")
    return count


def read_log_bytes(path: Path) -> bytes:
    """A log file's bytes, decompressed when it is an archived .zst copy."""
    if path.suffix != ".zst":
        return path.read_bytes()
    try:
        with path.open("rb") as file:
            return bytes(zstandard.ZstdDecompressor().stream_reader(file).read())
    except zstandard.ZstdError as error:
        raise PgbenchParseError(f"{path}: not a readable zstd file: {error}") from None
