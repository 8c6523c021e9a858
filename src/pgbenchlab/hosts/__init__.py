"""The machines pgbenchlab acts on: every process it starts (initdb, pg_ctl, postgres, pgbench,
pg_test_fsync, pg_config) and every file it reads or writes about a server (data directory,
configuration, server log, /proc, claims) goes through a `Host`.

`host` holds the interface and its small records, `local` the implementation over subprocess
and pathlib. This package imports nothing of pgbenchlab's: the server lifecycle, datasets,
pgbench execution, telemetry, claims and the OS account may import it; a remote host fills the
same interface.
"""

from pgbenchlab.hosts.host import (
    Account,
    Exit,
    Finished,
    Host,
    LockedFile,
    Process,
    Tail,
    pinned,
)
from pgbenchlab.hosts.local import LOCAL_HOST, LocalHost

__all__ = [
    "LOCAL_HOST",
    "Account",
    "Exit",
    "Finished",
    "Host",
    "LocalHost",
    "LockedFile",
    "Process",
    "Tail",
    "pinned",
]
