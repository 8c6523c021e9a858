"""Which campaign owns a data directory now, and how far pgbenchlab got in creating its cluster.

A claim is a small file per data directory in pgbenchlab's state directory, named by a digest of
the directory's resolved path. A campaign holds an exclusive lock on it while it runs (the
kernel drops the lock if pgbenchlab dies), so two servers, of one plan or of two campaigns,
never use one data directory at once. The file records that pgbenchlab began an initdb there
(`creating`) and finished it (`ready`): a cluster that a signal or a kill cut short is
recognised as pgbenchlab's own and made again, instead of being refused or written into.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePath

from pgbenchlab import osuser
from pgbenchlab.errors import ServerError
from pgbenchlab.hosts import LOCAL_HOST, Host, LockedFile

CREATING, READY = "creating", "ready"


def claims_dir() -> Path:
    """pgbenchlab's state directory for claims (of the account pgbenchlab runs as)."""
    if os.geteuid() == 0:
        return osuser.ROOT_STATE_DIR / "claims"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "pgbenchlab" / "claims"


class Claim:
    """The held claim on one data directory of a host; `release()` (or process exit) gives it
    up. The claim file is on the same host."""

    def __init__(self, data_dir: PurePath, owner: str, host: Host = LOCAL_HOST) -> None:
        self.host = host
        self.data_dir = host.resolve(data_dir)
        key = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:24]
        remote_state = host.state_dir()
        directory = remote_state / "claims" if remote_state else claims_dir()
        if not host.exists(directory):
            host.mkdir(directory, mode=0o700)
        self.path = directory / f"{key}.json"
        self._file: LockedFile | None = None
        try:
            self._file = host.lock(self.path)
        except BlockingIOError:
            holder = self._read().get("owner", "another campaign")
            raise ServerError(
                f"data directory is in use by {holder}; wait for it to finish, or give this "
                "server another data_dir",
                where=str(self.data_dir),
            ) from None
        self._write(self.state, owner)

    @property
    def state(self) -> str:
        return str(self._read().get("state", ""))

    def set_state(self, state: str) -> None:
        self._write(state, str(self._read().get("owner", "")))

    def release(self) -> None:
        if self._file is not None:
            self._file.release()
            self._file = None

    def _read(self) -> dict[str, str]:
        try:
            text = self._file.read_text() if self._file else self.host.read_text(self.path)
            data = json.loads(text or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, state: str, owner: str) -> None:
        assert self._file is not None
        record = json.dumps({"data_dir": str(self.data_dir), "owner": owner, "state": state})
        self._file.write_text(record + "\n")
