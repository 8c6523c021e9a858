"""`RemoteHost`: another machine, reached over SSH (see `ssh` for keys and known_hosts).

Commands run as the SSH login (a managed server there runs as that account: no switch of user
remotely); argv is quoted, never interpreted, and the environment travels on the command's
stdin, never in argv. Files move over SFTP. Long-running processes are started detached
(`detached`). This machine's PATH and HOME mean nothing there: the login's own are kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

import asyncssh
from asyncssh.constants import OPEN_REQUEST_SESSION_FAILED  # sshd refused the subsystem

from pgbenchlab.errors import HostError
from pgbenchlab.hosts import ssh
from pgbenchlab.hosts.detached import (
    KILLED,
    OWNER_FILE,
    PROCS_DIR,
    STATE_DIR,
    RemoteProcess,
    clock_readings,
    monitor_command,
    parse_exit,
    read_files,
    started_process,
)
from pgbenchlab.hosts.host import NODES_DIR, Account, Exit, Finished, LineCallback, nodes_in
from pgbenchlab.hosts.remote_files import RemoteLockedFile, RemoteTail
from pgbenchlab.hosts.ssh import ENV_READER, LOCAL_ONLY_ENV, SshTarget, env_lines, sftp_error

READ_CHUNK = 1 << 20
# After a failed reconnection every call fails at once for this long, with the same reason:
# a host gone from the network costs one connection timeout, not one per file read.
RETRY_AFTER_S = 5


class RemoteHost:
    """A machine reached over SSH; one connection (re-opened after a loss) per host."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.name = target.name
        self._connection: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._home: PurePosixPath | None = None
        self._facts: dict[str, str] = {}
        self._forwards: dict[str, int] = {}
        self._was_connected = False
        self._lost: tuple[float, str] | None = None  # a failed reconnection: until when, why
        self._session = uuid.uuid4().hex  # this pgbenchlab's directory of detached commands
        self._owner: RemoteLockedFile | None = None  # held on it while this pgbenchlab lives
        self._owning = threading.Lock()  # pgbench processes start there from several threads

    # -- connection --------------------------------------------------------------------------

    async def connection(self) -> asyncssh.SSHClientConnection:
        if self._connection is None or self._connection.is_closed():
            self._sftp = None
            self._forwards.clear()
            self._connection = None
            if self._lost is not None and time.monotonic() < self._lost[0]:
                raise ConnectionError(self._lost[1])  # tried moments ago: not again yet
            try:
                self._connection = await ssh.open_connection(self.target)
            except HostError as exc:
                if self._was_connected:  # mid-campaign: an OSError like any lost file, not exit 2
                    self._lost = (time.monotonic() + RETRY_AFTER_S, f"connection lost, {exc}")
                    raise ConnectionError(self._lost[1]) from None
                raise
            self._was_connected = True
        return self._connection

    async def sftp(self) -> asyncssh.SFTPClient:
        connection = await self.connection()
        if self._sftp is None:
            try:
                self._sftp = await connection.start_sftp_client()
            except asyncssh.ChannelOpenError as exc:
                if connection.is_closed() or exc.code != OPEN_REQUEST_SESSION_FAILED:
                    raise ConnectionError(f"host {self.name}: {exc.reason}") from None
                raise HostError(
                    f"sshd there refused SFTP ({exc.reason}), which pgbenchlab moves files "
                    "with: add `Subsystem sftp internal-sftp` to its sshd_config and reload it",
                    where=f"host {self.name}",
                ) from None
        return self._sftp

    @property
    def logged_in(self) -> bool:
        """Whether a login here ever succeeded."""
        return self._was_connected

    def check(self) -> None:
        """Connect now, and open SFTP: HostError (reason and fix) when the host cannot be
        used."""
        ssh.call(self.sftp())

    def close(self) -> None:
        if self._owner is not None:
            with contextlib.suppress(OSError):  # every command collected: nothing to leave
                if self.list_dir(self._own_path) == [OWNER_FILE]:
                    self.remove_tree(self._own_path)
            self._owner.release()
            self._owner = None
        if self._connection is not None:
            self._connection.close()
            ssh.call(self._connection.wait_closed(), timeout=10)
            self._connection = None

    @property
    def user(self) -> str:
        if "user" not in self._facts:
            self._facts["user"] = self._shell("id -un").strip()
        return self._facts["user"]

    @property
    def home(self) -> PurePosixPath:
        if self._home is None:
            self._home = PurePosixPath(self._sftp_call(lambda s: s.realpath("."), "~"))
        return self._home

    # -- processes ---------------------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: PurePath | str = "/",
        timeout: float | None = None,
        as_user: Account | None = None,
        new_session: bool = False,  # an SSH command is in a session of its own already
    ) -> Finished:
        self._require_login(as_user)
        command = f"{ENV_READER}cd {shlex.quote(str(cwd))} && exec {shlex.join(argv)}"
        try:
            done = ssh.call(self._run(command, env_lines(env)), timeout)
        except TimeoutError:
            raise TimeoutError(f"{argv[0]} did not finish within {timeout:g} s") from None
        return done

    async def _run(self, command: str, stdin: str) -> Finished:
        connection = await self.connection()
        try:
            done = await connection.run(command, input=stdin, errors="replace", check=False)
        except asyncssh.Error as exc:
            raise ConnectionError(f"host {self.name}: {exc.reason}") from None
        code = done.exit_status if done.exit_status is not None else KILLED
        return Finished(int(code), str(done.stdout or ""), str(done.stderr or ""))

    def _shell(self, command: str, timeout: float = 60) -> str:
        done = self.run(["sh", "-c", command], timeout=timeout)
        if done.returncode != 0:
            raise OSError(f"host {self.name}: {command}: {done.stderr.strip()}")
        return done.stdout

    def start(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: PurePath | str,
        on_stdout_line: LineCallback | None = None,
        on_stderr_line: LineCallback | None = None,
        as_user: Account | None = None,
        new_session: bool = False,
    ) -> RemoteProcess:
        self._require_login(as_user)
        directory = self.own_dir() / uuid.uuid4().hex
        env_json = {k: v for k, v in env.items() if k not in LOCAL_ONLY_ENV}
        env_json |= {k: v for k, v in self._login_env().items() if k in LOCAL_ONLY_ENV}
        starting = ssh.submit(
            self._run(monitor_command(directory, str(cwd), argv), json.dumps(env_json) + "\n")
        )
        callbacks = (on_stdout_line, on_stderr_line)
        try:
            return started_process(self, argv[0], directory, starting.result(), callbacks)
        except KeyboardInterrupt:  # the start goes on there: its process stopped once it runs
            started = started_process(self, argv[0], directory, starting.result(), (None, None))
            started.kill()
            started.wait()
            raise

    def _login_env(self) -> dict[str, str]:
        if "PATH" not in self._facts:
            self._facts["PATH"] = self._shell('printf %s "$PATH"')
            self._facts["HOME"] = str(self.home)
        return {"PATH": self._facts["PATH"], "HOME": self._facts["HOME"]}

    @property
    def procs_dir(self) -> PurePosixPath:
        return self.state_dir() / PROCS_DIR

    def collect(self, directory: PurePosixPath) -> Exit:
        """How a detached command ended (its monitor's exit file); its directory goes."""
        try:
            text: str | None = self.read_text(directory / "exit")
        except FileNotFoundError:
            text = None
        self.remove_tree(directory)
        return parse_exit(text)

    @property
    def _own_path(self) -> PurePosixPath:
        return self.procs_dir / self._session

    def own_dir(self) -> PurePosixPath:
        """This pgbenchlab's directory here (its detached commands, one directory each, and
        its runs' scratch directories), under a lock held while it lives: another pgbenchlab
        on this login leaves it alone, and removes it once this one is gone. A lost connection
        let the lock go: a new directory then, as the old holder may linger until it
        notices."""
        with self._owning:
            if self._owner is None or not self._owner.held:
                if self._owner is not None:
                    self._session = uuid.uuid4().hex
                self.mkdir(self._own_path)
                self._owner = self.lock(self._own_path / OWNER_FILE)
        return self._own_path

    def stop_leftovers(self) -> list[str]:
        """Detached commands of pgbenchlab processes gone from here (killed, or cut off for
        longer than a lock holder waits): stopped (SIGKILL to their group), and those
        processes' directories removed with their runs' scratch directories. Returns what was
        stopped ("pid"). A live pgbenchlab's, another campaign's on this login, are left
        alone."""
        stopped = []
        for name in self.list_dir(self.procs_dir) if self.exists(self.procs_dir) else []:
            if name == self._session:
                continue
            owner = self._lock_if_gone(self.procs_dir / name)
            if owner is None:
                continue
            try:
                for command in self.list_dir(self.procs_dir / name):
                    if command != OWNER_FILE:
                        stopped += self._stop_command(self.procs_dir / name / command)
                self.remove_tree(self.procs_dir / name)
            finally:
                owner.release()
        return stopped

    def _lock_if_gone(self, directory: PurePosixPath) -> RemoteLockedFile | None:
        """The owner lock of another pgbenchlab's directory, if that one is gone; None while it
        holds it (asked twice: a pgbenchlab killed a moment ago lets go as sshd notices)."""
        for attempt in range(2):
            try:
                return self.lock(directory / OWNER_FILE)
            except BlockingIOError:
                if attempt == 0:
                    time.sleep(1)
        return None

    def _stop_command(self, directory: PurePosixPath) -> list[str]:
        """A detached command's group killed unless it has ended; [its pid] if it was."""
        stopped = []
        with contextlib.suppress(FileNotFoundError):
            pids = self.read_text(directory / "pid").split()
            if not self.exists(directory / "exit"):
                for pid in (-int(pids[0]), int(pids[1])):
                    with contextlib.suppress(ProcessLookupError):
                        self.signal(pid, 9)
                stopped.append(pids[0])
        return stopped

    def signal(self, pid: int, signum: int) -> None:
        done = self.run(["kill", f"-{signum}", "--", str(pid)], timeout=30)
        if done.returncode != 0:
            if "No such process" in done.stderr:
                raise ProcessLookupError(f"host {self.name}: no process {pid}")
            raise OSError(f"host {self.name}: kill {pid}: {done.stderr.strip()}")

    def _require_login(self, account: Account | None) -> None:
        if account is not None and account.name != self.user:
            raise PermissionError(
                f"host {self.name}: commands run as the SSH login {self.user}, "
                f"not as {account.name}"
            )

    # -- files -------------------------------------------------------------------------------

    def _sftp_call(self, action: Any, path: object) -> Any:
        async def act() -> Any:
            try:
                return await action(await self.sftp())
            except asyncssh.SFTPError as exc:
                raise sftp_error(exc, path) from None

        return ssh.call(act())

    def read_bytes(self, path: PurePath) -> bytes:
        async def read(sftp: asyncssh.SFTPClient) -> bytes:
            # Until an empty read: /proc's files tell a size of 0.
            chunks = []
            async with sftp.open(str(path), "rb") as file:
                while chunk := await file.read(READ_CHUNK):
                    chunks.append(chunk if isinstance(chunk, bytes) else chunk.encode())
            return b"".join(chunks)

        data: bytes = self._sftp_call(read, path)
        return data

    def read_text(self, path: PurePath) -> str:
        return self.read_bytes(path).decode(errors="replace")

    def read_texts(self, paths: Sequence[PurePath]) -> list[str | None]:
        async def read() -> list[str | None]:
            return await read_files(await self.connection(), [str(p) for p in paths])

        return ssh.call(read(), timeout=60)

    def write_text(
        self, path: PurePath, text: str, *, mode: int = 0o600, owner: Account | None = None
    ) -> None:
        self._require_login(owner)
        temporary = str(path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}")

        async def write(sftp: asyncssh.SFTPClient) -> None:
            attrs = asyncssh.SFTPAttrs(permissions=mode)
            async with sftp.open(temporary, "wb", attrs) as file:
                await file.write(text.encode())
            await sftp.chmod(temporary, mode)
            await sftp.posix_rename(temporary, str(path))

        self._sftp_call(write, path)

    def write_in_place(self, path: PurePath, text: str) -> None:
        async def write(sftp: asyncssh.SFTPClient) -> None:
            async with sftp.open(str(path), "wb") as file:  # O_TRUNC, the file kept
                await file.write(text.encode())

        self._sftp_call(write, path)

    def put_file(self, local: Path, path: PurePath) -> None:
        self._sftp_call(lambda s: s.put(str(local), str(path)), path)

    def exists(self, path: PurePath) -> bool:
        found: bool = self._sftp_call(lambda s: s.exists(str(path)), path)
        return found

    def mkdir(self, path: PurePath, *, mode: int = 0o700, owner: Account | None = None) -> None:
        self._require_login(owner)

        async def make(sftp: asyncssh.SFTPClient) -> None:
            await sftp.makedirs(str(path), exist_ok=True)
            await sftp.chmod(str(path), mode)

        self._sftp_call(make, path)

    def make_temp_dir(
        self, prefix: str, parent: PurePath, *, owner: Account | None = None
    ) -> PurePosixPath:
        self._require_login(owner)
        made = self._shell(f"mktemp -d -p {shlex.quote(str(parent))} {shlex.quote(prefix)}XXXXXXXX")
        return PurePosixPath(made.strip())

    def remove_tree(self, path: PurePath) -> None:
        self._shell(f"rm -rf -- {shlex.quote(str(path))}")

    def list_dir(self, path: PurePath) -> list[str]:
        names: list[str] = self._sftp_call(lambda s: s.listdir(str(path)), path)
        return [n for n in names if n not in (".", "..")]

    def resolve(self, path: PurePath) -> PurePosixPath:
        return PurePosixPath(self._shell(f"realpath -m -- {shlex.quote(str(path))}").strip())

    def device_of(self, path: PurePath) -> str:
        device = int(self._shell(f"stat -c %d -- {shlex.quote(str(path))}"))
        return f"{os.major(device)}:{os.minor(device)}"

    def lock(self, path: PurePath) -> RemoteLockedFile:
        return RemoteLockedFile(self, PurePosixPath(path))

    def follow(self, path: PurePath) -> RemoteTail:
        return RemoteTail(self, PurePosixPath(path))

    # -- facts -------------------------------------------------------------------------------

    def cpu_count(self) -> int | None:
        return int(self._fact("cpus", "getconf _NPROCESSORS_ONLN"))

    def allowed_cpus(self) -> frozenset[int]:
        probe = "import os; print(*sorted(os.sched_getaffinity(0)))"
        return frozenset(int(c) for c in self._fact("allowed", f"python3 -c '{probe}'").split())

    def pin_prefix(self, cpus: str) -> list[str] | None:
        found = self._fact("pin", "command -v taskset || command -v numactl || true").strip()
        if not found:
            return None
        return (
            [found, "-c", cpus] if found.endswith("taskset") else [found, f"--physcpubind={cpus}"]
        )

    def numactl(self) -> str | None:
        return self._fact("numactl", "command -v numactl || true").strip() or None

    def numa_nodes(self) -> frozenset[int]:
        listed = self._fact("nodes", f"ls {NODES_DIR} 2>/dev/null || true").split()
        return nodes_in(PurePosixPath(name) for name in listed)

    def clock_ticks_per_s(self) -> int:
        return int(self._fact("ticks", "getconf CLK_TCK"))

    def clock_readings(self, count: int) -> list[tuple[float, float, float]]:
        async def read() -> list[tuple[float, float, float]]:
            return await clock_readings(await self.connection(), count)

        return ssh.call(read(), timeout=60)

    def _fact(self, key: str, command: str) -> str:
        if key not in self._facts:
            self._facts[key] = self._shell(command).strip()
        return self._facts[key]

    @property
    def address(self) -> str:
        return self.target.address

    def state_dir(self) -> PurePosixPath:
        return self.home / STATE_DIR

    def reach(self, socket_dir: PurePath, port: int) -> tuple[str, int]:
        """A local port forwarded over SSH to the server's socket there (kept while the
        connection lasts: one per socket)."""
        socket = str(socket_dir / f".s.PGSQL.{port}")
        if socket not in self._forwards:
            self._forwards[socket] = ssh.call(self._forward(socket))
        return "127.0.0.1", self._forwards[socket]

    async def _forward(self, socket: str) -> int:
        connection = await self.connection()
        listener = await connection.forward_local_port_to_path("127.0.0.1", 0, socket)
        return int(listener.get_port())

    def free_port(self) -> int:
        probe = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
        return int(self._shell(f"python3 -c {shlex.quote(probe)}"))
