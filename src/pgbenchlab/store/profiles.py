"""Writing and reading CPU profiles in the results database (schema migrations 12 and 13): per
run, the server's profile and pgbench's, each with its folded stacks zstd-compressed and the
figures needed to read them fairly; a counted profile (25) with its counter and transactions."""

from __future__ import annotations

import sqlite3

import zstandard

from pgbenchlab.profiles import PGBENCH, SERVER, Profile

COLUMNS = (
    "frequency_hz, samples, lost, target, symbols, complete_share, seconds, folded_zst, "
    "counter, transactions"
)
TABLES = {SERVER: "run_profiles", PGBENCH: "pgbench_profiles"}


def write_profile(db: sqlite3.Connection, run_id: int, profile: Profile) -> None:
    folded = zstandard.ZstdCompressor(level=9).compress(profile.folded.encode())
    db.execute(
        f"INSERT INTO {TABLES[profile.process]} (run_id, {COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            run_id,
            profile.frequency_hz,
            profile.samples,
            profile.lost,
            profile.target,
            profile.symbols,
            profile.complete_share,
            profile.seconds,
            folded,
            profile.counter,
            profile.transactions,
        ),
    )


def read_profiles(
    db: sqlite3.Connection, run_ids: list[int], process: str = SERVER
) -> dict[int, Profile]:
    """The runs' profiles of those processes (SERVER or PGBENCH), by run id."""
    found: dict[int, Profile] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT run_id, {COLUMNS} FROM {TABLES[process]} WHERE run_id IN ({marks})", chunk
        ).fetchall()
        for run_id, freq, samples, lost, target, symbols, share, seconds, blob, *count in rows:
            folded = zstandard.ZstdDecompressor().decompress(blob).decode()
            found[run_id] = Profile(
                freq, samples, lost, target, folded, symbols, share, seconds, process, *count
            )
    return found
