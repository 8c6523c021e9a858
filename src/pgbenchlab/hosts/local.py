"""`LocalHost`: the machine pgbenchlab runs on, over subprocess and pathlib.

A command may run as another OS account (pgbenchlab as root runs PostgreSQL as an unprivileged
user): the switch happens here, with a private umask and no supplementary groups. A started
process's CPU comes from wait4, so it is counted even after the process is gone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import IO, Any

from pgbenchlab.hosts.host import NODES_DIR, Account, Exit, Finished, Host, LineCallback, nodes_in


def _switch(account: Account | None) -> bool:
    return account is not None and os.geteuid() != account.uid


def _as_user(account: Account | None) -> dict[str, Any]:
    """Popen arguments that run a command as account (nothing when we already are it)."""
    if account is None or not _switch(account):
        return {}
    return {"user": account.uid, "group": account.gid, "extra_groups": [], "umask": 0o077}


def _give(path: Path, owner: Account | None) -> None:
    if owner is not None and _switch(owner):
        os.chown(path, owner.uid, owner.gid)


class LocalProcess:
    """A started process; reader threads pass its output lines to the callbacks."""

    def __init__(
        self,
        popen: subprocess.Popen[str],
        callbacks: tuple[LineCallback | None, LineCallback | None],
        *,
        group: bool,
    ) -> None:
        self._popen = popen
        self._group = group
        self._lock = threading.Lock()  # no signal once reaped: the pid may be someone else's
        self._exit: Exit | None = None
        self._failures: list[BaseException] = []  # raised by a callback: re-raised by wait()
        streams = (popen.stdout, popen.stderr)
        self._readers = [
            threading.Thread(target=self._pump, args=(stream, callback), daemon=True)
            for stream, callback in zip(streams, callbacks, strict=True)
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def interrupt(self) -> None:
        self._send(signal.SIGINT, group=False)

    def kill(self) -> None:
        self._send(signal.SIGKILL, group=self._group)

    def wait(self) -> Exit:
        if self._exit is None:
            # Waited for without reaping, so the pid stays ours until the lock is held.
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            with self._lock:
                if self._exit is None:
                    _, status, usage = os.wait4(self.pid, 0)
                    self._popen.returncode = os.waitstatus_to_exitcode(status)
                    self._exit = Exit(self._popen.returncode, usage.ru_utime + usage.ru_stime)
        for reader in self._readers:
            reader.join()
        if self._failures:
            raise self._failures[0]
        return self._exit

    def _pump(self, stream: IO[str] | None, callback: LineCallback | None) -> None:
        """Pass lines to the callback; after a callback fails, only drain the stream (a full
        pipe would stall the process)."""
        assert stream is not None
        with stream:
            for line in stream:
                if callback is None:
                    continue
                try:
                    callback(line.rstrip("\n"))
                except Exception as exc:
                    self._failures.append(exc)
                    callback = None

    def _send(self, signum: int, *, group: bool) -> None:
        with self._lock:
            if self._exit is not None:
                return
            try:
                if group:
                    os.killpg(self.pid, signum)
                else:
                    os.kill(self.pid, signum)
            except ProcessLookupError:
                pass


class LocalTail:
    """A local file followed from its end when opened; only whole lines are returned."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.offset = path.stat().st_size
        except OSError:
            self.offset = 0

    def read(self, limit: int = 16 << 20) -> str:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read(limit)
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode(errors="replace")


