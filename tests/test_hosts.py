"""LocalHost with real processes and files: what a remote host must do the same way."""

from __future__ import annotations

import os
import signal
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from pgbenchlab import osuser
from pgbenchlab.hosts import LOCAL_HOST, LocalHost
from support import group_members

HOST = LocalHost()
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching accounts needs root")


def test_run_captures_output_and_exit_code_with_the_given_env_and_cwd(tmp_path: Path) -> None:
    script = 'echo "$GREETING from $(pwd)"; echo oops >&2; exit 3'
    done = HOST.run(["sh", "-c", script], env={"GREETING": "hello"}, cwd=tmp_path, timeout=20)
    assert (done.returncode, done.stdout, done.stderr) == (3, f"hello from {tmp_path}\n", "oops\n")


def test_run_past_its_timeout_raises_timeout_error() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        HOST.run(["sleep", "30"], timeout=0.3)
    assert time.monotonic() - started < 10


@as_root
def test_run_and_start_switch_to_the_account_with_a_private_umask() -> None:
    account = osuser.server_account()
    done = HOST.run(["sh", "-c", "id -u; id -G; umask"], as_user=account, timeout=20)
    uid, groups, umask = done.stdout.split("\n")[:3]
    assert (int(uid), groups.split(), umask) == (account.uid, [str(account.gid)], "0077")
    lines: list[str] = []
    process = HOST.start(
        ["id", "-u"], env={}, cwd="/", on_stdout_line=lines.append, as_user=account
    )
    assert process.wait().returncode == 0 and lines == [str(account.uid)]


def test_started_process_streams_lines_and_stops_on_interrupt() -> None:
    ready = threading.Event()
    out: list[str] = []
    err: list[str] = []

    def on_stdout(line: str) -> None:
        out.append(line)
        ready.set()

    script = 'trap "echo bye >&2; exit 7" INT; echo ready; while :; do sleep 0.05; done'
    process = HOST.start(
        ["sh", "-c", script], env={}, cwd="/", on_stdout_line=on_stdout, on_stderr_line=err.append
    )
    assert ready.wait(10)
    process.interrupt()
    end = process.wait()
    assert (end.returncode, out, err) == (7, ["ready"], ["bye"])
    process.kill()  # reaped: nothing is signalled (the pid may be someone else's by now)
    assert process.wait() == end


def test_kill_of_a_process_group_leaves_nothing_behind() -> None:
    script = "sleep 300 & sleep 300 & echo started; wait"
    started = threading.Event()
    process = HOST.start(
        ["sh", "-c", script],
        env={"PATH": os.environ["PATH"]},
        cwd="/",
        on_stdout_line=lambda line: started.set(),
        new_session=True,
    )
    assert started.wait(10)
    assert len(group_members(process.pid)) == 3  # the shell and its two sleeps
    process.kill()
    assert process.wait().returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(process.pid) == []


def test_cpu_of_a_started_process_is_accounted_after_it_is_gone() -> None:
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    process = HOST.start([sys.executable, "-c", burn], env={}, cwd="/")
    end = process.wait()
    assert end.returncode == 0 and 0.35 <= end.cpu_s < 5


def test_a_failing_callback_does_not_stall_the_process_and_is_raised_by_wait() -> None:
    def refuse(line: str) -> None:
        raise ValueError(line)

    # 200k lines: far more than a pipe holds, so an undrained pipe would block the writer.
    lines = "for i in range(200_000): print(i)"
    process = HOST.start([sys.executable, "-c", lines], env={}, cwd="/", on_stdout_line=refuse)
    with pytest.raises(ValueError, match=r"^0$"):
        process.wait()


def test_write_text_replaces_the_file_whole_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.conf"
    HOST.write_text(path, "old\n", mode=0o640)
    with path.open() as before:
        HOST.write_text(path, "new\n")
        assert before.read() == "old\n"  # a reader keeps the whole old file: a new inode
    assert path.read_text() == "new\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["postgresql.conf"]  # no temporary file left
    with pytest.raises(OSError):
        HOST.write_text(tmp_path / "missing" / "file", "x")
    assert HOST.read_text(path) == "new\n" and HOST.read_bytes(path) == b"new\n"


@as_root
def test_files_and_directories_are_given_to_the_owner(tmp_path: Path) -> None:
    account = osuser.server_account()
    HOST.write_text(tmp_path / "owned", "x", owner=account)
    HOST.mkdir(tmp_path / "a" / "b", mode=0o750, owner=account)
    made = HOST.make_temp_dir("pgbl-", tmp_path, owner=account)
    for path, mode in ((tmp_path / "owned", 0o600), (tmp_path / "a" / "b", 0o750), (made, 0o700)):
        info = os.stat(path)
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (
            account.uid,
            account.gid,
            mode,
        )


def test_directories_list_resolve_and_remove_without_following_links(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    data = tmp_path / "data"
    HOST.mkdir(data / "base")
    (data / "base" / "1").write_text("x")
    (data / "PG_VERSION").write_text("17\n")
    (data / "link").symlink_to(keep)
    assert sorted(HOST.list_dir(data)) == ["PG_VERSION", "base", "link"]
    assert HOST.resolve(data / "link") == keep.resolve()
    for name in HOST.list_dir(data):
        HOST.remove_tree(data / name)
    HOST.remove_tree(data / "absent")
    assert HOST.list_dir(data) == [] and (keep / "precious").exists()
    assert HOST.exists(data) and not HOST.exists(data / "base")
    temporary = HOST.make_temp_dir("pgbl-", tmp_path)
    assert temporary.name.startswith("pgbl-") and stat.S_IMODE(os.stat(temporary).st_mode) == 0o700


def test_follow_returns_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("before\n")
    tail = HOST.follow(log)
    with log.open("a") as f:
        f.write("one\ntw")
        f.flush()
        assert tail.read() == "one\n"
        f.write("o\nthree")
        f.flush()
        assert tail.read() == "two\n"
    later = HOST.follow(tmp_path / "later.log")
    (tmp_path / "later.log").write_text("first\n")
    assert later.read() == "first\n"  # a file that did not exist is followed from its start


def test_a_locked_file_is_held_until_released(tmp_path: Path) -> None:
    path = tmp_path / "claim.json"
    held = HOST.lock(path)
    held.write_text('{"state": "creating"}\n')
    with pytest.raises(BlockingIOError):
        HOST.lock(path)
    assert held.read_text() == HOST.read_text(path) == '{"state": "creating"}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    held.release()
    HOST.lock(path).release()


def test_facts_and_signals_are_this_machines() -> None:
    assert HOST.cpu_count() == os.cpu_count()
    assert HOST.clock_ticks_per_s() == os.sysconf("SC_CLK_TCK")
    info = os.stat("/")
    assert HOST.device_of(Path("/")) == f"{os.major(info.st_dev)}:{os.minor(info.st_dev)}"
    port = HOST.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    HOST.signal(os.getpid(), 0)
    process = HOST.start(["true"], env={}, cwd="/")
    process.wait()
    with pytest.raises(ProcessLookupError):
        HOST.signal(process.pid, 0)
    assert LOCAL_HOST.name == "local"
