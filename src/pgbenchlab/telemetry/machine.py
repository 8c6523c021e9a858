"""What the machine, the server and the OS were: facts recorded beside the results, read
through the `Host` they are about."""

from __future__ import annotations

import platform
import re
from dataclasses import asdict, dataclass
from pathlib import PurePath
from typing import Any

from pgbenchlab.hosts import LOCAL_HOST, Host

SYS_BLOCK = PurePath("/sys/dev/block")


def _read(path: PurePath | str, host: Host) -> str | None:
    try:
        return host.read_text(PurePath(path)).strip()
    except OSError:
        return None


def cpu_model(host: Host = LOCAL_HOST) -> str | None:
    text = _read("/proc/cpuinfo", host) or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def memory_bytes(host: Host = LOCAL_HOST) -> int | None:
    text = _read("/proc/meminfo", host) or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def os_release(host: Host = LOCAL_HOST) -> str | None:
    text = _read("/etc/os-release", host) or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return None


def machine_facts(host: Host = LOCAL_HOST) -> dict[str, Any]:
    """The machine a campaign ran on (no local paths, no user names). Python is pgbenchlab's
    own, wherever the host is."""
    vm = {
        name: _read(f"/proc/sys/vm/{name}", host)
        for name in (
            "dirty_ratio",
            "dirty_background_ratio",
            "dirty_bytes",
            "dirty_background_bytes",
            "dirty_expire_centisecs",
            "swappiness",
        )
    }
    return {
        "hostname": _read("/proc/sys/kernel/hostname", host),
        "cpu_model": cpu_model(host),
        "cpus": host.cpu_count(),
        "memory_bytes": memory_bytes(host),
        "kernel": _read("/proc/sys/kernel/osrelease", host),
        "os": os_release(host),
        "python": platform.python_version(),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", host),
        "transparent_hugepages": _read("/sys/kernel/mm/transparent_hugepage/enabled", host),
        "vm": vm,
    }


def _unescape_mount(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040 …)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fs_type: str
    source: str
    mount_options: str
    super_options: str


def parse_mountinfo(text: str) -> dict[str, list[Mount]]:
    """Mounts by "major:minor" from /proc/<pid>/mountinfo."""
    found: dict[str, list[Mount]] = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 3:
            continue
        mount = Mount(_unescape_mount(fields[4]), tail[0], tail[1], fields[5], tail[2])
        found.setdefault(fields[2], []).append(mount)
    return found


def block_device(
    dev: str, sys_root: PurePath = SYS_BLOCK, host: Host = LOCAL_HOST
) -> dict[str, Any]:
    """Name, rotational flag and I/O scheduler of a block device ("major:minor")."""
    base = sys_root / dev
    uevent = _read(base / "uevent", host) or ""
    name = next(
        (v for k, _, v in (x.partition("=") for x in uevent.split()) if k == "DEVNAME"), None
    )
    own_queue = host.exists(base / "queue")
    queue = base / "queue" if own_queue else base / ".." / "queue"  # partitions
    scheduler = _read(queue / "scheduler", host)
    chosen = re.search(r"\[(\S+)\]", scheduler or "")
    rotational = _read(queue / "rotational", host)
    return {
        "name": name,
        "rotational": None if rotational is None else rotational == "1",
        "scheduler": chosen.group(1) if chosen else scheduler,
    }


def storage_facts(path: PurePath, host: Host = LOCAL_HOST) -> dict[str, Any]:
    """The file system holding path: type, source, mount and super-block options, device."""
    dev = host.device_of(path)
    mounts = parse_mountinfo(_read("/proc/self/mountinfo", host) or "").get(dev, [])
    real = str(host.resolve(path))
    under = [
        m
        for m in mounts
        if real == m.mount_point or real.startswith(m.mount_point.rstrip("/") + "/")
    ]
    mount = max(under or mounts, key=lambda m: len(m.mount_point), default=None)
    facts: dict[str, Any] = {"device": dev, "block_device": None}
    if mount is not None:
        facts |= asdict(mount)
    if not dev.startswith("0:"):  # major 0: no block device (tmpfs, overlay, btrfs subvolume)
        facts["block_device"] = block_device(dev, host=host)
    return facts


def parse_pg_config(text: str) -> dict[str, str]:
    """pg_config's "NAME = value" lines as a dict."""
    pairs = (line.partition(" = ") for line in text.splitlines())
    return {name.strip(): value.strip() for name, sep, value in pairs if sep}


def describe_machine(host: Host = LOCAL_HOST) -> str:
    """One line naming the machine, for benchmark results: CPUs, CPU model, kernel."""
    system = _read("/proc/sys/kernel/ostype", host) or "unknown system"
    kernel = _read("/proc/sys/kernel/osrelease", host) or "unknown kernel"
    return f"{host.cpu_count()} CPUs ({cpu_model(host) or 'unknown CPU'}), {system} {kernel}"
