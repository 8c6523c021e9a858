"""The machines pgbenchlab acts on: every process it starts (initdb, pg_ctl, postgres, pgbench,
pg_test_fsync, pg_config) and every file it reads or writes about a server (data directory,
configuration, server log, /proc, claims) goes through a `Host`.

`host` holds the interface and its small records, `local` the implementation over subprocess
and pathlib, `remote` another machine over SSH (`ssh`: connections and their checks;
`detached`: processes that outlive the connection, and the helpers kept running there;
`remote_files`: files followed or locked there). This package imports nothing of
pgbenchlab's but `errors`: the server lifecycle, datasets, pgbench execution, telemetry, claims
and the OS account may import it.
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
    process_running,
)
from pgbenchlab.hosts.local import LOCAL_HOST, LocalHost
from pgbenchlab.hosts.remote import RemoteHost
from pgbenchlab.hosts.ssh import SshTarget

__all__ = [
    "LOCAL_HOST",
    "Account",
    "Exit",
    "Finished",
    "Host",
    "LocalHost",
    "LockedFile",
    "Process",
    "RemoteHost",
    "SshTarget",
    "Tail",
    "pinned",
    "process_running",
]
