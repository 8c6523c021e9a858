"""CPU profiles of a server's processes: perf's output folded into stacks, the stored record,
top functions by backend type and the difference between two runs per transaction."""

from pgbenchlab.profiles.folding import PerfScript, fold_perf_script
from pgbenchlab.profiles.records import Profile
from pgbenchlab.profiles.top import FunctionTime, ProfileDiff, diff, top_functions

__all__ = [
    "FunctionTime",
    "PerfScript",
    "Profile",
    "ProfileDiff",
    "diff",
    "fold_perf_script",
    "top_functions",
]
