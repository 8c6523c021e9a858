"""`pgbenchlab import pgbench-tools CONNINFO`: pgbench-tools' results database, each test set a
campaign and each of its tests a run.

pgbench-tools keeps one row per test set (`testset`: its number and label, and from its later
versions the server's name) and one per test (`tests`: scale, clients, workers, script, rate
limit, the TPS line pgbench printed, transactions, the average, maximum and 90th percentile
latency it computed from the -l log, start and end). Its per-transaction `timing` rows are
deleted after each test, so no exact percentile can be had from it (its 90th percentile and
maximum, by its own rank rule, are not pgbenchlab's latency distribution: they stay in the
test's listing); the run time is its config's (RUNTIME), not stored: the user gives it
(`--duration`). Columns an older pgbench-tools lacks are absent, never invented. The
initialisation steps it records as tests (script ``:-i …``) and tests with no TPS are listed,
not imported. Its per-test statistics become the run's seconds and telemetry totals where they
map, and are listed where they do not (`pgbench_tools_stats`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg

from pgbenchlab import files, tomltext
from pgbenchlab.errors import UserError
from pgbenchlab.importing.axes import cell_id
from pgbenchlab.importing.outputs import version_num
from pgbenchlab.importing.pgbench_tools_stats import (
    TABLES,
    Statistics,
    Unmapped,
    read_statistics,
    test_statistics,
    unmapped_files,
)
from pgbenchlab.records.cell import RunCell
from pgbenchlab.redaction import redact_conninfo
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.server import ServerFacts
from pgbenchlab.store import ImportedCampaign, ImportedFile, ImportedServer

# pgbench-tools' scripts that are pgbench's builtins under another name (tests/*.sql there)
SCRIPTS = {"select": "select-only", "tpc-b": "tpcb-like", "nobranch": "simple-update"}
REQUIRED = {"testset": {"set", "info"}, "tests": {"test", "set", "scale", "clients", "tps"}}
OPTIONAL = (
    "server", "workers", "script", "trans", "avg_latency", "max_latency",
    "percentile_90_latency", "rate_limit", "server_version", "wal_written", "dbsize", "cleanup",
)  # fmt: skip
DEFAULT_SERVER = "pgbench-tools"


def read_pgbench_tools(conninfo: str, duration_s: int) -> list[ImportedCampaign]:
    """Every test set of the database as a campaign (nothing stored yet)."""
    source = redact_conninfo(conninfo)
    try:
        with psycopg.connect(conninfo, connect_timeout=10, autocommit=True) as conn:
            columns = _columns(conn)
            sets = _rows(conn, "testset", columns["testset"], "set")
            tests = _rows(conn, "tests", columns["tests"], "test")
            stats = read_statistics(conn, {t for t in TABLES if columns.get(t)})
    except psycopg.Error as exc:
        first = str(exc).strip().split("\n", 1)[0]
        raise UserError(f"cannot read pgbench-tools' results at {source!r}: {first}") from None
    found = [
        _campaign(s, [t for t in tests if _of_set(t, s)], source, duration_s, stats) for s in sets
    ]
    if not any(c.runs for c in found):
        raise UserError(f"no test with a TPS in pgbench-tools' results at {source!r}")
    return [c for c in found if c.runs]


def _of_set(test: Mapping[str, Any], testset: Mapping[str, Any]) -> bool:
    """Sets are numbered per server in pgbench-tools' later versions."""
    return test["set"] == testset["set"] and test.get("server") == testset.get("server")


def _columns(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
        ([*REQUIRED, *TABLES],),
    ).fetchall()
    found: dict[str, set[str]] = {"testset": set(), "tests": set()}
    for table, column in rows:
        found.setdefault(str(table), set()).add(str(column))
    for table, needed in REQUIRED.items():
        if not needed <= found[table]:
            missing = ", ".join(sorted(needed - found[table]))
            raise UserError(f"not a pgbench-tools results database: {table} lacks {missing}")
    return found


