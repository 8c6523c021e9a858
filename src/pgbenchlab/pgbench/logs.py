"""pgbench's per-transaction log files (``-l``); aggregated ones are in `aggregate_logs`.

pgbench writes one file per thread (``prefix.PID``, ``prefix.PID.1``, …); archived copies may be
zstd-compressed (``.zst``). Both kinds are accepted, with LF or CRLF line ends. A file cut short
by a killed pgbench ends in a partial line: it is ignored and counted in ``truncated_lines``.
Any other line that does not have the expected shape (number of fields, integers where
integers belong, a known word in the time column for that version) raises `PgbenchParseError`;
so do unreadable ``.zst`` files. Nothing else is raised for any file content.

Per-transaction logs are read with polars' streaming engine in one pass whose memory does not
grow with the file: every line becomes a (completion second, key) pair and only the count of
each distinct pair is kept. Latencies are integer µs, so these counts give *exact* nearest-rank
percentiles (`stats.percentile_rank`) and exact per-second figures.

Sampled logs (``--sampling-rate``) are analysed as they are: counts are the raw sampled counts,
never scaled, and their distributions are flagged ``sampled``.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
import zstandard

from pgbenchlab.analysis.histogram import LatencyHistogram
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_rank
from pgbenchlab.errors import PgbenchParseError

Measure = Literal["latency", "latency_from_schedule", "schedule_lag", "service_time"]
MEASURE_DESCRIPTIONS: dict[str, str] = {
    "latency": "transaction latency",
    "latency_from_schedule": "latency counted from the scheduled start (-R; includes schedule lag)",
    "schedule_lag": "schedule lag: actual start minus scheduled start (-R)",
    "service_time": "service time: latency minus schedule lag (-R)",
}
FAILURE_WORDS = ("failed", "serialization", "deadlock")  # 15+

# Key layout of the one-pass query: kind << 56 | value for values, negative codes for the rest.
_KIND_BITS = 56
_LIMIT = (1 << _KIND_BITS) - 1
_LAG, _SERVICE, _RETRIES = 1, 2, 3
_WORD_CODES = {"skipped": -1, "failed": -2, "serialization": -3, "deadlock": -4}
_MALFORMED = -9
_NOT_APPLICABLE = -10  # lag/service time of a line that is not a successful transaction
_OUTSIDE = -11  # completed outside the window
_MAX_SECONDS = 10_000_000  # a per-second series longer than this is a parsing mistake


@dataclass(frozen=True)
class Distribution:
    """Exact distribution of one measure over successful transactions, in ms."""

    measure: Measure
    sampled: bool  # from a --sampling-rate sample, not every transaction
    count: int
    min_ms: float
    max_ms: float
    mean_ms: float
    stddev_ms: float  # population standard deviation, as pgbench computes it
    percentiles_ms: tuple[tuple[str, float], ...]  # (p, value) for STANDARD_PERCENTILES

    @property
    def description(self) -> str:
        return MEASURE_DESCRIPTIONS[self.measure] + (" (sampled)" if self.sampled else "")

    def percentile_ms(self, p: str) -> float:
        return dict(self.percentiles_ms)[p]


@dataclass(frozen=True)
class IntervalStats:
    """One interval (one second for per-transaction logs) of a run, by completion time.

    Latency figures are over successful transactions and None when there were none; a field
    the source does not record is None."""

    start_s: int
    successful: int
    skipped: int
    failed: int | None
    latency_mean_ms: float | None
    latency_stddev_ms: float | None
    latency_min_ms: float | None
    latency_max_ms: float | None
    lag_mean_ms: float | None = None
    lag_max_ms: float | None = None
    serialization_failures: int | None = None
    deadlock_failures: int | None = None
    retried: int | None = None
    retries: int | None = None


@dataclass(frozen=True)
class TransactionLogSummary:
    """What a run's per-transaction log files say (raw counts; see `sampling_rate`)."""

    pg_major: int
    files: tuple[str, ...]
    sampling_rate: float
    rate_limited: bool
    window: tuple[float, float] | None
    lines: int  # complete lines in the window (all of them without one)
    lines_outside_window: int
    truncated_lines: int
    successful: int
    skipped: int
    failed: int  # all failures; the next two are the --failures-detailed share
    serialization_failures: int
    deadlock_failures: int
    retried: int | None  # lines with retries > 0 (None without a retries column)
    retries: int | None
    latency: Distribution | None  # measure "latency_from_schedule" under -R
    latency_histogram: LatencyHistogram
    lag: Distribution | None
    service_time: Distribution | None
    service_time_histogram: LatencyHistogram | None
    per_second: tuple[IntervalStats, ...]  # every second from the first to the last line

    @property
    def sampled(self) -> bool:
        return self.sampling_rate < 1.0


