"""The command line in a process of its own, without paying its imports for every call.

``python -m pgbenchlab.cli`` spends about two seconds importing polars, numpy and scipy before
it reads its arguments, and the fault tests run it a hundred times. Here one helper process
imports `pgbenchlab.cli` once and forks a child per call. Each call is still a process of its
own: its own exit status, stdout, stderr, working directory and environment; stdin is
/dev/null; an exception that escapes `main` prints its traceback and exits 1 as the interpreter
does. Only the import is shared: a setting read at import time (`osuser.SERVICE_USER`) comes
from the environment the tests started with. `test_cli_process.py` compares a call with the
real ``python -m pgbenchlab.cli``. `run_forked` runs another module's entry point the same way
(``python -m pytest``, for `test_ci_guard`'s inner runs).

Run as a script, this file is the helper; imported, it is the client (`run_cli`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, NoReturn

CLI = [sys.executable, "-m", "pgbenchlab.cli"]  # what each call stands for

_helper: subprocess.Popen[bytes] | None = None


def run_cli(
    *args: str | Path,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    before: str = "",
) -> subprocess.CompletedProcess[str]:
    """Like ``subprocess.run([*CLI, *args], capture_output=True, text=True, ...)``; `before`:
    Python statements the child runs first, as ``python -c "...; sys.exit(main())"`` would."""
    return run_forked(
        "pgbenchlab.cli:main", *args, cwd=cwd, env=env, timeout=timeout, before=before
    )


def run_forked(
    entry: str,
    *args: str | Path,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    before: str = "",
) -> subprocess.CompletedProcess[str]:
    """``sys.exit(function())`` with `args` as its command line, `entry` = "module:function";
    e.g. "pytest:console_main" for ``python -m pytest``."""
    argv = [str(a) for a in args]
    command = [sys.executable, "-m", entry.partition(":")[0], *argv]
    helper = _started()
    assert helper.stdin is not None and helper.stdout is not None
    with tempfile.TemporaryDirectory(prefix="pgbl-cli-") as scratch:
        out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
        request = {
            "args": argv,
            "cwd": str(cwd if cwd is not None else os.getcwd()),
            "env": dict(os.environ if env is None else env),
            "stdout": str(out),
            "stderr": str(err),
            "before": before,
            "entry": entry,
        }
        pid = None
        try:
            helper.stdin.write(json.dumps(request).encode() + b"\n")
            pid = _reply(helper.stdout.fileno())
            code = _exit_code(helper.stdout.fileno(), pid, timeout)
        except BaseException:  # e.g. pytest-timeout: the helper's replies are out of step now
            _discard(helper, pid)
            raise
        stdout, stderr = (p.read_text() if p.exists() else "" for p in (out, err))
    if code is None:
        raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _started() -> subprocess.Popen[bytes]:
    global _helper
    if _helper is None or _helper.poll() is not None:
        # Unbuffered both ways; it ends when its stdin closes (`_stop`, at exit).
        _helper = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        atexit.register(_stop, _helper)
    return _helper


def _discard(helper: subprocess.Popen[bytes], child: int | None) -> None:
    """Kill the helper and its running child; the next call starts a new helper."""
    global _helper
    if child is not None and _parent(child) == helper.pid:  # not yet reaped: not reused
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    helper.kill()
    helper.wait()
    _helper = None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def _stop(helper: subprocess.Popen[bytes]) -> None:
    """Close the helper's input, which ends it, and reap it."""
    assert helper.stdin is not None
    helper.stdin.close()
    try:
        helper.wait(timeout=30)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


def _exit_code(replies: int, pid: int, timeout: float) -> int | None:
    """The child's exit code (negative: killed by that signal); None after killing it on
    timeout."""
    ready, _, _ = select.select([replies], [], [], timeout)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    code = _reply(replies)
    return code if ready else None


def _reply(replies: int) -> int:
    """One line of the helper, read a byte at a time: nothing of the next is read ahead, so
    `select` sees it."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(replies, 1)
        if not byte:
            raise RuntimeError("the command-line helper process ended")
        line += byte
    return int(line)


# The helper -------------------------------------------------------------------------------------


def _serve() -> None:
    importlib.import_module("pgbenchlab.cli")  # the import every call shares

    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _become(request)
            _exit(request["entry"], request["before"])
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


def _become(request: dict[str, Any]) -> None:
    """The child takes the call's streams, directory, environment and arguments."""
    streams = (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    )
    for fd, path, flags in streams:
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["entry"].partition(":")[0], *request["args"]]


def _exit(entry: str, before: str) -> NoReturn:
    """``sys.exit(function())`` of ``entry`` = "module:function", ended as the interpreter ends
    it (the exit code, an escaping exception's traceback, non-daemon threads joined, atexit
    functions run, streams flushed) but without tearing down every module: 0.2 s of each call.
    A file the command left unclosed would lose its buffered tail: a failure, never a false
    pass."""
    interrupted = False
    try:
        exec(before, {})
        module, _, function = entry.partition(":")
        code = _status(getattr(importlib.import_module(module), function)())
    except SystemExit as stop:
        code = _status(stop.code)
    except BaseException as error:
        sys.excepthook(type(error), error, error.__traceback__)
        code, interrupted = 1, isinstance(error, KeyboardInterrupt)
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if interrupted:  # the interpreter ends an uncaught Ctrl-C by the signal itself
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _status(code: object) -> int:
    """What the interpreter makes of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    _serve()
