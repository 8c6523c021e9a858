"""A run split across several load generator hosts, started together.

The split: of C clients over N generators, each gets C // N and the first C % N one more
(plan order); threads in proportion to what each can use, the smaller of its clients and its
CPUs (at least one each, never more than its clients: threads = "auto", one per CPU on each,
gives each exactly that); the -R rate in proportion to each one's clients, so every client keeps
the same rate. Each gets its own
``--random-seed`` (consecutive numbers from a random base) and its own log prefix
(``pgbench_log.HOST``).

The common start: each host's clock offset to this machine is measured just before (NTP's
way, `hosts.clock_offset`), an instant a little ahead is agreed, and on each host a small
python3 wrapper (python3 is there: the detached-process monitor needs it) sleeps until that
instant on its own clock, corrected by its offset, prints when it really started and execs
pgbench. The stored run covers the window where all were measuring: from the latest start to
the earliest planned end (`common_window`, on this machine's clock). Each generator's log is
reduced on its host (`pgbench.log_reducer`: exact value counts and per-second sums, which merge
exactly), its completion times moved onto this machine's clock by its host's offset and lines
outside the window cut and counted there; only the reduction comes back (the whole log too
with ``[pgbench] keep_logs``, its offsets then given by `clock_offsets`). Shares run on this
machine (a group's run without load generator hosts) write their logs in place.

A group's run (several servers driven together, `campaign.together`) goes the same way: each
share then targets one member server (`Target`), and its log prefix and name in the results
are ``SERVER@HOST``.
"""

from __future__ import annotations

import functools
import itertools
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath

from pgbenchlab import cpusets
from pgbenchlab.campaign.executor import GeneratorExecutor, LocalExecutor, log_layout
from pgbenchlab.campaign.generator_processes import CpuWatch, Started, run_all
from pgbenchlab.campaign.hosts import clock_offset
from pgbenchlab.cpusets import NumaPolicy
from pgbenchlab.errors import UserError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.invocation.command import LOG_PREFIX, Call, Completed, Share
from pgbenchlab.plan.hosts import split_evenly

SEEDS_SINCE = (11,)  # pgbench --random-seed
START_LEAD_S = 1.0  # ahead of now: every generator's SSH start comes well within it
START_MARK = "pgbenchlab: started at"
# SIGINT back to its default first: a Ctrl-C caught by Python's own handler just before the
# exec would be lost, and pgbench would run its whole duration.
WAIT_AND_EXEC = f"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
print("{START_MARK}", f"{{time.time():.6f}}", file=sys.stderr, flush=True)
os.execvp(sys.argv[2], sys.argv[2:])
"""
VALUED = frozenset({"-c", "-j", "-R", "-M", "-T", "-t", "-P", "-b", "-f", "-s", "-D", "-L"})


@dataclass(frozen=True)
class Part:
    """One generator's share of the clients, threads and rate."""

    clients: int
    threads: int
    rate: float | None


def split(clients: int, threads: int, rate: float | None, cpus: Sequence[int]) -> list[Part]:
    """The run's clients, threads and rate over the generators, given the CPUs pgbench may
    use on each (see the module docstring)."""
    assert clients >= len(cpus), "the plan check refuses fewer clients than generators"
    counts = split_evenly(clients, len(cpus))
    usable = [max(1, min(count, n)) for count, n in zip(counts, cpus, strict=True)]
    return [
        Part(
            count,
            min(count, max(1, share)),
            None if rate is None else rate * count / clients,
        )
        for count, share in zip(counts, _in_proportion(threads, usable), strict=True)
    ]


def _in_proportion(total: int, weights: list[int]) -> list[int]:
    """total over the weights, whole numbers by the largest remainder (ties: plan order)."""
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    remainders = sorted(range(len(weights)), key=lambda i: -(total * weights[i] % whole))
    for i in remainders[: total - sum(shares)]:
        shares[i] += 1
    return shares


def share_argv(argv: list[str], part: Part, seed: int, host: str) -> list[str]:
    """pgbench's argv for one generator: its clients, threads, rate, seed and log prefix."""
    values = {"-c": str(part.clients), "-j": str(part.threads)}
    if part.rate is not None:
        values["-R"] = rate_text(part.rate)
    out: list[str] = []
    flag: str | None = None
    for arg in argv[:-1]:
        if flag is not None:
            out.append(values.get(flag, arg))
            flag = None
            continue
        flag = arg if arg in VALUED else None
        if arg.startswith("--log-prefix=") and arg.endswith(LOG_PREFIX):
            arg = f"{arg}.{host}"
        out.append(arg)
    return [*out, f"--random-seed={seed}", argv[-1]]


def rate_text(rate: float) -> str:
    """A share's -R: exactly the rate stored for it (six digits, "166.667" for a third of
    500, would give pgbench another), short where that is exact."""
    short = f"{rate:g}"
    return short if float(short) == rate else repr(rate)


