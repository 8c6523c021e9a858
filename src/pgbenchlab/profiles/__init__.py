"""CPU profiles of a server's processes and of pgbench: perf's output folded into stacks, the
stored record, top functions by backend type and the difference between two runs per
transaction."""

from pgbenchlab.profiles.folding import PerfScript, fold_perf_script
from pgbenchlab.profiles.records import (
    PGBENCH,
    PROCESSES,
    SERVER,
    Profile,
    RunProfiles,
    merged,
)
from pgbenchlab.profiles.top import FunctionTime, ProfileDiff, diff, top_functions

__all__ = [
    "PGBENCH",
    "PROCESSES",
    "SERVER",
    "FunctionTime",
    "PerfScript",
    "Profile",
    "ProfileDiff",
    "RunProfiles",
    "diff",
    "fold_perf_script",
    "merged",
    "top_functions",
]
