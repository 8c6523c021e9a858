"""The kernel's per-task accounting of processes as they exit (taskstats over generic netlink):
each exiting task's parent, its CPU time and its voluntary and involuntary context switches,
which /proc forgets once a process has been reaped.

Its CPU time is the scheduler's runtime (`cpu_run_virtual_total`, ns; filled where the kernel
has delay accounting built in, switched on or not). The kernel takes the record before it adds
the task's last slice and before the task frees its memory, so the figure is a lower bound of
what the process used, short by less than a tick: what a check of "the accounting covers at
least this" needs. The tick-sampled user and system times (`ac_utime`, `ac_stime`) are the
fallback: right on average, but each short-lived backend's is a tick or nothing, and over a run
of `-C` backends their sum came out 10 % above the cgroup's exact runtime.

A listener registers for the exits on every CPU of this machine (root: CAP_NET_ADMIN, and the
initial network namespace), a thread collects them, and `close()` returns those of the
processes asked for. The kernel sends each record from the exiting task itself, before its
parent can reap it: once the parent's reaped CPU shows the exit, the record is in the socket.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 3, 1, 2
TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK = 1, 3
TASKSTATS_TYPE_PID, TASKSTATS_TYPE_STATS, TASKSTATS_TYPE_AGGR_PID = 1, 3, 4
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
HEADER = struct.Struct("IHHII")  # nlmsghdr
GENL = struct.Struct("BBH")  # genlmsghdr
# Offsets in struct taskstats (linux/taskstats.h; stable, fields are only ever appended).
RUNTIME = 72  # cpu_run_virtual_total (ns)
PIDS, TIMES, SWITCHES = (
    128,
    152,
    272,
)  # ac_pid ac_ppid (u32) · ac_utime ac_stime (µs) · nvcsw nivcsw
STATS_MIN_LEN = SWITCHES + 16
RECEIVE_BUFFER = 8 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


@dataclass(frozen=True)
class TaskExit:
    pid: int
    ppid: int
    cpu_s: float  # exact runtime where the kernel gives it, else user + system
    switches: int  # voluntary + involuntary


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(
    family: int, command: int, attrs: bytes, seq: int, flags: int = NLM_F_REQUEST
) -> bytes:
    body = GENL.pack(command, 1, 0) + attrs
    return HEADER.pack(HEADER.size + len(body), family, flags, seq, 0) + body


def attributes(data: bytes) -> dict[int, list[bytes]]:
    """Netlink attributes (type → payloads), nested ones left as bytes."""
    found: dict[int, list[bytes]] = {}
    at = 0
    while at + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, at)
        if length < 4:
            break
        found.setdefault(kind & 0x3FFF, []).append(data[at + 4 : at + length])
        at += (length + 3) & ~3
    return found


def messages(data: bytes) -> list[tuple[int, bytes]]:
    """(type, payload after the generic netlink header) of each message in a datagram."""
    found = []
    at = 0
    while at + HEADER.size <= len(data):
        length, kind, _flags, _seq, _pid = HEADER.unpack_from(data, at)
        if length < HEADER.size:
            break
        found.append((kind, data[at + HEADER.size : at + length]))
        at += (length + 3) & ~3
    return found


def task_exits(payload: bytes) -> list[TaskExit]:
    """The exit records in one taskstats message (after its generic netlink header)."""
    found = []
    for nested in attributes(payload[GENL.size :]).get(TASKSTATS_TYPE_AGGR_PID, []):
        stats = attributes(nested).get(TASKSTATS_TYPE_STATS, [b""])[0]
        if len(stats) < STATS_MIN_LEN:
            continue
        pid, ppid = struct.unpack_from("II", stats, PIDS)
        (runtime_ns,) = struct.unpack_from("Q", stats, RUNTIME)
        user, system = struct.unpack_from("QQ", stats, TIMES)
        cpu_s = runtime_ns / 1e9 if runtime_ns else (user + system) / 1e6
        voluntary, involuntary = struct.unpack_from("QQ", stats, SWITCHES)
        found.append(TaskExit(pid, ppid, cpu_s, voluntary + involuntary))
    return found


class ExitListener:
    """Collects the exits of a process's children (and of their children) while it is open."""

    def __init__(self, parent: int) -> None:
        """Register; OSError (with why) where the kernel refuses."""
        self.parents = {parent}
        self.exits: dict[int, TaskExit] = {}
        self.lost = False  # the socket overflowed: some exits are missing
        self._halt = threading.Event()
        self._lock = threading.Lock()
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        try:
            try:  # past net.core.rmem_max (root may): a burst of exits must not overflow it
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            sock.bind((0, 0))
            family = _family(sock)
            cpus = f"0-{(os.cpu_count() or 1) - 1}\0".encode()
            register = _attr(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpus)
            sock.send(_message(family, TASKSTATS_CMD_GET, register, 2, NLM_F_REQUEST | NLM_F_ACK))
            self._acknowledged(sock)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._thread = threading.Thread(target=self._loop, name="taskstats", daemon=True)
        self._thread.start()

    def _acknowledged(self, sock: socket.socket) -> None:
        """Wait for the registration's answer (exits that arrive first are kept)."""
        sock.settimeout(2.0)
        try:
            while True:
                for kind, payload in messages(sock.recv(1 << 16)):
                    if kind == NLMSG_ERROR:
                        code = -int(struct.unpack_from("i", payload, 0)[0])
                        if code:
                            raise OSError(code, os.strerror(code))
                        return
                    self._take_one(payload)
        finally:
            sock.settimeout(None)

    def watch(self, pids: list[int]) -> None:
        """Processes whose children count too (the parent's children seen so far)."""
        with self._lock:
            self.parents.update(pids)

    def close(self) -> dict[int, TaskExit]:
        """Stop, after reading what the socket holds; the exits under the parents, by pid."""
        self._halt.set()
        self._thread.join()
        self._drain(lambda: 0.0)
        self._sock.close()
        return self.exits

    def _loop(self) -> None:
        while not self._halt.is_set():
            self._drain(lambda: 0.1, once=True)

    def _drain(self, timeout: Callable[[], float], *, once: bool = False) -> None:
        while True:
            ready, _, _ = select.select([self._sock], [], [], timeout())
            if not ready:
                return
            try:
                data = self._sock.recv(1 << 16)
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise
                self.lost = True
                continue
            self._take(data)
            if once:
                return

    def _take(self, data: bytes) -> None:
        for kind, payload in messages(data):
            if kind != NLMSG_ERROR:
                self._take_one(payload)

    def _take_one(self, payload: bytes) -> None:
        with self._lock:
            for record in task_exits(payload):
                if record.ppid in self.parents:
                    self.exits[record.pid] = record


def _family(sock: socket.socket) -> int:
    """The TASKSTATS generic netlink family's number."""
    sock.send(
        _message(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, _attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0"), 1)
    )
    sock.settimeout(2.0)
    try:
        for kind, payload in messages(sock.recv(1 << 16)):
            found = attributes(payload[GENL.size :]).get(CTRL_ATTR_FAMILY_ID)
            if kind != NLMSG_ERROR and found:
                return int(struct.unpack("H", found[0][:2])[0])
    finally:
        sock.settimeout(None)
    raise OSError(errno.ENOENT, "the kernel has no taskstats")
