"""Operating-system counters from /proc: CPU, memory, the data directory's disk, and the CPU
of the server's processes and of pgbench.

The sampler is told everything it watches (the host, the postmaster's pid, pgbench's pid, a
block device "major:minor" and the /proc root), and reads through the `Host`, so it can watch a
server on another machine. A sample is three batches of small files (the machine's, the
postmaster's, its children's): tens of microseconds here, three round trips to another host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from pgbenchlab.hosts import LOCAL_HOST, Host

# read as they are, never summed or differenced (the pooler's: `telemetry.pooler`)
GAUGE_SOURCES = ("memory", "pgbouncer_pools")
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's sector size
MB = 1024 * 1024
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
MEMINFO_GAUGES = {  # /proc/meminfo name → metric (MiB)
    "Dirty": "dirty_mb",
    "Writeback": "writeback_mb",
    "Cached": "cached_mb",
    "MemAvailable": "available_mb",
}
# /proc/diskstats columns (after major, minor, name) we keep.
DISK_FIELDS = {
    0: "reads",
    2: "read_sectors",
    3: "read_ms",
    4: "writes",
    6: "write_sectors",
    7: "write_ms",
    9: "io_ms",
}

Snapshot = dict[str, dict[str, float]]  # source → metric → raw value


def _read(path: PurePath, host: Host) -> str | None:
    try:
        return host.read_text(path)
    except OSError:
        return None


def _read_all(paths: Sequence[PurePath], host: Host) -> list[str | None]:
    """Several files in one go (one round trip to another host); None for each unread."""
    try:
        return host.read_texts(paths)
    except OSError:
        return [None] * len(paths)


def read_cpu(proc: PurePath, host: Host = LOCAL_HOST) -> dict[str, float] | None:
    """Host CPU time by state (ticks, all CPUs) from the first line of /proc/stat."""
    return parse_cpu(_read(proc / "stat", host))


def parse_cpu(text: str | None) -> dict[str, float] | None:
    if not text or not text.startswith("cpu "):
        return None
    values = text.split("\n", 1)[0].split()[1:]
    return {name: float(v) for name, v in zip(CPU_FIELDS, values, strict=False)}


def read_memory(proc: PurePath, host: Host = LOCAL_HOST) -> dict[str, float] | None:
    return parse_memory(_read(proc / "meminfo", host))


def parse_memory(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in MEMINFO_GAUGES:
            found[MEMINFO_GAUGES[name]] = int(rest.split()[0]) / 1024  # kB → MiB
    return found


def read_disk(proc: PurePath, device: str, host: Host = LOCAL_HOST) -> dict[str, float] | None:
    """Cumulative I/O counters of one block device ("major:minor") from /proc/diskstats."""
    return parse_disk(_read(proc / "diskstats", host), device)


def parse_disk(text: str | None, device: str) -> dict[str, float] | None:
    major, _, minor = device.partition(":")
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 14 and fields[0] == major and fields[1] == minor:
            return {name: float(fields[3 + i]) for i, name in DISK_FIELDS.items()}
    return None


def schedstat(proc: PurePath, task: str, host: Host = LOCAL_HOST) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds waiting for one) of a task ("pid" or "pid/task/tid")."""
    return _parse_schedstat(_read(proc / task / "schedstat", host))