# Files ----------------------------------------------------------------------------------------

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
class _Prepared:
    path: Path  # readable plain-text file
    complete_lines: int | None  # None: the file ends with a newline (read it all)


def _prepare(paths: Sequence[Path], scratch: Path) -> tuple[list[_Prepared], int]:
    """Plain-text copies of .zst files, and where each file's last complete line ends."""
    prepared, truncated = [], 0
    for index, path in enumerate(paths):
        plain = _decompressed(path, scratch / f"{index}.log") if path.suffix == ".zst" else path
        if plain.stat().st_size == 0:
            continue
        if _ends_with_newline(plain):
            prepared.append(_Prepared(plain, None))
            continue
        truncated += 1
        complete = _count_newlines(plain)
        if complete:
            prepared.append(_Prepared(plain, complete))
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


# Per-transaction logs ---------------------------------------------------------------------------


def analyse_transaction_logs(
    paths: Iterable[Path | str],
    *,
    pg_major: int,
    rate_limited: bool,
    has_retries_column: bool,
    sampling_rate: float = 1.0,
    window: tuple[float, float] | None = None,
) -> TransactionLogSummary:
    """Counts, exact distributions and a per-second series from a run's ``-l`` files.

    `pg_major`: pgbench's major version (9 for 9.6). `rate_limited`: the run used ``-R`` (lines
    carry a schedule-lag column); `has_retries_column`: 15+ with ``--max-tries`` other than 1.
    `window` = (start, end) in epoch seconds keeps only transactions completed in [start, end),
    e.g. to cut the warmup; lines outside are still checked, and counted apart."""
    if has_retries_column and pg_major < 15:
        raise ValueError("pgbench logs have a retries column only from 15 on")
    if not 0 < sampling_rate <= 1:
        raise ValueError(f"sampling rate must be in (0, 1], got {sampling_rate}")
    files = tuple(Path(p) for p in paths)
    with tempfile.TemporaryDirectory(prefix="pgbenchlab-logs-") as scratch:
        prepared, truncated = _prepare(files, Path(scratch))
        counts = _count_keys(prepared, rate_limited, has_retries_column, window)
    _check_malformed(counts, pg_major, files)
    return _summarise(
        counts,
        files=files,
        pg_major=pg_major,
        rate_limited=rate_limited,
        has_retries=has_retries_column,
        sampling_rate=sampling_rate,
        window=window,
        truncated=truncated,
    )


def _schema(rate_limited: bool, has_retries: bool) -> dict[str, pl.DataType]:
    schema: dict[str, pl.DataType] = {
        "client": pl.Int32(),
        "txno": pl.Int64(),
        "time": pl.String(),
        "script": pl.Int32(),
        "epoch": pl.Int64(),
        "us": pl.Int64(),
    }
    if rate_limited:
        schema["lag"] = pl.Int64()
    if has_retries:
        schema["retries"] = pl.Int64()
    return schema


