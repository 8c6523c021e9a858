"""Which campaign owns a data directory now, and how far pgbenchlab got in creating its cluster.

A claim is a small file per data directory in pgbenchlab's state directory, named by a digest of
the directory's resolved path. A campaign holds an exclusive lock on it while it runs (the
kernel drops the lock if pgbenchlab dies), so two servers, of one plan or of two campaigns,
never use one data directory at once. The file records that pgbenchlab began an initdb there
(`creating`) and finished it (`ready`): a cluster that a signal or a kill cut short is
recognised as pgbenchlab's own and made again, instead of being refused or written into.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from pgbenchlab import osuser
from pgbenchlab.errors import ServerError

CREATING, READY = "creating", "ready"


def claims_dir() -> Path:
    if os.geteuid() == 0:
        return osuser.ROOT_STATE_DIR / "claims"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "pgbenchlab" / "claims"


class Claim:
    """The held claim on one data directory; `release()` (or process exit) gives it up."""

    def __init__(self, data_dir: Path, owner: str) -> None:
        self.data_dir = data_dir.resolve()
        key = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:24]
        directory = claims_dir()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = directory / f"{key}.json"
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._read().get("owner", "another campaign")
            self.release()
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
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, state: str, owner: str) -> None:
        # In place through the locked descriptor: a renamed file would carry no lock.
        assert self._fd is not None
        record = json.dumps({"data_dir": str(self.data_dir), "owner": owner, "state": state})
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (record + "\n").encode(), 0)
        os.fsync(self._fd)
