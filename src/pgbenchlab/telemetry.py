"""What the machine, the server and the OS were: facts recorded beside the results."""

from __future__ import annotations

import os
import platform
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