def _rows(
    conn: psycopg.Connection[Any], table: str, columns: set[str], key: str
) -> list[dict[str, Any]]:
    wanted = [c for c in (*REQUIRED[table], *OPTIONAL, "category") if c in columns]
    times = ", extract(epoch FROM start_time), extract(epoch FROM end_time)"
    extra = times if table == "tests" and {"start_time", "end_time"} <= columns else ""
    order = f"{'server, ' if 'server' in columns else ''}{key}"
    listed = ", ".join(f'"{c}"' for c in dict.fromkeys(wanted))
    with conn.cursor() as cursor:
        cursor.execute(f"SELECT {listed}{extra} FROM {table} ORDER BY {order}")
        names = [*dict.fromkeys(wanted), *(["started", "ended"] if extra else [])]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _campaign(
    testset: Mapping[str, Any],
    tests: Sequence[Mapping[str, Any]],
    source: str,
    duration_s: int,
    stats: Statistics,
) -> ImportedCampaign:
    server = files.file_name(str(testset.get("server") or DEFAULT_SERVER))
    name = files.file_name(f"{server}-set-{testset['set']}")
    runs: list[RunResult] = []
    listed: list[ImportedFile] = []
    repeats: Counter[str] = Counter()
    unmapped: list[tuple[int, Unmapped]] = []
    for test in tests:
        row = hashlib.sha256(json.dumps(test, sort_keys=True, default=str).encode()).hexdigest()
        path = f"tests/{test['test']}"
        why = _not_a_run(test)
        if why:
            listed.append(ImportedFile(path, row, 0, "unread", None, why))
            continue
        cell = _cell(test, server, duration_s)
        identity = cell_id(cell)
        repeats[identity] += 1
        listed.append(ImportedFile(path, row, 0, "output", len(runs), _kept_figures(test)))
        result = _result(test, cell, identity, repeats[identity], len(runs))
        found = test_statistics(
            test, stats.get((test.get("server"), int(test["test"])), {}),
            version_num(_server_version(test)), result.started_at, result.finished_at,
        )  # fmt: skip
        listed += [
            ImportedFile(f"{table}/{test['test']}", digest, 0, "statistics", len(runs), note)
            for table, digest, note in found.read
        ]
        unmapped += [(int(test["test"]), item) for item in found.unmapped]
        runs.append(replace(result, seconds=found.seconds, telemetry=found.telemetry))
    listed += unmapped_files(unmapped)
    versions = {_server_version(t) for t in tests if not _not_a_run(t)}
    version = next(iter(versions)) if len(versions) == 1 else "unknown"
    facts = ServerFacts(server, "imported", version, version_num(version), {}, {}, None, None)
    digest = hashlib.sha256(
        json.dumps([sorted((f.path, f.sha256) for f in listed), duration_s]).encode()
    ).hexdigest()
    return ImportedCampaign(
        name=name,
        source=source,
        plan_text=_plan_text(source, testset, duration_s),
        digest=f"import:{digest}",
        description=str(testset.get("info") or ""),
        pgbench_version=None,
        servers=(ImportedServer(facts, ()),),
        runs=tuple(runs),
        files=tuple(listed),
        started_at=min((r.started_at for r in runs), default=0.0),
        finished_at=max((r.finished_at for r in runs), default=0.0),
    )


def _kept_figures(test: Mapping[str, Any]) -> str:
    """pgbench-tools' figures that are none of pgbenchlab's: its latency figures (not a latency
    distribution), the database's size after the test and its cleanup's time."""
    latency = [
        f"{label} {test[column]} ms"
        for column, label in (
            ("percentile_90_latency", "90th percentile"),
            ("max_latency", "maximum"),
        )
        if test.get(column) is not None
    ]
    kept = []
    if latency:
        kept.append(
            f"pgbench-tools' {' and '.join(latency)} (by its own rank rule, its per-transaction "
            "rows deleted): kept here, not as a latency distribution"
        )
    if test.get("dbsize") is not None:
        kept.append(f"the database's size after the test: {int(test['dbsize']):,} bytes")
    if isinstance(test.get("cleanup"), timedelta):  # an interval
        kept.append(f"its cleanup after the test took {test['cleanup'].total_seconds():.2f} s")
    return "; ".join(kept)


def _not_a_run(test: Mapping[str, Any]) -> str:
    script = str(test.get("script") or "")
    if script.startswith(":"):
        return f"an initialisation step pgbench-tools recorded as a test ({script})"
    if not test.get("tps"):
        return "no TPS recorded (pgbench-tools writes 0 when pgbench printed none)"
    return ""


def _cell(test: Mapping[str, Any], server: str, duration_s: int) -> RunCell:
    script = str(test.get("script") or "select")
    rate = test.get("rate_limit")
    return RunCell(
        server=server,
        server_settings=(),
        scale=int(test["scale"]),
        workload=SCRIPTS.get(script, script),
        clients=int(test["clients"]),
        duration_s=duration_s,
        transactions=None,
        warmup_s=0,
        protocol="simple",
        threads=int(test.get("workers") or 1),
        rate=None if rate is None else float(rate),
        latency_limit_ms=None,
        connect=False,
        vacuum="unknown",
        checkpoint=True,  # pgbench-tools checkpoints before each test
        latency_log="imported",
    )


def _result(
    test: Mapping[str, Any], cell: RunCell, identity: str, repeat: int, sequence: int
) -> RunResult:
    ended = _float(test.get("ended"))
    started = _float(test.get("started"))
    return RunResult(
        run_key=f"{identity}-r{repeat}",
        cell_id=identity,
        sequence=sequence,
        repeat=repeat,
        status=RunStatus.OK,
        spec=cell,
        argv=(),
        started_at=started or 0.0,
        finished_at=ended or started or 0.0,
        pgbench_version="unknown (pgbench-tools stores none)",
        tps=_float(test.get("tps")),
        transactions=None if test.get("trans") is None else int(test["trans"]),
        latency_avg_ms=_float(test.get("avg_latency")),
    )


def _float(value: Any) -> float | None:
    """A stored number as a float: its decimal text kept (numeric columns come as Decimal)."""
    if value is None:
        return None
    return float(Decimal(str(value)))


def _server_version(test: Mapping[str, Any]) -> str:
    """ "15.18" from version()'s "PostgreSQL 15.18 (Debian …) on x86_64…"."""
    found = re.match(r"PostgreSQL (\S+)", str(test.get("server_version") or ""))
    return found[1] if found else "unknown"


def _plan_text(source: str, testset: Mapping[str, Any], duration_s: int) -> str:
    data: dict[str, tomltext.Value] = {
        "kind": "pgbench-tools",
        "source": source,
        "set": int(testset["set"]),
        "duration_s": duration_s,
    }
    return "# imported by `pgbenchlab import pgbench-tools`: not a plan to run\n" + (
        tomltext.document({"import": data})
    )
