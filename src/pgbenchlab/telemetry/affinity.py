"""The CPUs and memory nodes the kernel lets the benchmark's processes use, read back during a
run.

/proc/PID/status's Cpus_allowed_list and Mems_allowed_list of the postmaster and its children
(the backends serving pgbench, and the auxiliary processes) and of pgbench, in the first seconds
of the measured run, when every client is connected; where the plan gave a NUMA policy, the
policy numa_maps shows for the role's first process. This is what the pinning achieved, whether
the plan asked for it or not (a cpuset, or pgbenchlab itself started under taskset, restricts
processes too).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePath

from pgbenchlab.hosts import Host
from pgbenchlab.records.telemetry import Affinity
from pgbenchlab.telemetry.osstats import child_pids

SERVER, PGBENCH = "server", "pgbench"


def allowed_lists(proc: PurePath, pid: int, host: Host) -> tuple[str, str] | None:
    """The process's Cpus_allowed_list ("0-3,8") and Mems_allowed_list ("0"), or None once it
    has gone."""
    try:
        text = host.read_text(proc / str(pid) / "status")
    except OSError:
        return None
    found = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if "Cpus_allowed_list" not in found:
        return None
    return found["Cpus_allowed_list"].strip(), found.get("Mems_allowed_list", "").strip()


def numa_policy(proc: PurePath, pid: int, host: Host) -> str | None:
    """The process's memory policy as numa_maps states it on its first mapping ("bind:0",
    "interleave:0-1", "default"), or None once it has gone."""
    try:
        first = host.read_text(proc / str(pid) / "numa_maps").split("\n", 1)[0].split()
    except OSError:
        return None
    return first[1] if len(first) > 1 else None


@dataclass
class AffinityWatch:
    """Collects, per role, the distinct CPU lists seen and the processes checked."""

    proc: PurePath
    host: Host
    requested: dict[str, str | None] = field(default_factory=dict)  # role → the plan's list
    seen: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    pgbench_host: Host | None = None  # where pgbench runs (None: on host too)
    numa: dict[str, str | None] = field(default_factory=dict)  # role → the plan's NUMA policy
    memory: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    policies: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def check(self, postmaster: int | None, pgbench: int | None) -> None:
        if postmaster is not None:
            try:
                children = child_pids(self.proc, postmaster, self.host)
            except OSError:  # its host unreachable (a network lost): the sampler goes on
                children = []
            for pid in [postmaster, *children]:
                self._note(SERVER, pid)
        if pgbench is not None:
            self._note(PGBENCH, pgbench)

    def missing(self, postmaster: int | None, pgbench: int | None) -> bool:
        """Whether a watched role has no process checked yet (a sampler that fell behind in
        the first seconds checks later)."""
        return (postmaster is not None and not self.seen.get(SERVER)) or (
            pgbench is not None and not self.seen.get(PGBENCH)
        )

    def _note(self, role: str, pid: int) -> None:
        host = self.pgbench_host if role == PGBENCH and self.pgbench_host else self.host
        listed = allowed_lists(self.proc, pid, host)
        if listed is None:
            return
        self.seen[role][pid], self.memory[role][pid] = listed
        placed = self.numa.get(role) and not self.policies[role]  # its first process's policy
        if placed and (policy := numa_policy(self.proc, pid, host)) is not None:
            self.policies[role].add(policy)

    def result(self) -> tuple[Affinity, ...]:
        return tuple(
            Affinity(
                role,
                self.requested.get(role),
                distinct(by_pid),
                len(by_pid),
                numa_requested=self.numa.get(role),
                memory_nodes=distinct(self.memory[role]),
                numa_policies=tuple(sorted(self.policies[role])),
            )
            for role, by_pid in sorted(self.seen.items())
            if by_pid
        )


def distinct(by_pid: dict[int, str]) -> tuple[str, ...]:
    return tuple(sorted(set(by_pid.values())))
