"""How fast the storage under a data directory can sync: pg_test_fsync, once per device.

The WAL-flush rule compares a run's WAL flush rate with this figure: a server that flushes
almost as often as the device can sync is waiting on the device. pg_test_fsync runs as the
server's OS account, writing its test file beside the data directory (the same file system),
one second per test (about 15 s in all).
"""

from __future__ import annotations

import re
from contextlib import suppress
from dataclasses import dataclass
from pathlib import PurePath

from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.osuser import OsAccount

ONE_WRITE = "Compare file sync methods using one 8kB write"
LINE = re.compile(r"^\s+(\S+)\s+([\d.]+) ops/sec\s+(\d+) usecs/op")


@dataclass(frozen=True)
class FsyncFigure:
    device: str  # "major:minor" of the file system holding the data directory
    ops_per_s: dict[str, float]  # wal_sync_method → syncs per second, one 8 kB write each
    output: str  # pg_test_fsync's whole report

    def for_method(self, method: str) -> float | None:
        return self.ops_per_s.get(method)


def parse_one_write(output: str) -> dict[str, float]:
    """Ops/s per sync method from the "one 8kB write" section of pg_test_fsync's report."""
    found: dict[str, float] = {}
    inside = False
    for line in output.splitlines():
        if line.startswith(ONE_WRITE):
            inside = True
        elif inside and not line.strip():
            if found:
                break
        elif inside:
            match = LINE.match(line)
            if match:
                found[match.group(1)] = float(match.group(2))
    return found


def run_pg_test_fsync(
    binary: PurePath,
    account: OsAccount,
    directory: PurePath,
    device: str,
    host: Host = LOCAL_HOST,
) -> FsyncFigure | None:
    """pg_test_fsync in directory (must be writable by the account); None if it fails."""
    target = directory / "pgbenchlab-fsync.test"
    try:
        done = host.run(
            [str(binary), "-s", "1", "-f", str(target)],
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            as_user=account,
        )
    except OSError:
        return None
    finally:
        with suppress(OSError):  # pg_test_fsync removes it too, unless interrupted
            host.remove_tree(target)
    figures = parse_one_write(done.stdout)
    if done.returncode != 0 or not figures:
        return None
    return FsyncFigure(device, figures, done.stdout)
