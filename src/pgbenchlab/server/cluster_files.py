"""What pgbenchlab leaves in and about a managed cluster's data directory: the marker that
says it made the cluster, the record of its private socket directory, its server log; and how
a killed campaign's leftovers (a running postmaster, a socket directory) are found and removed.
"""

from __future__ import annotations

import json
import signal
import time
from contextlib import suppress
from pathlib import PurePath

from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.server.tablespaces import remove_linked

MARKER = "pgbenchlab-cluster.json"
SOCKET_PREFIX = "pgbl-"
SOCKET_RECORD = "pgbenchlab-socket-dir"  # in the data directory: the last socket directory
SOCKET_PARENT = PurePath("/tmp")
# connection = "pgbouncer": the pooler's private directory (beside the socket directories), and
# in the data directory the last one a pooler in front of the cluster used
POOLER_PREFIX = "pgbl-pooler-"
POOLER_RECORD = "pgbenchlab-pooler-dir"
LOG_FILE = "pgbenchlab-server.log"
# TLS (connection = "tls"): the cluster's own authority, and the certificate and key it signed.
TLS_CA = "pgbenchlab-ca.crt"
TLS_CERT = "pgbenchlab-server.crt"
TLS_KEY = "pgbenchlab-server.key"
HBA_FILE = "pg_hba.conf"


def check_data_dir(data_dir: PurePath, host: Host = LOCAL_HOST) -> None:
    """A data directory pgbenchlab may use: absent, empty, or one it created."""
    if not host.exists(data_dir) or host.exists(data_dir / MARKER):
        return
    try:
        empty = not host.list_dir(data_dir)
    except OSError:  # not a directory
        empty = False
    if not empty:
        raise ServerError(
            "data directory is not empty and was not created by pgbenchlab; "
            "choose an empty or new directory",
            where=str(data_dir),
        )


def postmaster_pid(data_dir: PurePath, host: Host = LOCAL_HOST) -> int | None:
    """The pid in postmaster.pid, or None when there is none."""
    try:
        return int(host.read_text(data_dir / "postmaster.pid").split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def postmaster_socket_dir(data_dir: PurePath, host: Host = LOCAL_HOST) -> PurePath | None:
    """The private socket directory named in postmaster.pid, when it is one of ours."""
    try:
        lines = host.read_text(data_dir / "postmaster.pid").splitlines()
    except OSError:
        return None
    if len(lines) > 4 and PurePath(lines[4]).name.startswith(SOCKET_PREFIX):
        return PurePath(lines[4])
    return None


def remove_cluster_files(data_dir: PurePath, host: Host = LOCAL_HOST) -> None:
    """Empty a data directory, keeping the directory itself (it may be a mount point); the
    tablespace directories pgbenchlab made for the cluster go with it."""
    remove_linked(data_dir, host)
    for name in host.list_dir(data_dir):
        host.remove_tree(data_dir / name)


def remove_socket_dir(directory: PurePath, host: Host) -> None:
    with suppress(OSError):
        host.remove_tree(directory)


def stop_recorded_pooler(data_dir: PurePath, host: Host = LOCAL_HOST) -> None:
    """The pooler a killed campaign left in front of this cluster: stopped (SIGTERM to the pid
    in its directory, when that process was started with its configuration), its directory
    removed. Called once no server runs on the cluster."""
    try:
        recorded = PurePath(host.read_text(data_dir / POOLER_RECORD).strip())
    except OSError:
        return
    if recorded.parent == SOCKET_PARENT and recorded.name.startswith(POOLER_PREFIX):
        with suppress(OSError, ValueError):
            pid = int(host.read_text(recorded / "pgbouncer.pid").strip())
            if str(recorded) in host.read_text(PurePath("/proc") / str(pid) / "cmdline"):
                host.signal(pid, signal.SIGTERM)
        remove_socket_dir(recorded, host)
    with suppress(OSError):
        host.remove_tree(data_dir / POOLER_RECORD)


def remove_recorded_socket_dir(
    data_dir: PurePath, keep: PurePath | None = None, host: Host = LOCAL_HOST
) -> None:
    """The private socket directory a server of this cluster last used (a killed campaign's,
    even one killed while starting its server). Called once no server runs on the cluster."""
    try:
        recorded = PurePath(host.read_text(data_dir / SOCKET_RECORD).strip())
    except OSError:
        return
    ours = recorded.parent == SOCKET_PARENT and recorded.name.startswith(SOCKET_PREFIX)
    if ours and recorded != keep:
        remove_socket_dir(recorded, host)


def marker_owner(data_dir: PurePath, host: Host = LOCAL_HOST) -> str | None:
    """Who made a managed cluster, as its marker says (the results directory whose campaign ran
    initdb; "" for clusters made before markers named it), None without a readable marker."""
    try:
        found = json.loads(host.read_text(data_dir / MARKER))
    except (OSError, ValueError):
        return None
    owner = found.get("owner") if isinstance(found, dict) else None
    return owner if isinstance(owner, str) else None


def stop_leftover(data_dir: PurePath, timeout: float = 60, host: Host = LOCAL_HOST) -> bool:
    """Stop a postmaster a killed campaign left running on a cluster pgbenchlab created, and
    remove its socket directory.

    Needs no installation: a fast shutdown is SIGINT to the pid in postmaster.pid.
    """
    if not host.exists(data_dir / MARKER):
        return False
    pid = postmaster_pid(data_dir, host)
    try:
        if pid is None:
            raise ProcessLookupError
        host.signal(pid, signal.SIGINT)
    except OSError:
        remove_recorded_socket_dir(data_dir, host=host)
        stop_recorded_pooler(data_dir, host)
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            host.signal(pid, 0)
        except ProcessLookupError:
            remove_recorded_socket_dir(data_dir, host=host)
            stop_recorded_pooler(data_dir, host)
            return True
        time.sleep(0.1)
    return False
