"""CPU clocks the benchmarks read: this process's CPU time and the whole machine's busy time."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_busy_s() -> float:
    """CPU seconds of all CPUs not idle (steal counts: another tenant had the CPU)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
