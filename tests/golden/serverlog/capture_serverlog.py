"""Capture real server logs as golden files for the server-log event parser.

Run from the repository root (as root the servers run as the pgbenchlab OS user):

    .venv/bin/python tests/golden/serverlog/capture_serverlog.py          # 9.6, 12, 15, 16, 18
    .venv/bin/python tests/golden/serverlog/capture_serverlog.py 15       # only these majors

Each major gets a throwaway managed cluster (pgbenchlab's own settings: log_checkpoints,
log_autovacuum_min_duration = 0, '%m [%p] ' prefix, UTC) and a fixed scenario: an immediate
checkpoint, checkpoints requested by WAL volume (with the "too frequently" warning), an
autovacuum and autoanalyze, a lock wait, a deadlock, a division by zero and a connection to a
missing database. The part of the log the scenario wrote lands in ``pg<major>.log``.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from pgbenchlab import installs, osuser, server
from pgbenchlab.builds import prebuilt

HERE = Path(__file__).resolve().parent
# 9.6 and 12: prebuilt binaries (downloaded into the build cache once).
SPECS = {"9.6": "binaries:9.6", "12": "binaries:12", "15": "15", "16": "pgserver", "18": "embedded"}
SETTINGS = {
    "autovacuum_naptime": "1s",
    "log_lock_waits": "on",
    "deadlock_timeout": "200ms",
    "max_wal_size": "32MB",
    "min_wal_size": "32MB",
    "checkpoint_warning": "30s",
}


def scenario(endpoint: server.Endpoint) -> None:
    with endpoint.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int, pad text)")
        conn.execute("INSERT INTO t SELECT g, 0, repeat('x', 200) FROM generate_series(1, 20000) g")
        conn.execute("CHECKPOINT")
        for _ in range(3):  # WAL volume beyond max_wal_size: requested checkpoints
            conn.execute("UPDATE t SET v = v + 1, pad = repeat('y', 200)")
        conn.execute("DELETE FROM t WHERE id % 2 = 0")
        time.sleep(4)  # autovacuum and autoanalyze of t
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
    deadlock(endpoint)
    with contextlib.suppress(psycopg.OperationalError):
        endpoint.with_dbname("no_such_database").connect().close()


def deadlock(endpoint: server.Endpoint) -> None:
    """Two sessions lock rows 1 and 3 in opposite orders: a lock wait, then a deadlock."""
    a, b = endpoint.connect(autocommit=False), endpoint.connect(autocommit=False)
    a.execute("UPDATE t SET v = v + 1 WHERE id = 1")
    b.execute("UPDATE t SET v = v + 1 WHERE id = 3")

    def second() -> None:
        try:
            b.execute("UPDATE t SET v = v + 1 WHERE id = 1")
        except psycopg.errors.DeadlockDetected:
            b.rollback()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.5)
    try:
        a.execute("UPDATE t SET v = v + 1 WHERE id = 3")
        a.commit()
    except psycopg.errors.DeadlockDetected:
        a.rollback()
    thread.join()
    b.commit()
    a.close()
    b.close()


def capture(major: str) -> None:
    account = osuser.server_account()
    spec = SPECS[major]
    if spec.startswith(installs.BINARIES_PREFIX):
        install = prebuilt.ensure(spec.removeprefix(installs.BINARIES_PREFIX))
    else:
        install = installs.resolve(spec, installs.discover())
    install = osuser.reachable_install(install, account)
    with tempfile.TemporaryDirectory(prefix="pgbl-log-", dir="/tmp") as tmp:
        account.make_dir(Path(tmp), 0o755)
        cluster = server.ManagedServer(f"pg{major}", install, Path(tmp) / "data", account, SETTINGS)
        cluster.prepare()
        try:
            offset = cluster.log_path.stat().st_size
            scenario(cluster.endpoint)
            time.sleep(1)
            text = cluster.log_path.read_bytes()[offset:].decode()
        finally:
            cluster.stop()
    (HERE / f"pg{major}.log").write_text(text)
    print(f"pg{major}.log: {len(text.splitlines())} lines")


if __name__ == "__main__":
    for major in sys.argv[1:] or list(SPECS):
        capture(major)
