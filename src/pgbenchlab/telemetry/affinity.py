"""The CPUs the kernel lets the benchmark's processes run on, read back during a run.

/proc/PID/status's Cpus_allowed_list of the postmaster and its children (the backends serving
pgbench, and the auxiliary processes) and of pgbench, in the first seconds of the measured run,
when every client is connected. This is what the pinning achieved, whether the plan asked for
it or not (a cpuset, or pgbenchlab itself started under taskset, restricts processes too).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePath

from pgbenchlab.hosts import Host
from pgbenchlab.records.telemetry import Affinity
from pgbenchlab.telemetry.osstats import child_pids

SERVER, PGBENCH = "server", "pgbench"


def allowed_list(proc: PurePath, pid: int, host: Host) -> str | None:
    """The process's Cpus_allowed_list ("0-3,8"), or None once it has gone."""
    try:
        text = host.read_text(proc / str(pid) / "status")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


@dataclass
class AffinityWatch:
    """Collects, per role, the distinct CPU lists seen and the processes checked."""

    proc: PurePath
    host: Host
    requested: dict[str, str | None] = field(default_factory=dict)  # role → the plan's list
    seen: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    pgbench_host: Host | None = None  # where pgbench runs (None: on host too)

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
        listed = allowed_list(self.proc, pid, host)
        if listed is not None:
            self.seen[role][pid] = listed

    def result(self) -> tuple[Affinity, ...]:
        return tuple(
            Affinity(
                role, self.requested.get(role), tuple(sorted(set(by_pid.values()))), len(by_pid)
            )
            for role, by_pid in sorted(self.seen.items())
            if by_pid
        )