def argv_duration(argv: list[str]) -> int | None:
    """The -T of a pgbench argv (None: a -t run)."""
    found = dict(itertools.pairwise(argv))
    return int(found["-T"]) if "-T" in found else None


def argv_figures(argv: list[str]) -> tuple[int, int, float | None]:
    """The clients, threads and rate of a pgbench argv built by `command.build_argv`."""
    found = dict(itertools.pairwise(argv))
    rate = found.get("-R")
    return int(found["-c"]), int(found["-j"]), None if rate is None else float(rate)


@dataclass(frozen=True)
class Generator:
    name: str
    executor: LocalExecutor  # this machine's, or a GeneratorExecutor for another host

    @property
    def host(self) -> Host:
        return self.executor.host

    def cpus(self, pinned: str | None) -> int | None:
        return cpusets.count(pinned) if pinned else self.host.cpu_count()

    def work_dir(self) -> PurePath | None:
        """A fresh run directory on a generator host (None: this machine's run directory)."""
        if isinstance(self.executor, GeneratorExecutor):
            return self.executor.work_dir()
        return None


@dataclass(frozen=True)
class Target:
    """The server a share's pgbench drives: the run's own (server ""), or a group member's
    (its libpq environment and database name)."""

    env: Mapping[str, str] = field(repr=False)  # may hold a password
    dbname: str = ""
    server: str = ""


@dataclass(frozen=True)
class Planned:
    """One share of a run: which generator runs which part against which server."""

    generator: Generator
    part: Part
    target: Target
    on_start: Callable[[int], None] | None = None
    on_line: Callable[[str], None] | None = None  # its stderr lines (default: the first's only)

    @property
    def label(self) -> str:
        """As `command.Share.label`: its log prefix's suffix."""
        host = self.generator.name
        return f"{self.target.server}@{host}" if self.target.server else host


def _offset(host: Host) -> float:
    """A host's clock offset to this machine's (this machine: none)."""
    return 0.0 if host is LOCAL_HOST else clock_offset(host, probes=3)[0]


class FleetExecutor(GeneratorExecutor):
    """pgbench on several load generator hosts at once, one run's share on each, started
    together; everything else (datasets, telemetry) through the first of them."""

    single_pgbench = False  # each generator's figures are its own (`generator_figures`)

    def __init__(
        self,
        generators: list[tuple[str, Host]],
        pgbench_cpus: str | None,
        *,
        keep_logs: bool = False,
        pgbench_numa: NumaPolicy | None = None,
    ) -> None:
        numa = pgbench_numa
        super().__init__(generators[0][1], pgbench_cpus=pgbench_cpus, pgbench_numa=numa)
        self.generators = [
            Generator(
                n,
                GeneratorExecutor(h, pgbench_cpus, keep_logs=keep_logs, pgbench_numa=pgbench_numa),
            )
            for n, h in generators
        ]

    def pgbench(self, call: Call) -> Completed:
        parts = split(
            *argv_figures(list(call.argv)),
            [g.cpus(self.pgbench_cpus) or 1 for g in self.generators],
        )
        # pgbench's progress and pid: the first generator's stand for all
        target = Target(call.env, call.argv[-1])
        planned = [
            Planned(g, part, target, call.on_start if i == 0 else None)
            for i, (g, part) in enumerate(zip(self.generators, parts, strict=True))
        ]
        return together(call, planned, self.pgbench_cpus)


def together(call: Call, planned: list[Planned], pgbench_cpus: str | None) -> Completed:
    """Every planned share of the call's pgbench started at one instant; the run as one
    pgbench. Each share's stderr lines go to its own listener, else (the first's) to the
    call's."""
    argv, cwd = list(call.argv), Path(call.cwd)
    base = secrets.randbelow(2**31 - len(planned))
    offsets = {
        g.name: _offset(g.host) for g in {p.generator.name: p.generator for p in planned}.values()
    }
    start = time.time() + START_LEAD_S
    timeout = None if call.timeout_s is None else call.timeout_s + START_LEAD_S
    starts = [Started(p.on_start, p.generator.host) for p in planned]
    labels = [p.label for p in planned]
    calls = [
        Call(
            tuple(share_argv([*argv[:-1], p.target.dbname], p.part, base + i, labels[i])),
            p.target.env,
            cwd,
            timeout,
            p.on_line or (call.on_stderr_line if i == 0 else None),
        )
        for i, p in enumerate(planned)
    ]
    dirs: list[PurePath | None] = []
    try:
        for p in planned:
            dirs.append(p.generator.work_dir())
        jobs = [
            functools.partial(
                _share, p.generator, c, start + offsets[p.generator.name], there, started
            )
            for p, c, there, started in zip(planned, calls, dirs, starts, strict=True)
        ]
        with CpuWatch(starts) as watch:
            done = run_all(jobs, starts, [c.argv for c in calls])
        shares = tuple(
            Share(
                host=p.generator.name,
                clients=p.part.clients,
                threads=p.part.threads,
                rate=p.part.rate,
                seed=base + i,
                cpus=p.generator.cpus(pgbench_cpus),
                clock_offset_s=offsets[p.generator.name],
                started_at=None if started.at is None else started.at - offsets[p.generator.name],
                completed=completed,
                server=p.target.server,
                wait_per_s=watch.wait_per_s(i),
            )
            for i, (p, completed, started) in enumerate(zip(planned, done, starts, strict=True))
        )
        _reduce_all(argv, planned, dirs, shares, cwd)
    finally:
        _remove_all([(p.generator.host, d) for p, d in zip(planned, dirs, strict=False)])
    return merged(argv, shares, interrupted=any(d.interrupted for d in done))