def _count_keys(
    prepared: Sequence[_Prepared],
    rate_limited: bool,
    has_retries: bool,
    window: tuple[float, float] | None,
) -> pl.DataFrame:
    """One streaming pass: the count of each (epoch second, key) pair (see _KIND_BITS)."""
    schema = _schema(rate_limited, has_retries)
    if not prepared:
        return pl.DataFrame(schema={"epoch": pl.Int64, "key": pl.Int64, "n": pl.UInt32})
    scans = [
        pl.scan_csv(
            p.path,
            has_header=False,
            separator=" ",
            quote_char=None,
            schema=schema,
            n_rows=p.complete_lines,
            encoding="utf8-lossy",
        )
        for p in prepared
    ]
    lines = scans[0] if len(scans) == 1 else pl.concat(scans)
    keys = _key_columns(rate_limited, has_retries, _inside(window))
    if len(keys) == 1:
        keyed = lines.select("epoch", key=keys["status"])
    else:  # one row per measure, so a single group-by sees them all
        keyed = lines.select("epoch", **keys).unpivot(index="epoch", value_name="key")
        keyed = keyed.drop("variable")
    query = keyed.group_by("epoch", "key").agg(n=pl.len())
    try:
        return query.collect(engine="streaming")
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as error:
        names = ", ".join(str(p.path) for p in prepared)
        raise PgbenchParseError(f"unreadable pgbench log line in {names}: {error}") from None


def _inside(window: tuple[float, float] | None) -> pl.Expr | None:
    """Completed within [start, end); None without a window."""
    if window is None:
        return None
    done_us = pl.col("epoch") * 1_000_000 + pl.col("us")
    start, end = (round(w * 1_000_000) for w in window)
    return (done_us >= start) & (done_us < end)


def _key_columns(
    rate_limited: bool, has_retries: bool, inside: pl.Expr | None
) -> dict[str, pl.Expr]:
    latency = pl.col("time").str.to_integer(strict=False)
    valid = latency.is_between(0, _LIMIT)
    word = pl.lit(_MALFORMED, pl.Int64)
    for text, code in _WORD_CODES.items():
        word = pl.when(pl.col("time") == text).then(code).otherwise(word)
    status = pl.when(valid).then(latency).otherwise(word)
    applies = pl.lit(True)
    if inside is not None:  # lines outside are still checked, then counted apart
        status = pl.when(inside).then(status).otherwise(_OUTSIDE)
        valid, applies = valid & inside, inside
    # Missing or empty fields are read as null: such lines get a null key, found afterwards.
    present = pl.all_horizontal(pl.all().exclude("time").is_not_null())
    keys: dict[str, pl.Expr] = {"status": pl.when(present).then(status)}
    if rate_limited:
        lag = pl.col("lag")
        good = valid & lag.is_between(0, _LIMIT)
        service = (latency - lag).clip(lower_bound=0)  # both rounded to 1 µs: may be -1
        keys["lag"] = _kind(_LAG, lag, good, valid)
        keys["service"] = _kind(_SERVICE, service, good, valid)
    if has_retries:
        retries = pl.col("retries")
        keys["retries"] = _kind(_RETRIES, retries, retries.is_between(0, _LIMIT), applies)
    return keys


def _kind(kind: int, value: pl.Expr, good: pl.Expr, applies: pl.Expr) -> pl.Expr:
    """The key of one measure: encoded value, malformed, or not applicable to this line."""
    encoded = pl.when(good).then(value + (kind << _KIND_BITS))
    return encoded.when(applies).then(_MALFORMED).otherwise(_NOT_APPLICABLE)


def _check_malformed(counts: pl.DataFrame, pg_major: int, files: Sequence[Path]) -> None:
    bad_codes = [_MALFORMED] if pg_major >= 15 else [_MALFORMED, -2, -3, -4]
    key = pl.col("key")
    bad = counts.filter(key.is_null() | pl.col("epoch").is_null() | key.is_in(bad_codes))
    if bad.height:
        names = ", ".join(str(f) for f in files)
        raise PgbenchParseError(
            f"{bad['n'].sum()} malformed pgbench {pg_major} log lines in {names}"
            " (missing fields, negative numbers, or unknown words in the time column)"
        )


