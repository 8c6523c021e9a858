"""Log lines read in one streaming pass into counts of (completion second, key) pairs.

Each line gives one key per measure: its value in integer µs tagged with the measure's kind, or
a negative code (a word in the time column, malformed, not applicable, outside the window).
Only the count of each distinct pair is kept, so memory does not grow with the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench.log_files import PreparedLog

# Key layout of the one-pass query: kind << 56 | value for values, negative codes for the rest.
KIND_BITS = 56
LIMIT = (1 << KIND_BITS) - 1
LAG, SERVICE, RETRIES = 1, 2, 3
_WORD_CODES = {"skipped": -1, "failed": -2, "serialization": -3, "deadlock": -4}
_MALFORMED = -9
_NOT_APPLICABLE = -10  # lag/service time of a line that is not a successful transaction
OUTSIDE = -11  # completed outside the window


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


def count_keys(
    prepared: Sequence[PreparedLog],
    rate_limited: bool,
    has_retries: bool,
    window: tuple[float, float] | None,
) -> pl.DataFrame:
    """One streaming pass: the count of each (epoch second, key) pair (see KIND_BITS)."""
    schema = _schema(rate_limited, has_retries)
    if not prepared:
        return pl.DataFrame(schema={"epoch": pl.Int64, "key": pl.Int64, "n": pl.UInt32})
    scans = [_scan(p, schema) for p in prepared]
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


def _scan(p: PreparedLog, schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    """One file's lines, their completion times on our clock when its clock was offset."""
    scan = pl.scan_csv(
        p.path,
        has_header=False,
        separator=" ",
        quote_char=None,
        schema=schema,
        n_rows=p.complete_lines,
        encoding="utf8-lossy",
    )
    if not p.shift_us:
        return scan
    done_us = pl.col("epoch") * 1_000_000 + pl.col("us") - p.shift_us
    return scan.with_columns(epoch=done_us // 1_000_000, us=done_us % 1_000_000)


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
    valid = latency.is_between(0, LIMIT)
    word = pl.lit(_MALFORMED, pl.Int64)
    for text, code in _WORD_CODES.items():
        word = pl.when(pl.col("time") == text).then(code).otherwise(word)
    status = pl.when(valid).then(latency).otherwise(word)
    applies = pl.lit(True)
    if inside is not None:  # lines outside are still checked, then counted apart
        status = pl.when(inside).then(status).otherwise(OUTSIDE)
        valid, applies = valid & inside, inside
    # Missing or empty fields are read as null: such lines get a null key, found afterwards.
    present = pl.all_horizontal(pl.all().exclude("time").is_not_null())
    keys: dict[str, pl.Expr] = {"status": pl.when(present).then(status)}
    if rate_limited:
        lag = pl.col("lag")
        good = valid & lag.is_between(0, LIMIT)
        service = (latency - lag).clip(lower_bound=0)  # both rounded to 1 µs: may be -1
        keys["lag"] = _kind(LAG, lag, good, valid)
        keys["service"] = _kind(SERVICE, service, good, valid)
    if has_retries:
        retries = pl.col("retries")
        # a line outside the window is counted apart: its retries too
        keys["retries"] = _kind(RETRIES, retries, retries.is_between(0, LIMIT) & applies, applies)
    return keys


def _kind(kind: int, value: pl.Expr, good: pl.Expr, applies: pl.Expr) -> pl.Expr:
    """The key of one measure: encoded value, malformed, or not applicable to this line."""
    encoded = pl.when(good).then(value + (kind << KIND_BITS))
    return encoded.when(applies).then(_MALFORMED).otherwise(_NOT_APPLICABLE)


def check_malformed(counts: pl.DataFrame, pg_major: int, files: Sequence[Path]) -> None:
    bad_codes = [_MALFORMED] if pg_major >= 15 else [_MALFORMED, -2, -3, -4]
    key = pl.col("key")
    bad = counts.filter(key.is_null() | pl.col("epoch").is_null() | key.is_in(bad_codes))
    if bad.height:
        names = ", ".join(str(f) for f in files)
        raise PgbenchParseError(
            f"{bad['n'].sum()} malformed pgbench {pg_major} log lines in {names}"
            " (missing fields, negative numbers, or unknown words in the time column)"
        )


def measure_rows(counts: pl.DataFrame, kind: int) -> pl.DataFrame:
    """(epoch, value, n) rows of one kind of key."""
    low, high = kind << KIND_BITS, ((kind + 1) << KIND_BITS) - 1
    rows = counts.filter(pl.col("key").is_between(low, high))
    return rows.select("epoch", value=pl.col("key") - low, n=pl.col("n").cast(pl.Int64))


def word_counts(counts: pl.DataFrame) -> dict[str, int]:
    return {
        word: int(counts.filter(pl.col("key") == code)["n"].sum())
        for word, code in _WORD_CODES.items()
    }
