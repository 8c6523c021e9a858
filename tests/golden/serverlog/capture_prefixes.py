"""Capture real server logs written with DBA-style log_line_prefix values and local time zones,
as golden files for the prefix compiler and the time zone conversion.

Run from the repository root (as root the server runs as the pgbenchlab OS user):

    .venv/bin/python tests/golden/serverlog/capture_prefixes.py               # both parts
    .venv/bin/python tests/golden/serverlog/capture_prefixes.py destinations  # or prefixes

One throwaway managed PostgreSQL 18 cluster (pgbenchlab's settings: log_checkpoints,
log_autovacuum_min_duration = 0, log_lock_waits). For each case below, ALTER SYSTEM sets its
log_line_prefix, log_timezone and log_error_verbosity and the configuration is reloaded; then a
fixed scenario runs: an immediate checkpoint, an autovacuum and autoanalyze of a table, a lock
wait, a division by zero and a connection to a missing database. The part of the log each case
wrote lands in ``prefix-<case>.log``; ``prefixes.json`` keeps each case's settings and the
epoch seconds (this machine's clock, the server's too) just before and after its scenario.

A second cluster logs with log_destination = 'csvlog,jsonlog' (logging collector on) in Paris
time and runs the same scenario: its two files land in ``destination-csvlog.csv`` and
``destination-jsonlog.json``, its clock readings in ``destinations.json``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from pgbenchlab import installs, osuser, server

HERE = Path(__file__).resolve().parent
SPEC = "embedded"  # PostgreSQL 18
SETTINGS = {"autovacuum_naptime": "1s", "log_lock_waits": "on", "deadlock_timeout": "200ms"}
CASES = {
    "pgbadger": ("%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ", "Europe/Paris", "default"),
    "userdb": ("%m %p %u@%d ", "America/New_York", "default"),
    "epoch": ("%n [%p] %q%a %b ", "Asia/Kolkata", "default"),
    "padded": (
        "%-26m|%6p|%c|%l|%v|%x|%e|%i|%s %% %q[%r] ",
        "Australia/Lord_Howe",
        "verbose",
    ),
}


def scenario(endpoint: server.Endpoint) -> None:
    with endpoint.connect() as conn:
        conn.execute("SET application_name = 'golden app'")
        conn.execute("DROP TABLE IF EXISTS t")
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        conn.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, 5000) g")
        conn.execute("CHECKPOINT")
        conn.execute("DELETE FROM t WHERE id % 2 = 0")
        time.sleep(3)  # autovacuum and autoanalyze of t
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
    lock_wait(endpoint)
    with contextlib.suppress(psycopg.OperationalError):
        endpoint.with_dbname("no_such_database").connect().close()


def lock_wait(endpoint: server.Endpoint) -> None:
    """A row held for half a second: the second session waits past deadlock_timeout."""
    holder = endpoint.connect(autocommit=False)
    holder.execute("UPDATE t SET v = 1 WHERE id = 1")
    waiter = threading.Thread(target=_update_row_1, args=(endpoint,))
    waiter.start()
    time.sleep(0.5)
    holder.commit()
    waiter.join()
    holder.close()


def _update_row_1(endpoint: server.Endpoint) -> None:
    with endpoint.connect() as conn:
        conn.execute("UPDATE t SET v = 2 WHERE id = 1")


def configure(endpoint: server.Endpoint, prefix: str, zone: str, verbosity: str) -> None:
    with endpoint.connect() as conn:
        conn.execute(f"ALTER SYSTEM SET log_line_prefix = '{prefix}'")
        conn.execute(f"ALTER SYSTEM SET log_timezone = '{zone}'")
        conn.execute(f"ALTER SYSTEM SET log_error_verbosity = '{verbosity}'")
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(1.5)  # every process has read the new settings (autovacuum naps 1 s)


def capture() -> None:
    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve(SPEC, installs.discover()), account)
    cases: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="pgbl-log-", dir="/tmp") as tmp:
        account.make_dir(Path(tmp), 0o755)
        cluster = server.ManagedServer("golden", install, Path(tmp) / "data", account, SETTINGS)
        cluster.prepare()
        try:
            for name, (prefix, zone, verbosity) in CASES.items():
                configure(cluster.endpoint, prefix, zone, verbosity)
                offset, started = cluster.log_path.stat().st_size, time.time()
                scenario(cluster.endpoint)
                time.sleep(1)
                text = cluster.log_path.read_bytes()[offset:].decode()
                (HERE / f"prefix-{name}.log").write_text(text)
                cases[name] = {"prefix": prefix, "zone": zone, "verbosity": verbosity}
                cases[name] |= {"started": round(started, 3), "ended": round(time.time(), 3)}
                print(f"prefix-{name}.log: {len(text.splitlines())} lines")
        finally:
            cluster.stop()
    (HERE / "prefixes.json").write_text(json.dumps(cases, indent=2) + "\n")


def current_logfile(endpoint: server.Endpoint, destination: str) -> str:
    with endpoint.connect() as conn:
        row = conn.execute("SELECT pg_current_logfile(%s)", (destination,)).fetchone()
    assert row is not None and row[0], f"no {destination} file"
    return str(row[0])


def capture_destinations() -> None:
    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve(SPEC, installs.discover()), account)
    collector = {"logging_collector": "on", "log_destination": "csvlog,jsonlog"}
    settings = SETTINGS | collector | {"log_timezone": "Europe/Paris"}
    with tempfile.TemporaryDirectory(prefix="pgbl-log-", dir="/tmp") as tmp:
        account.make_dir(Path(tmp), 0o755)
        data = Path(tmp) / "data"
        cluster = server.ManagedServer("golden", install, data, account, settings)
        started = time.time()
        cluster.prepare()
        try:
            scenario(cluster.endpoint)
            time.sleep(1)
            for destination in ("csvlog", "jsonlog"):
                path = data / current_logfile(cluster.endpoint, destination)
                target = HERE / f"destination-{destination}{path.suffix}"
                target.write_bytes(path.read_bytes())
                print(f"{target.name}: {len(target.read_text().splitlines())} lines")
        finally:
            cluster.stop()
    found = {"zone": "Europe/Paris", "started": round(started, 3), "ended": round(time.time(), 3)}
    (HERE / "destinations.json").write_text(json.dumps(found, indent=2) + "\n")


if __name__ == "__main__":
    wanted = sys.argv[1:] or ["prefixes", "destinations"]
    if "prefixes" in wanted:
        capture()
    if "destinations" in wanted:
        capture_destinations()
