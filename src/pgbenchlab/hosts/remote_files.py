"""Remote files followed or held under a lock (`remote.RemoteHost.follow` and `.lock`)."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from pathlib import PurePath, PurePosixPath
from typing import Any, Protocol

import asyncssh

from pgbenchlab.hosts import ssh
from pgbenchlab.hosts.detached import LOCK_HOLDER, heartbeat


class FileHost(Protocol):
    """What these files need of their host (`remote.RemoteHost`)."""

    name: str

    async def connection(self) -> asyncssh.SSHClientConnection: ...

    def read_text(self, path: PurePath) -> str: ...

    def _sftp_call(self, action: Any, path: object) -> Any: ...


class RemoteTail:
    """A remote file followed from its end when opened; only whole lines are returned."""

    def __init__(self, host: FileHost, path: PurePosixPath) -> None:
        self.host = host
        self.path = path
        self.offset = self._size()

    def _size(self) -> int:
        try:
            attrs = self.host._sftp_call(lambda s: s.stat(str(self.path)), self.path)
        except FileNotFoundError:
            return 0
        return int(attrs.size or 0)

    def read(self, limit: int = 16 << 20) -> str:
        async def read(sftp: asyncssh.SFTPClient) -> bytes:
            async with sftp.open(str(self.path), "rb") as file:
                await file.seek(self.offset)
                data = await file.read(limit)
                return data if isinstance(data, bytes) else data.encode()

        data: bytes = self.host._sftp_call(read, self.path)
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode(errors="replace")


class RemoteLockedFile:
    """A remote file held under flock by a small holder there, which lets go when its stdin
    closes, when the connection (or this pgbenchlab) goes, or when this side's heartbeat stops
    (`detached.LOCK_HOLDER`)."""

    BUSY = 75

    def __init__(self, host: FileHost, path: PurePosixPath) -> None:
        self.host = host
        self.path = path
        self._beat: asyncio.Task[None] | None = None
        self._process: asyncssh.SSHClientProcess[str] | None = ssh.call(self._hold())

    async def _hold(self) -> asyncssh.SSHClientProcess[str]:
        connection = await self.host.connection()
        flock = f"flock -n -E {self.BUSY} {shlex.quote(str(self.path))}"
        command = f"umask 077; exec {flock} python3 -c {shlex.quote(LOCK_HOLDER)}"
        process = await connection.create_process(command)
        first = await asyncio.wait_for(process.stdout.readline(), 30)
        if first.strip() != "locked":
            process.close()
            raise BlockingIOError(f"host {self.host.name}: {self.path} is locked by another")
        self._beat = asyncio.create_task(heartbeat(process))
        return process

    @property
    def held(self) -> bool:
        """Whether the holder still holds it (a lost connection ended it)."""
        return self._process is not None and not self._process.is_closing()

    def read_text(self) -> str:
        return self.host.read_text(self.path)

    def write_text(self, text: str) -> None:
        async def write(sftp: asyncssh.SFTPClient) -> None:
            async with sftp.open(str(self.path), "r+b") as file:
                await file.truncate(0)
                await file.write(text.encode(), 0)
                await file.fsync()

        self.host._sftp_call(write, self.path)

    def release(self) -> None:
        if self._process is not None:
            process, self._process = self._process, None
            with contextlib.suppress(Exception):
                ssh.call(self._let_go(process), timeout=10)

    async def _let_go(self, process: asyncssh.SSHClientProcess[str]) -> None:
        if self._beat is not None:
            self._beat.cancel()
        process.stdin.write_eof()
        await process.wait()
