"""Long-running processes on a remote host, started detached so that they outlive the SSH
connection and a killed pgbenchlab can find, stop or collect them on its next start.

Each started process gets a directory of its own under ~/.pgbenchlab/procs on that host: a
small monitor (python3 there) forks the command with its output in `stdout` and `stderr`, writes
`pid` ("command monitor") and, once the command has ended, `exit` (JSON: returncode and the
command's own CPU seconds from wait4). The environment reaches the monitor on its stdin, never
in argv.

While the command runs, one SSH channel follows its stderr (`tail -F`, which also tells when
the command has ended): pgbench's progress lines are wanted live, its stdout (the report) is
not, and is read once at the end. No other process or round trip there while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import shlex
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

import asyncssh

from pgbenchlab.hosts import ssh
from pgbenchlab.hosts.host import Exit, Finished, LineCallback

STATE_DIR = ".pgbenchlab"  # under the account's home
PROCS_DIR = "procs"  # under the state directory: a directory per pgbenchlab process there
OWNER_FILE = "owner"  # in it: locked while that pgbenchlab lives
FOLLOW_POLL_S = 0.1  # how soon the end of a command is seen (tail's checks cost microseconds)
KILLED = -9  # the returncode of a command whose monitor died with it (no exit file)

# SIGINT is set to its default first: Python's own handler, inherited by the forked child, would
# turn a SIGINT arriving before the exec into a flag the exec then forgets.
MONITOR = r"""
import json, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
d, cwd, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
env = json.loads(sys.stdin.readline())
os.makedirs(d, 0o700)
r, w = os.pipe()
if os.fork():
    os.close(w)
    print(os.read(r, 64).decode(), flush=True)  # "command monitor"
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
def create(name):
    return os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
out, err = create("stdout"), create("stderr")
pid = os.fork()
if pid == 0:
    try:
        os.setpgid(0, 0)
        os.dup2(out, 1); os.dup2(err, 2); os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    except OSError as e:
        os.write(2, f"{argv[0]}: {e}\n".encode())
    os._exit(127)
def put(name, text):
    with open(os.path.join(d, name + ".tmp"), "w") as f:
        f.write(text)
    os.rename(os.path.join(d, name + ".tmp"), os.path.join(d, name))
try:
    os.setpgid(pid, pid)  # here too: the group exists before anyone is told the pid
except OSError:
    pass
put("pid", f"{pid} {os.getpid()}\n")
os.write(w, f"{pid} {os.getpid()}".encode()); os.close(w)
_, status, usage = os.wait4(pid, 0)
put("exit", json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                        "cpu_s": usage.ru_utime + usage.ru_stime}) + "\n")
"""


# A file's lock held there (`remote.RemoteLockedFile`): the holder lets go when its stdin
# closes or stays silent for LOCK_SILENCE_S, so a connection lost without a word (a network
# down), whose session sshd keeps for hours, does not keep the lock with it.
LOCK_SILENCE_S = 30
HEARTBEAT_S = 5
LOCK_HOLDER = f"""
import os, select
print("locked", flush=True)
while select.select([0], [], [], {LOCK_SILENCE_S})[0] and os.read(0, 64):
    pass
"""


# Answers each line on its stdin with its clock: one process and one channel for all of a
# clock offset's probes, so a probe's round trip is two small messages, not a channel opened
# and a process started before the clock is read (which put the reading late: a bias of ms).
CLOCK_ECHO = """
import sys, time
for _ in sys.stdin:
    print(repr(time.time()), flush=True)
"""


async def clock_readings(
    connection: asyncssh.SSHClientConnection, count: int
) -> list[tuple[float, float, float]]:
    """count (before, remote clock, after) readings through one clock echo; a first, unkept
    probe waits for python3 to start."""
    readings = []
    async with connection.create_process(f"exec python3 -c {shlex.quote(CLOCK_ECHO)}") as echo:
        for _ in range(count + 1):
            before = time.time()
            echo.stdin.write("\n")
            answer = await echo.stdout.readline()
            readings.append((before, float(answer), time.time()))
        echo.stdin.write_eof()
    return readings[1:]


# Reads the files named on each line of its stdin (a JSON list) and answers with their texts
# (None for one it cannot read) on one line: a telemetry sample of a dozen /proc files is one
# round trip over a channel kept open, where SFTP takes four per file.
FILE_READER = """
import json, sys
def text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None
for line in sys.stdin:
    print(json.dumps([text(p) for p in json.loads(line)]), flush=True)
