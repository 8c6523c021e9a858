"""`RemoteHost` against real sshd in network namespaces (tests/netns_hosts.py): the Host
interface over SSH and SFTP, detached processes, host-key and login refusals."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import PurePosixPath

import pytest

from netns_hosts import TestHosts
from pgbenchlab.campaign.hosts import clock_offset
from pgbenchlab.errors import HostError
from pgbenchlab.hosts import RemoteHost, SshTarget
from pgbenchlab.hosts.detached import OWNER_FILE
from pgbenchlab.profiles import PGBENCH
from pgbenchlab.telemetry.profiler import Profiler, check_perf_for_pgbench


@pytest.fixture(scope="module")
def remote(test_hosts: TestHosts) -> RemoteHost:
    test_hosts.add("r1")
    host = RemoteHost(target(test_hosts, "r1"))
    yield host
    host.close()


def target(hosts: TestHosts, name: str, **changes: str) -> SshTarget:
    fields = {
        "name": name,
        "ssh": hosts.ssh_target(name),
        "identity": str(hosts.identity),
        "known_hosts": str(hosts.known_hosts),
    } | changes
    return SshTarget(**fields)


def test_commands_files_and_facts(remote: RemoteHost) -> None:
    done = remote.run(
        ["sh", "-c", 'echo "$SECRET" "$1"; pwd; echo err >&2; exit 3', "-", "a b"],
        env={"SECRET": "s3cret", "PATH": "/nonexistent"},
        cwd="/usr",
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "s3cret a b\n/usr\n", "err\n")
    home = remote.home
    assert str(home).startswith("/home/")
    work = remote.make_temp_dir("t-", home)
    remote.mkdir(work / "a" / "b", mode=0o750)
    remote.write_text(work / "a" / "f", "one\ntwo\n", mode=0o640)
    assert remote.read_text(work / "a" / "f") == "one\ntwo\n"
    # Several at once, through one reader there: None for what cannot be read.
    texts = remote.read_texts([work / "a" / "f", work / "nope", PurePosixPath("/proc/self/stat")])
    assert texts[:2] == ["one\ntwo\n", None] and "(python3)" in (texts[2] or "")
    assert sorted(remote.list_dir(work / "a")) == ["b", "f"]
    assert remote.run(["stat", "-c", "%a", str(work / "a" / "f")]).stdout == "640\n"
    assert remote.exists(work / "a" / "b") and not remote.exists(work / "nope")
    with pytest.raises(FileNotFoundError):
        remote.read_text(work / "nope")
    tail = remote.follow(work / "a" / "f")
    remote.run(["sh", "-c", f"printf 'three\\nfour' >> {work}/a/f"])
    assert tail.read() == "three\n"
    assert remote.device_of(work).count(":") == 1
    assert remote.cpu_count() and remote.clock_ticks_per_s() == 100
    assert 0 < remote.free_port() < 65536
    remote.remove_tree(work)
    assert not remote.exists(work)
    # This machine's files are not there (a private /tmp).
    assert not remote.exists(PurePosixPath("/tmp") / "pytest-of-root")


def test_detached_process_streams_and_survives(remote: RemoteHost) -> None:
    lines: list[str] = []
    proc = remote.start(
        ["sh", "-c", 'for i in 1 2 3; do echo "$X$i"; done; echo e >&2; exit 4'],
        env={"X": "x"},
        cwd="/",
        on_stdout_line=lines.append,
    )
    end = proc.wait()
    assert end.returncode == 4 and lines == ["x1", "x2", "x3"]
    assert remote.list_dir(remote.own_dir()) == [OWNER_FILE]


def test_a_killed_pgbenchlab_leaves_nothing_running(
    remote: RemoteHost, test_hosts: TestHosts
) -> None:
    proc = remote.start(["sleep", "300"], env={}, cwd="/")
    remote.close()  # as if this process had died: the command goes on there
    time.sleep(0.3)
    assert any("sleep 300" in p for p in test_hosts.account_processes())
    again = RemoteHost(remote.target)
    assert again.stop_leftovers() == [str(proc.pid)]
    time.sleep(0.3)
    assert not any("sleep 300" in p for p in test_hosts.account_processes())
    again.close()


def test_a_live_pgbenchlab_s_commands_are_left_to_it(
    remote: RemoteHost, test_hosts: TestHosts
) -> None:
    """Two campaigns under one login: the second one's start stops only what the gone left."""
    proc = remote.start(["sleep", "300"], env={}, cwd="/")
    other = RemoteHost(remote.target)
    try:
        assert other.stop_leftovers() == []
        assert any("sleep 300" in p for p in test_hosts.account_processes())
    finally:
        other.close()
        proc.kill()
    assert proc.wait().returncode == -signal.SIGKILL


