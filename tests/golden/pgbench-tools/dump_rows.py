"""Dump the rows of a pgbench-tools results database that `import pgbench-tools` reads (its
`testset` and `tests` tables, or the tables named after the connection string), with each
column's SQL type, as JSON on stdout.

    python tests/golden/pgbench-tools/dump_rows.py "host=/tmp port=5487 dbname=results" > rows.json
    python tests/golden/pgbench-tools/dump_rows.py "…" testset tests test_bgwriter > rows.json

The values are the text PostgreSQL prints for them (numeric TPS exactly as stored).
"""

from __future__ import annotations

import json
import sys

import psycopg

TABLES = ("testset", "tests")


def dump(conninfo: str, tables: tuple[str, ...] = TABLES) -> dict[str, object]:
    found: dict[str, object] = {}
    with psycopg.connect(conninfo) as conn:
        for table in tables:
            columns = conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = %s "
                "ORDER BY ordinal_position",
                (table,),
            ).fetchall()
            names = [c[0] for c in columns]
            listed = ", ".join(f'"{n}"::text' for n in names)
            rows = conn.execute(f"SELECT {listed} FROM {table} ORDER BY 1, 2").fetchall()  # type: ignore[call-overload]
            found[table] = {"columns": columns, "rows": [list(r) for r in rows]}
    return found


if __name__ == "__main__":
    json.dump(dump(sys.argv[1], tuple(sys.argv[2:]) or TABLES), sys.stdout, indent=1)
    sys.stdout.write("\n")