"""


@dataclass
class _Reader:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    process: asyncssh.SSHClientProcess[str] | None = None


_readers: weakref.WeakKeyDictionary[asyncssh.SSHClientConnection, _Reader] = (
    weakref.WeakKeyDictionary()
)


async def read_files(
    connection: asyncssh.SSHClientConnection, paths: list[str]
) -> list[str | None]:
    """The texts of paths there, through the connection's file reader (started on first use;
    one request at a time). ConnectionError when the connection or the reader is gone."""
    reader = _readers.setdefault(connection, _Reader())
    async with reader.lock:
        try:
            if reader.process is None:
                command = f"exec python3 -c {shlex.quote(FILE_READER)}"
                reader.process = await connection.create_process(command)
            reader.process.stdin.write(json.dumps(paths) + "\n")
            answer = await reader.process.stdout.readline()
        except (asyncssh.Error, OSError) as exc:
            reader.process = None
            raise ConnectionError(f"reading files there: {exc}") from None
        if not answer:
            reader.process = None
            raise ConnectionError("reading files there: the reader has ended")
    texts: list[str | None] = json.loads(answer)
    return texts


async def heartbeat(process: asyncssh.SSHClientProcess[str]) -> None:
    """A line to a lock holder every HEARTBEAT_S, until cancelled or the connection goes."""
    with contextlib.suppress(Exception):
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            process.stdin.write(".\n")


def monitor_command(directory: PurePosixPath, cwd: str, argv: list[str]) -> str:
    return shlex.join(["python3", "-c", MONITOR, str(directory), cwd, *argv])


class DetachedHost(Protocol):
    """What a detached process needs of its host (`remote.RemoteHost`)."""

    name: str

    async def connection(self) -> asyncssh.SSHClientConnection: ...

    def signal(self, pid: int, signum: int) -> None: ...

    def collect(self, directory: PurePosixPath) -> Exit: ...

    def read_text(self, path: PurePosixPath) -> str: ...


class RemoteProcess:
    """A detached command on a remote host: its stderr followed from this machine while it
    runs, its stdout read when it has ended."""

    def __init__(
        self,
        host: DetachedHost,
        directory: PurePosixPath,
        pids: tuple[int, int],  # the command's and its monitor's
        callbacks: tuple[LineCallback | None, LineCallback | None],
        *,
        group: bool,
    ) -> None:
        self.host = host
        self.directory = directory
        self._pid, self._monitor = pids
        self._group = group
        self._exit: Exit | None = None
        self._failures: list[BaseException] = []
        self._on_stdout = callbacks[0]
        self._pump = threading.Thread(target=self._pump_stderr, args=(callbacks[1],), daemon=True)
        self._pump.start()

    @property
    def pid(self) -> int:
        return self._pid

    def interrupt(self) -> None:
        self._send(2, group=False)

    def kill(self) -> None:
        self._send(9, group=self._group)

    def wait(self) -> Exit:
        self._pump.join()
        if self._failures:
            raise self._failures[0]
        if self._exit is None:
            stdout = ""
            if self._on_stdout is not None:
                with contextlib.suppress(FileNotFoundError):  # a monitor that never ran
                    stdout = self.host.read_text(self.directory / "stdout")
            self._exit = self.host.collect(self.directory)
            for line in stdout.splitlines():
                self._deliver(self._on_stdout, line)
            if self._failures:
                raise self._failures[0]
        return self._exit

    def _send(self, signum: int, *, group: bool) -> None:
        if self._exit is not None:
            return
        with contextlib.suppress(OSError):  # gone already, or unreachable: wait() says which
            self.host.signal(-self._pid if group else self._pid, signum)

    def _deliver(self, callback: LineCallback | None, line: str) -> None:
        if callback is not None and not self._failures:
            try:
                callback(line)
            except Exception as exc:
                self._failures.append(exc)

    def _pump_stderr(self, callback: LineCallback | None) -> None:
        """Follow stderr until the command has ended; lines reach the callback in this thread
        (a callback may use the host, so it must not run on the SSH loop)."""
        lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        following = ssh.submit(self._follow(lines.put))
        while (line := lines.get()) is not None:
            self._deliver(callback, line)
        try:
            following.result()
        except BaseException as exc:
            self._failures.append(_lost(self.host.name, exc))

    async def _follow(self, put: Callable[[str | None], None]) -> None:
        command = follow_command(self.directory, self._pid, self._monitor)
        try:
            connection = await self.host.connection()
            async with connection.create_process(command, errors="replace") as process:
                async for line in process.stdout:
                    if line:  # "" marks the end
                        put(line.rstrip("\n"))
                await process.wait()
        finally:
            put(None)


def started_process(
    host: DetachedHost,
    program: str,
    directory: PurePosixPath,
    answer: Finished,
    callbacks: tuple[LineCallback | None, LineCallback | None],
) -> RemoteProcess:
    """The command whose monitor answered (`MONITOR`: "command monitor" pids on its stdout)."""
    pids = answer.stdout.split()
    if answer.returncode != 0 or len(pids) != 2 or not all(p.isdigit() for p in pids):
        raise OSError(f"host {host.name}: cannot start {program}: {answer.stderr.strip()}")
    return RemoteProcess(host, directory, (int(pids[0]), int(pids[1])), callbacks, group=True)


def follow_command(directory: PurePosixPath, pid: int, monitor: int) -> str:
    """The command's stderr from its start until it has ended and its exit file is there.

    tail watches the command itself, which its monitor reaps at once. Not the monitor: once
    the command has ended it is a zombie until the host's init reaps it (about 2 s late in a
    container's init, every run paying for it; never, without one), and a zombie looks alive.
    The exit file is written a moment after the command's end: waited for while the monitor
    lives."""
    stderr, done = (shlex.quote(str(directory / name)) for name in ("stderr", "exit"))
    return (
        f"tail -q -n +1 -s {FOLLOW_POLL_S} -F --pid={pid} {stderr} 2>/dev/null; "
        f"while [ ! -e {done} ] && kill -0 {monitor} 2>/dev/null; do sleep 0.02; done"
    )


def _lost(host: str, exc: BaseException) -> BaseException:
    if isinstance(exc, (asyncssh.Error, ConnectionError, EOFError)):
        reason = exc.reason if isinstance(exc, asyncssh.Error) else str(exc)
        return ConnectionError(f"host {host}: the SSH connection was lost ({reason})")
    return exc


def parse_exit(text: str | None) -> Exit:
    if not text:
        return Exit(KILLED, 0.0)
    record = json.loads(text)
    return Exit(int(record["returncode"]), float(record["cpu_s"]))