class LocalLockedFile:
    """A local file under flock: the kernel drops the lock when this process dies."""

    def __init__(self, path: Path) -> None:
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.release()
            raise

    def read_text(self) -> str:
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        return os.pread(self._fd, size, 0).decode(errors="replace")

    def write_text(self, text: str) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text.encode(), 0)
        os.fsync(self._fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LocalHost:
    """This machine."""

    name = "local"

    def run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: PurePath | str = "/",
        timeout: float | None = None,
        as_user: Account | None = None,
        new_session: bool = False,
    ) -> Finished:
        try:
            done = subprocess.run(
                argv,
                env=None if env is None else dict(env),
                cwd=str(cwd),
                timeout=timeout,
                capture_output=True,
                text=True,
                errors="replace",
                start_new_session=new_session,
                **_as_user(as_user),
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{argv[0]} did not finish within {timeout:g} s") from None
        return Finished(done.returncode, done.stdout, done.stderr)

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
    ) -> LocalProcess:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=str(cwd),
            text=True,
            errors="replace",
            start_new_session=new_session,
            **_as_user(as_user),
        )
        return LocalProcess(popen, (on_stdout_line, on_stderr_line), group=new_session)

    def signal(self, pid: int, signum: int) -> None:
        os.kill(pid, signum)

    def read_text(self, path: PurePath) -> str:
        return Path(path).read_text(errors="replace")

    def read_bytes(self, path: PurePath) -> bytes:
        return Path(path).read_bytes()

    def read_texts(self, paths: Sequence[PurePath]) -> list[str | None]:
        texts: list[str | None] = []
        for path in paths:
            try:
                texts.append(self.read_text(path))
            except OSError:
                texts.append(None)
        return texts

    def write_text(
        self, path: PurePath, text: str, *, mode: int = 0o600, owner: Account | None = None
    ) -> None:
        target = Path(path)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        temporary = Path(name)
        try:
            with os.fdopen(fd, "w") as file:
                file.write(text)
            temporary.chmod(mode)
            _give(temporary, owner)
            temporary.replace(target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def put_file(self, local: Path, path: PurePath) -> None:
        shutil.copyfile(local, path)

    def write_in_place(self, path: PurePath, text: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def exists(self, path: PurePath) -> bool:
        return Path(path).exists()

    def mkdir(self, path: PurePath, *, mode: int = 0o700, owner: Account | None = None) -> None:
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True, mode=mode)
        _give(directory, owner)
        directory.chmod(mode)

    def make_temp_dir(self, prefix: str, parent: PurePath, *, owner: Account | None = None) -> Path:
        directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        _give(directory, owner)
        return directory

    def remove_tree(self, path: PurePath) -> None:
        target = Path(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)

    def list_dir(self, path: PurePath) -> list[str]:
        return os.listdir(path)

    def resolve(self, path: PurePath) -> Path:
        return Path(path).resolve()

    def device_of(self, path: PurePath) -> str:
        device = os.stat(path).st_dev
        return f"{os.major(device)}:{os.minor(device)}"

    def lock(self, path: PurePath) -> LocalLockedFile:
        return LocalLockedFile(Path(path))

    def follow(self, path: PurePath) -> LocalTail:
        return LocalTail(Path(path))

    def cpu_count(self) -> int | None:
        return os.cpu_count()

    def allowed_cpus(self) -> frozenset[int]:
        return frozenset(os.sched_getaffinity(0))

    def pin_prefix(self, cpus: str) -> list[str] | None:
        if taskset := shutil.which("taskset"):
            return [taskset, "-c", cpus]
        if numactl := shutil.which("numactl"):
            return [numactl, f"--physcpubind={cpus}"]
        return None

    def numactl(self) -> str | None:
        return shutil.which("numactl")

    def numa_nodes(self) -> frozenset[int]:
        return nodes_in(Path(NODES_DIR).glob("node*"))

    def clock_ticks_per_s(self) -> int:
        return os.sysconf("SC_CLK_TCK")

    def clock_readings(self, count: int) -> list[tuple[float, float, float]]:
        return [(now, now, now) for now in (time.time() for _ in range(count))]

    def free_port(self) -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    address = "127.0.0.1"

    def state_dir(self) -> None:
        return None

    def own_dir(self) -> None:
        return None

    def reach(self, socket_dir: PurePath, port: int) -> tuple[str, int]:
        return str(socket_dir), port


LOCAL_HOST: Host = LocalHost()