def _parse_schedstat(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    fields = text.split()
    return int(fields[0]) / 1e9, int(fields[1]) / 1e9


def reaped_children_s(proc: PurePath, pid: int, host: Host = LOCAL_HOST) -> float | None:
    """CPU of the children a process has waited for (cutime + cstime), in seconds."""
    return _parse_reaped(_read(proc / str(pid) / "stat", host), host)


def _parse_reaped(text: str | None, host: Host) -> float | None:
    if text is None:
        return None
    # The command name is in parentheses and may hold spaces: fields follow the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[13]) + int(fields[14])) / host.clock_ticks_per_s()


def child_pids(proc: PurePath, pid: int, host: Host = LOCAL_HOST) -> list[int]:
    text = _read(proc / str(pid) / "task" / str(pid) / "children", host)
    if text is not None:
        return [int(p) for p in text.split()]
    found = []  # kernels without CONFIG_PROC_CHILDREN: scan every process's parent
    for name in host.list_dir(proc):
        if name.isdigit():
            stat = _read(proc / name / "stat", host)
            if stat and int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                found.append(int(name))
    return found


SNAPSHOT_TRIES = 5


def server_times(
    proc: PurePath, postmaster: int, host: Host = LOCAL_HOST
) -> tuple[float, float] | None:
    """(CPU seconds, run-queue wait seconds) of a PostgreSQL server: the postmaster, its live
    children, and the CPU of the children it reaped (backends that came and went between two
    samples still count). Server processes are single-threaded.

    A child reaped while its siblings are read would count in neither sum (the reaped CPU was
    read before, its own file is gone after), which happens to every backend when pgbench
    ends: the reaped CPU is read before and after, and the scan repeated until they agree.
    Each scan is one batch of reads: its children's, the reaped CPU after, the next list."""
    here = proc / str(postmaster)
    listing = here / "task" / str(postmaster) / "children"
    own_text, stat, listed = _read_all([here / "schedstat", here / "stat", listing], host)
    own, reaped = _parse_schedstat(own_text), _parse_reaped(stat, host)
    if own is None or reaped is None:
        return None
    children = _children(listed, proc, postmaster, host)
    for _ in range(SNAPSHOT_TRIES):
        paths = [proc / str(pid) / "schedstat" for pid in children]
        *texts, stat, listed = _read_all([*paths, here / "stat", listing], host)
        live = [_parse_schedstat(text) for text in texts]
        after = _parse_reaped(stat, host)
        if after is None:
            return None
        if after == reaped:
            break
        reaped, children = after, _children(listed, proc, postmaster, host)
    found = [c for c in live if c is not None]
    cpu = own[0] + reaped + sum(c[0] for c in found)
    return cpu, own[1] + sum(c[1] for c in found)


def _children(listed: str | None, proc: PurePath, pid: int, host: Host) -> list[int]:
    return [int(p) for p in listed.split()] if listed is not None else child_pids(proc, pid, host)


def process_times(proc: PurePath, pid: int, host: Host = LOCAL_HOST) -> tuple[float, float] | None:
    """(CPU seconds, run-queue wait seconds) of a process, summed over its threads (two round
    trips to another host: its threads, then all their figures)."""
    tasks = proc / str(pid) / "task"
    try:
        tids = host.list_dir(tasks)
    except OSError:
        return None
    texts = _read_all([tasks / tid / "schedstat" for tid in tids], host)
    found = [t for text in texts if (t := _parse_schedstat(text)) is not None]
    if not found:
        return None  # exited meanwhile
    return sum(t[0] for t in found), sum(t[1] for t in found)


@dataclass
class OsSampler:
    """Samples one host, and pgbench's process on the host it runs on (`pgbench_host`: a load
    generator, or None for the same host). pgbench's pid arrives once pgbench has started.

    Process figures come from /proc/<pid>/schedstat: time on a CPU and time runnable but
    waiting for one (nanosecond clocks). A thread that is on a CPU or waiting for one all the
    time is saturated, whether or not other load let it run.
    """

    proc: Path = Path("/proc")
    postmaster_pid: int | None = None
    disk_device: str | None = None
    pgbench_pid: int | None = None
    host: Host = LOCAL_HOST
    pgbench_host: Host | None = None
    _pgbench_last: tuple[float, float] = field(default=(0.0, 0.0), init=False)

    def sample(self) -> Snapshot:
        snap: Snapshot = {}
        names = ("stat", "meminfo", *(("diskstats",) if self.disk_device else ()))
        stat, meminfo, *diskstats = _read_all([self.proc / name for name in names], self.host)
        cpu = parse_cpu(stat)
        if cpu is not None:
            snap["cpu"] = cpu
        memory = parse_memory(meminfo)
        if memory:
            snap["memory"] = memory
        if self.disk_device is not None:
            disk = parse_disk(diskstats[0], self.disk_device)
            if disk is not None:
                snap["disk"] = disk
        snap["processes"] = self._processes()
        return snap

    def _processes(self) -> dict[str, float]:
        found: dict[str, float] = {}
        if self.postmaster_pid is not None:
            server = server_times(self.proc, self.postmaster_pid, self.host)
            if server is not None:
                found["server_cpu_s"], found["server_wait_s"] = server
        if self.pgbench_pid is not None:
            # 0 before pgbench starts; once it has exited (and been reaped) the last reading
            # stands, and the capture's caller knows the rest from wait4.
            pgbench = process_times(self.proc, self.pgbench_pid, self.pgbench_host or self.host)
            self._pgbench_last = pgbench or self._pgbench_last
        found["pgbench_cpu_s"], found["pgbench_wait_s"] = self._pgbench_last
        return found


def derive_cpu(prev: dict[str, float], cur: dict[str, float]) -> dict[str, float]:
    """Shares of all CPUs' time by state, in percent, over the interval."""
    delta = {k: cur[k] - prev.get(k, 0.0) for k in cur}
    total = sum(delta.values())
    if total <= 0:
        return {}

    def pct(*names: str) -> float:
        return 100.0 * sum(delta.get(n, 0.0) for n in names) / total

    return {
        "user_pct": pct("user", "nice"),
        "system_pct": pct("system", "irq", "softirq"),
        "iowait_pct": pct("iowait"),
        "steal_pct": pct("steal"),
        "idle_pct": pct("idle"),
    }


def derive_disk(prev: dict[str, float], cur: dict[str, float], dt: float) -> dict[str, float]:
    """iostat's figures over the interval: IOPS, MB/s, utilisation, average wait."""
    d = {k: cur[k] - prev[k] for k in cur if k in prev}
    if dt <= 0 or len(d) < len(DISK_FIELDS):
        return {}
    ios = d["reads"] + d["writes"]
    figures = {
        "reads_per_s": d["reads"] / dt,
        "writes_per_s": d["writes"] / dt,
        "read_mb_per_s": d["read_sectors"] * SECTOR_BYTES / MB / dt,
        "write_mb_per_s": d["write_sectors"] * SECTOR_BYTES / MB / dt,
        "util_pct": min(100.0, d["io_ms"] / (dt * 10.0)),  # ms busy per 1000 ms, in percent
    }
    if ios > 0:
        figures["await_ms"] = (d["read_ms"] + d["write_ms"]) / ios
    return figures


def figures(
    source: str, prev: dict[str, float], cur: dict[str, float], dt: float, *, whole: bool
) -> dict[str, float]:
    """The stored figures of a source between two samples: rates per second of counters
    (deltas when whole), CPU shares, disk rates; gauges as read (none over the whole run)."""
    if source == "cpu":
        return derive_cpu(prev, cur)
    if source == "disk":
        return derive_disk(prev, cur, dt)
    if source in GAUGE_SOURCES:
        return {} if whole else dict(cur)
    scale = 1.0 if whole else 1.0 / dt
    return {
        metric: (value - prev[metric]) * scale
        for metric, value in cur.items()
        if metric in prev and value >= prev[metric]  # a reset in between leaves a gap
    }