def _reduce_all(
    argv: list[str],
    planned: list[Planned],
    dirs: list[PurePath | None],
    shares: tuple[Share, ...],
    cwd: Path,
) -> None:
    """Every generator host's log reduced there at once, cut to the common window."""
    window = common_window(shares, argv_duration(argv))
    remote = [
        (p.generator.executor, there, share)
        for p, there, share in zip(planned, dirs, shares, strict=True)
        if isinstance(p.generator.executor, GeneratorExecutor) and there is not None
    ]
    if not remote:
        return
    with ThreadPoolExecutor(len(remote), thread_name_prefix="reduce") as pool:
        reduced = [
            pool.submit(
                executor.collect,
                there,
                cwd,
                log_layout(argv, window, share.clock_offset_s),
                share.label,
            )
            for executor, there, share in remote
        ]
        for future in reduced:
            future.result()


def _share(
    generator: Generator,
    call: Call,
    start_there: float,
    there: PurePath | None,
    started: Started,
) -> Completed:
    """Run one generator's pgbench at the agreed instant (start_there, on its own clock; its
    real start is noted in `started`, which tells the share's `on_start` once pgbench runs, not
    while it waits): in its run directory on a generator host, in the run's own on this
    machine."""
    on_line = call.on_stderr_line

    def line(text: str) -> None:
        if text.startswith(START_MARK):
            started.mark(float(text.removeprefix(START_MARK)))
        elif on_line is not None:
            on_line(text)

    wrapped = replace(
        call,
        argv=("python3", "-c", WAIT_AND_EXEC, f"{start_there:.6f}", *call.argv),
        on_stderr_line=line,
        on_start=started.spawned,
    )
    executor = generator.executor
    if isinstance(executor, GeneratorExecutor) and there is not None:
        done = executor.pgbench_in(there, wrapped)
    else:
        done = executor.pgbench(wrapped)
    kept = "".join(x for x in done.stderr.splitlines(True) if not x.startswith(START_MARK))
    return replace(done, argv=call.argv, stderr=kept)


def _remove_all(dirs: list[tuple[Host, PurePath | None]]) -> None:
    """Remove each generator's run directory, every one tried though one host fails."""
    failure: Exception | None = None
    for host, there in dirs:
        if there is None:
            continue
        try:
            host.remove_tree(there)
        except (OSError, UserError) as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


def merged(argv: list[str], shares: tuple[Share, ...], *, interrupted: bool) -> Completed:
    """The run as one pgbench: the planned argv, each generator's output under a header line,
    the first failure's return code, the longest wall time and the CPU of all."""
    parts = [s.completed for s in shares]
    return Completed(
        tuple(argv),
        next((p.returncode for p in parts if p.returncode != 0), 0),
        "".join(f"# load generator {s.label}\n{s.completed.stdout}" for s in shares),
        "".join(f"# load generator {s.label}\n{s.completed.stderr}" for s in shares),
        max(p.wall_s for p in parts),
        sum(p.cpu_s for p in parts),
        interrupted,
        shares,
    )


def common_window(shares: tuple[Share, ...], duration_s: int | None) -> tuple[float, float] | None:
    """Where every generator was measuring, on this machine's clock: from the latest start to
    the earliest planned end (None: a -t run, or a start not reported)."""
    starts = [s.started_at for s in shares]
    if not shares or duration_s is None or any(t is None for t in starts):
        return None
    known = [t for t in starts if t is not None]
    return max(known), min(known) + duration_s


def clock_offsets(shares: Sequence[Share], logs: Sequence[Path]) -> dict[Path, float]:
    """Each generator's log files (by their prefix) with its clock's offset to ours."""
    offsets = {f"{LOG_PREFIX}.{s.label}.": s.clock_offset_s for s in shares}
    return {
        log: offset
        for log in logs
        for prefix, offset in offsets.items()
        if log.name.startswith(prefix)
    }