def _measure(counts: pl.DataFrame, kind: int) -> pl.DataFrame:
    """(epoch, value, n) rows of one kind of key."""
    low, high = kind << _KIND_BITS, ((kind + 1) << _KIND_BITS) - 1
    rows = counts.filter(pl.col("key").is_between(low, high))
    return rows.select("epoch", value=pl.col("key") - low, n=pl.col("n").cast(pl.Int64))


def _word_counts(counts: pl.DataFrame) -> dict[str, int]:
    return {
        word: int(counts.filter(pl.col("key") == code)["n"].sum())
        for word, code in _WORD_CODES.items()
    }


@dataclass(frozen=True)
class _Exact:
    """A measure's distinct values (ascending) with their counts, over the whole window."""

    values: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    @classmethod
    def of(cls, rows: pl.DataFrame) -> _Exact:
        merged = rows.group_by("value").agg(pl.col("n").sum()).sort("value")
        return cls(merged["value"].to_numpy(), merged["n"].to_numpy())

    def histogram(self) -> LatencyHistogram:
        return LatencyHistogram.from_arrays(self.values, self.counts)

    def distribution(self, measure: Measure, sampled: bool) -> Distribution | None:
        """Exact nearest-rank percentiles: ranks taken on the cumulative counts."""
        if self.values.size == 0:
            return None
        n = int(self.counts.sum())
        cumulative = np.cumsum(self.counts)
        percentiles = tuple(
            (p, int(self.values[np.searchsorted(cumulative, percentile_rank(n, p))]) / 1000)
            for p in STANDARD_PERCENTILES
        )
        mean = self.histogram().total / n  # exact integer sum
        variance = float(np.dot(self.counts, (self.values - mean) ** 2)) / n
        return Distribution(
            measure=measure,
            sampled=sampled,
            count=n,
            min_ms=int(self.values[0]) / 1000,
            max_ms=int(self.values[-1]) / 1000,
            mean_ms=mean / 1000,
            stddev_ms=math.sqrt(variance) / 1000,
            percentiles_ms=percentiles,
        )


def _summarise(
    counts: pl.DataFrame,
    *,
    files: tuple[Path, ...],
    pg_major: int,
    rate_limited: bool,
    has_retries: bool,
    sampling_rate: float,
    window: tuple[float, float] | None,
    truncated: int,
) -> TransactionLogSummary:
    sampled = sampling_rate < 1.0
    latency = _Exact.of(_measure(counts, 0))
    lag = _Exact.of(_measure(counts, _LAG)) if rate_limited else None
    service = _Exact.of(_measure(counts, _SERVICE)) if rate_limited else None
    retries = _measure(counts, _RETRIES) if has_retries else None
    words = _word_counts(counts)
    return TransactionLogSummary(
        pg_major=pg_major,
        files=tuple(str(f) for f in files),
        sampling_rate=sampling_rate,
        rate_limited=rate_limited,
        window=window,
        lines=int(counts.filter(pl.col("key").is_between(-4, _LIMIT))["n"].sum()),
        lines_outside_window=int(counts.filter(pl.col("key") == _OUTSIDE)["n"].sum()),
        truncated_lines=truncated,
        successful=int(latency.counts.sum()),
        skipped=words["skipped"],
        failed=sum(words[w] for w in FAILURE_WORDS),
        serialization_failures=words["serialization"],
        deadlock_failures=words["deadlock"],
        retried=None if retries is None else int(retries.filter(pl.col("value") > 0)["n"].sum()),
        retries=None if retries is None else int((retries["value"] * retries["n"]).sum()),
        latency=latency.distribution(
            "latency_from_schedule" if rate_limited else "latency", sampled
        ),
        latency_histogram=latency.histogram(),
        lag=None if lag is None else lag.distribution("schedule_lag", sampled),
        service_time=None if service is None else service.distribution("service_time", sampled),
        service_time_histogram=None if service is None else service.histogram(),
        per_second=_per_second(counts, rate_limited, has_retries, pg_major),
    )


# Per-second series -----------------------------------------------------------------------------


