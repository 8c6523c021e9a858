"""Writing and reading CPU profiles in the results database (schema migration 6): per run, the
folded stacks zstd-compressed, and the figures needed to read them fairly."""

from __future__ import annotations

import sqlite3

import zstandard

from pgbenchlab.profiles import Profile

COLUMNS = "frequency_hz, samples, lost, target, symbols, complete_share, seconds, folded_zst"


def write_profile(db: sqlite3.Connection, run_id: int, profile: Profile) -> None:
    folded = zstandard.ZstdCompressor(level=9).compress(profile.folded.encode())
    db.execute(
        f"INSERT INTO run_profiles (run_id, {COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
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
        ),
    )


def read_profiles(db: sqlite3.Connection, run_ids: list[int]) -> dict[int, Profile]:
    found: dict[int, Profile] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT run_id, {COLUMNS} FROM run_profiles WHERE run_id IN ({marks})", chunk
        ).fetchall()
        for run_id, freq, samples, lost, target, symbols, share, seconds, blob in rows:
            folded = zstandard.ZstdDecompressor().decompress(blob).decode()
            found[run_id] = Profile(freq, samples, lost, target, folded, symbols, share, seconds)
    return found