def test_interrupt_and_kill(remote: RemoteHost) -> None:
    proc = remote.start(["sleep", "300"], env={}, cwd="/")
    proc.interrupt()
    assert proc.wait().returncode == -signal.SIGINT
    proc = remote.start(["sh", "-c", "sleep 300; true"], env={}, cwd="/")
    proc.kill()
    assert proc.wait().returncode == -signal.SIGKILL


def test_ctrl_c_while_a_start_is_in_flight_stops_what_it_started(
    remote: RemoteHost, test_hosts: TestHosts
) -> None:
    """A Ctrl-C that comes while the SSH session starting a command is slow to begin: the
    start is seen through, its command stopped and its directory removed, and the interruption
    goes on (else the command, detached there, would run its whole duration)."""
    remote.start(["true"], env={}, cwd="/").wait()  # its directory and login facts known
    main = threading.main_thread().ident
    assert main is not None
    ctrl_c = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    test_hosts.slow_sessions("r1", 1)
    try:
        ctrl_c.start()
        with pytest.raises(KeyboardInterrupt):
            remote.start(["sleep", "301"], env={}, cwd="/")
    finally:
        ctrl_c.cancel()
        test_hosts.slow_sessions("r1", None)
    assert not any("sleep 301" in p for p in test_hosts.account_processes())
    assert remote.list_dir(remote.own_dir()) == [OWNER_FILE]


def test_perf_profiles_a_process_there(remote: RemoteHost) -> None:
    """pgbench's profile on a load generator host: perf checked, attached to a process there
    (a busy shell standing for pgbench) and folded from there, as its login user."""
    check_perf_for_pgbench(remote)
    busy = remote.start(["sh", "-c", "while :; do :; done"], env={}, cwd="/")
    work = remote.make_temp_dir("perf-", remote.home)
    profiler = Profiler(busy.pid, work, host=remote, process=PGBENCH, label="busy")
    try:
        profiler.measuring()
        profiler.start()
        time.sleep(1.0)  # ~100 samples of a CPU of its own; a loaded machine gives it less
        profiler.measured()
        profile = profiler.stop()
    finally:
        busy.kill()
        busy.wait()
        profiler.close()
        remote.remove_tree(work)
    assert profile is not None and profile.process == PGBENCH and profile.samples > 10
    assert {frames[0] for frames, _ in profile.stacks()} == {PGBENCH}


def test_clock_readings_come_from_one_echo_without_bias(remote: RemoteHost) -> None:
    """The host's clock is this machine's: every reading falls inside its probe's round trip,
    and the best probe's round trip is a message each way (a process started per probe, as
    before, made it milliseconds and put the reading late in it)."""
    readings = remote.clock_readings(5)
    assert len(readings) == 5
    assert all(before <= there <= after for before, there, after in readings)
    offset, uncertainty = clock_offset(remote)
    assert abs(offset) <= uncertainty < 0.005


def test_lock_is_exclusive_and_released(remote: RemoteHost) -> None:
    path = remote.home / "claim"
    held = remote.lock(path)
    held.write_text("mine")
    with pytest.raises(BlockingIOError):
        remote.lock(path)
    assert held.read_text() == "mine"
    held.release()
    remote.lock(path).release()


def test_unknown_host_key_and_wrong_user_are_refused(test_hosts: TestHosts) -> None:
    test_hosts.add("r2", trusted=False)
    with pytest.raises(HostError, match=r"not in known_hosts.*ssh-keyscan"):
        RemoteHost(target(test_hosts, "r2")).check()
    wrong = target(test_hosts, "r1", ssh=f"nobody@{test_hosts.hosts['r1'].address}")
    with pytest.raises(HostError, match="refused the login"):
        RemoteHost(wrong).check()