def _per_second(
    counts: pl.DataFrame, rate_limited: bool, has_retries: bool, pg_major: int
) -> tuple[IntervalStats, ...]:
    """Every second from the first to the last completion; seconds without lines are zeros."""
    kept = counts.filter(pl.col("key").is_between(-4, _LIMIT))["epoch"]  # a line each
    if kept.is_empty():
        return ()
    first, last = int(kept.min()), int(kept.max())  # type: ignore[arg-type]
    if last - first >= _MAX_SECONDS:
        raise PgbenchParseError(f"log completion times span {last - first} s: not one run")
    table = pl.DataFrame({"epoch": pl.int_range(first, last + 1, eager=True)})
    parts = [_latency_by_second(_measure(counts, 0)), _status_by_second(counts)]
    if rate_limited:
        parts.append(_lag_by_second(_measure(counts, _LAG)))
    if has_retries:
        parts.append(_retries_by_second(_measure(counts, _RETRIES)))
    for part in parts:
        table = table.join(part, on="epoch", how="left")
    columns = table.sort("epoch").to_dict(as_series=False)
    return tuple(_second(columns, i, pg_major) for i in range(table.height))


def _latency_by_second(latency: pl.DataFrame) -> pl.DataFrame:
    value, n = pl.col("value"), pl.col("n")
    stats = latency.group_by("epoch").agg(
        successful=n.sum(),
        mean=(value.cast(pl.Float64) * n).sum() / n.sum(),
        min=value.min(),
        max=value.max(),
    )
    deviations = latency.join(stats.select("epoch", "mean"), on="epoch")
    spread = deviations.group_by("epoch").agg(squares=((value - pl.col("mean")) ** 2 * n).sum())
    return stats.join(spread, on="epoch").select(
        "epoch",
        "successful",
        "mean",
        "min",
        "max",
        std=(pl.col("squares") / pl.col("successful")).sqrt(),
    )


def _status_by_second(counts: pl.DataFrame) -> pl.DataFrame:
    key, n = pl.col("key"), pl.col("n").cast(pl.Int64)
    words = counts.filter(key.is_between(-4, -1))
    return words.group_by("epoch").agg(
        skipped=n.filter(key == -1).sum(),
        failed=n.filter(key.is_between(-4, -2)).sum(),
        serialization=n.filter(key == -3).sum(),
        deadlock=n.filter(key == -4).sum(),
    )


def _lag_by_second(lag: pl.DataFrame) -> pl.DataFrame:
    value, n = pl.col("value"), pl.col("n")
    return lag.group_by("epoch").agg(
        lag_mean=(value.cast(pl.Float64) * n).sum() / n.sum(), lag_max=value.max()
    )


def _retries_by_second(retries: pl.DataFrame) -> pl.DataFrame:
    value, n = pl.col("value"), pl.col("n")
    return retries.group_by("epoch").agg(
        retried=n.filter(value > 0).sum(), retries=(value * n).sum()
    )


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) / 1000


def _second(columns: dict[str, list[Any]], i: int, pg_major: int) -> IntervalStats:
    def count(name: str) -> int:
        value = columns[name][i] if name in columns else None
        return 0 if value is None else int(value)

    def optional(name: str, present: bool) -> int | None:
        return count(name) if present else None

    failures_exist = pg_major >= 15
    has_retries = "retried" in columns
    return IntervalStats(
        start_s=int(columns["epoch"][i]),
        successful=count("successful"),
        skipped=count("skipped"),
        failed=count("failed"),
        latency_mean_ms=_ms(columns["mean"][i]),
        latency_stddev_ms=_ms(columns["std"][i]),
        latency_min_ms=_ms(columns["min"][i]),
        latency_max_ms=_ms(columns["max"][i]),
        lag_mean_ms=_ms(columns["lag_mean"][i]) if "lag_mean" in columns else None,
        lag_max_ms=_ms(columns["lag_max"][i]) if "lag_max" in columns else None,
        serialization_failures=optional("serialization", failures_exist),
        deadlock_failures=optional("deadlock", failures_exist),
        retried=optional("retried", has_retries),
        retries=optional("retries", has_retries),
    )
