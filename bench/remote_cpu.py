"""Where the CPU goes while pgbench runs over SSH: CPU seconds of every process other than
pgbench and postgres, for the campaign's own call (`remote_overhead.py`'s "lab") and for the
same pgbench started by hand, in a session of its own ("hand") or in this process's
("hand-shared"), on the same hosts, server and dataset; and each kind's run-queue wait (with
autogroups, a session is a scheduling group).

TPS comparisons on this shared 2-CPU machine vary by more than the effect looked for; CPU
seconds do not. Each host's sshd is moved into a cpuacct cgroup (v1) of its own before the
hosts are used, so everything started over SSH there (sessions, their commands, pgbench, the
managed server) stays in that cgroup, short-lived processes included: its usage is exact;
this process goes into one too ("here", with the pgbench it starts by hand). A poller (10 Hz)
reads /proc/PID/task/TID/schedstat (time on a CPU, and waiting for one) of each thread in
the cgroups and splits each interval's CPU into "while pgbench ran" and "around it"; what a
cgroup counted that no polled thread did ("ended unseen") went to threads that ended since
the last poll (pgbench's at its end, processes too short-lived to be seen). The poller's own
CPU shows as "here: python [poller]".

Root only (network namespaces, cgroups). Not a figure of record: prints a table, writes
nothing. About 2.5 min: .venv/bin/python bench/remote_cpu.py [--seconds 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from cgroups import Cgroup, holding
from figure import HERE
from pgbenchlab.campaign.measure import sampling_rate
from remote_overhead import Generator, generator

sys.path.insert(0, str(HERE.parent / "tests"))

from netns_hosts import TestHosts  # the tests' own hosts
from netns_hosts import unavailable as hosts_unavailable

POLL_S = 0.1
MEASURED = ("pgbench", "postgres")  # the run itself: not overhead


def _threads(pid: int) -> Iterator[tuple[int, str, float, float]]:
    """Each thread of a process: its id, the process's command name, and its time on a CPU and
    waiting for one (seconds, from schedstat's nanosecond clocks)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    comm = text[text.index("(") + 1 : text.rindex(")")]
    for tid in tids:
        try:
            on_cpu, waiting, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        yield int(tid), comm, int(on_cpu) / 1e9, int(waiting) / 1e9


def _thread_name(pid: int, tid: int) -> str:
    """This process's threads by their Python names (the SSH loop, the output pumps...)."""
    if pid != os.getpid():
        return ""
    names = {t.native_id: t.name for t in threading.enumerate()}
    name = names.get(tid, "ended")
    return f" [{'poller' if name == 'poller' else name.split('-')[0].split(' ')[0]}]"


def _kind(group: str, comm: str) -> str:
    if comm.startswith("postgres") or comm.startswith("postmaster"):
        return "postgres"
    return comm if comm in MEASURED else f"{group}: {comm}"


@dataclass
class Breakdown:
    """CPU seconds by kind of process, while pgbench ran and around it."""

    during: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    around: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    waited: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # during
    pgbench_s: float = 0.0  # how long pgbench ran (polled)
    tps: float = 0.0


class Poller:
    def __init__(self, groups: dict[str, Cgroup]) -> None:
        self.groups = groups
        self.found = Breakdown()
        self._seen: dict[tuple[str, int], tuple[float, float]] = {}
        self._usage = {name: g.usage_s() for name, g in groups.items()}
        self._stop = threading.Event()
        self._sample()  # baselines: processes alive now count from here
        self._thread = threading.Thread(target=self._loop, name="poller", daemon=True)
        self._thread.start()

    def _processes(self) -> Iterator[tuple[str, int]]:
        for name, group in self.groups.items():
            for pid in group.pids():
                yield name, pid

    def _sample(self) -> tuple[dict[str, float], dict[str, float]]:
        """CPU used since the last sample and run-queue wait, by kind; what the cgroups
        counted beyond it (threads that ended unseen) too."""
        used: dict[str, float] = defaultdict(float)
        waited: dict[str, float] = defaultdict(float)
        explained: dict[str, float] = defaultdict(float)
        for group, pid in self._processes():
            for tid, comm, on_cpu, waiting in _threads(pid):
                kind = _kind(group, comm) + _thread_name(pid, tid)
                before = self._seen.get((group, tid), (0.0, 0.0))  # born since: from 0
                self._seen[(group, tid)] = (on_cpu, waiting)
                used[kind] += on_cpu - before[0]
                waited[kind] += waiting - before[1]
                explained[group] += on_cpu - before[0]
        for name, cgroup in self.groups.items():
            now = cgroup.usage_s()
            rest = now - self._usage[name] - explained[name]
            self._usage[name] = now
            used[f"{name}: ended unseen"] += max(0.0, rest)
        return used, waited

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            running = any(
                comm == "pgbench"
                for g in self.groups.values()
                for pid in g.pids()
                for _, comm, _, _ in _threads(pid)
            )
            self._add(*self._sample(), during=running)
            if running:
                self.found.pgbench_s += POLL_S

    def _add(self, used: dict[str, float], waited: dict[str, float], *, during: bool) -> None:
        into = self.found.during if during else self.found.around
        for kind, seconds in used.items():
            into[kind] += seconds
        if during:
            for kind, seconds in waited.items():
                self.found.waited[kind] += seconds

    def stop(self) -> Breakdown:
        self._stop.set()
        self._thread.join()
        self._add(*self._sample(), during=False)
        return self.found


def accounted(hosts: TestHosts) -> AbstractContextManager[dict[str, Cgroup]]:
    """This process (and the pgbench it starts by hand) and each host's sshd in a cgroup."""
    sshd = {name: host.sshd.pid for name, host in hosts.hosts.items() if host.sshd}
    return holding({"here": os.getpid(), **sshd}, f"pgbl-cpu-{os.getpid()}")


def measure(
    lg1: Generator, groups: dict[str, Cgroup], mode: str, argv: list[str], sampling: float
) -> Breakdown:
    poller = Poller(groups)
    run = lg1.lab(sampling)[0] if mode == "lab" else lg1.hand(argv, new_session=mode == "hand")
    found = poller.stop()
    found.tps = run.tps
    return found


def table(found: dict[str, list[Breakdown]]) -> str:
    head = " | ".join(f"{m} during | {m} around | {m} run-queue wait" for m in found)
    lines = [f"| process | {head} |", "|---|" + "---|---|---|" * len(found)]
    kinds = sorted({k for runs in found.values() for b in runs for k in (*b.during, *b.around)})
    for kind in kinds:
        cells = []
        for runs in found.values():
            n = len(runs)
            cells.append(f"{sum(b.during.get(kind, 0) for b in runs) / n:.3f}")
            cells.append(f"{sum(b.around.get(kind, 0) for b in runs) / n:.3f}")
            cells.append(f"{sum(b.waited.get(kind, 0) for b in runs) / n:.3f}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    for mode, runs in found.items():
        secs = sum(b.pgbench_s for b in runs) / len(runs)
        tps = [round(b.tps) for b in runs]
        lines.append(
            f"\n{mode}: pgbench ran {secs:.1f} s (polled), mean of {len(runs)} runs; TPS {tps}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    missing = hosts_unavailable()
    if missing:
        raise SystemExit(missing)
    hosts = TestHosts()
    found: dict[str, list[Breakdown]] = {"lab": [], "hand": [], "hand-shared": []}
    try:
        hosts.add("db1")
        hosts.add("lg1")
        with accounted(hosts) as groups, generator(hosts, args.seconds, args.clients) as lg1:
            warmup, _ = lg1.lab(None)
            sampling = sampling_rate(lg1.spec, warmup.tps) or 1.0
            _, argv = lg1.lab(sampling)
            for _round in range(args.rounds):
                for mode in found:
                    found[mode].append(measure(lg1, groups, mode, argv, sampling))
                    time.sleep(0.5)
    finally:
        hosts.close()
    print(table(found))


if __name__ == "__main__":
    main()
