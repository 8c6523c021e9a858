"""What the machine, the server and the OS were: facts recorded beside the results."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def os_release() -> str | None:
    text = _read("/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return None


def machine_facts() -> dict[str, Any]:
    """The machine a campaign ran on (no local paths, no user names)."""
    vm = {
        name: _read(f"/proc/sys/vm/{name}")
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
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "kernel": platform.release(),
        "os": os_release(),
        "python": platform.python_version(),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "transparent_hugepages": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
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


def block_device(dev: str, sys_root: Path = Path("/sys/dev/block")) -> dict[str, Any]:
    """Name, rotational flag and I/O scheduler of a block device ("major:minor")."""
    base = sys_root / dev
    uevent = _read(str(base / "uevent")) or ""
    name = next(
        (v for k, _, v in (x.partition("=") for x in uevent.split()) if k == "DEVNAME"), None
    )
    queue = base / "queue" if (base / "queue").is_dir() else base / ".." / "queue"  # partitions
    scheduler = _read(str(queue / "scheduler"))
    chosen = re.search(r"\[(\S+)\]", scheduler or "")
    rotational = _read(str(queue / "rotational"))
    return {
        "name": name,
        "rotational": None if rotational is None else rotational == "1",
        "scheduler": chosen.group(1) if chosen else scheduler,
    }


def storage_facts(path: Path) -> dict[str, Any]:
    """The file system holding path: type, source, mount and super-block options, device."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    mounts = parse_mountinfo(_read("/proc/self/mountinfo") or "").get(dev, [])
    real = str(path.resolve())
    under = [
        m
        for m in mounts
        if real == m.mount_point or real.startswith(m.mount_point.rstrip("/") + "/")
    ]
    mount = max(under or mounts, key=lambda m: len(m.mount_point), default=None)
    facts: dict[str, Any] = {"device": dev, "block_device": None}
    if mount is not None:
        facts |= asdict(mount)
    if os.major(st.st_dev) != 0:  # major 0: no block device (tmpfs, overlay, btrfs subvolume)
        facts["block_device"] = block_device(dev)
    return facts


def parse_pg_config(text: str) -> dict[str, str]:
    """pg_config's "NAME = value" lines as a dict."""
    pairs = (line.partition(" = ") for line in text.splitlines())
    return {name.strip(): value.strip() for name, sep, value in pairs if sep}


def describe_machine() -> str:
    """One line naming the machine, for benchmark results: CPUs, CPU model, kernel."""
    return (
        f"{os.cpu_count()} CPUs ({cpu_model() or 'unknown CPU'}), "
        f"{platform.system()} {platform.release()}"
    )
