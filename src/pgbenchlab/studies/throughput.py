"""The throughput studies: archaeology (versions), platform (storage) and scalability."""

from __future__ import annotations

from pgbenchlab.studies import sizing
from pgbenchlab.studies.common import Machine, finish, profile, server
from pgbenchlab.tomltext import Value

ARCHAEOLOGY_MAJORS_QUICK = 2
ARCHAEOLOGY_CLIENTS_PER_CPU = 8  # the classic write-ups go well past the CPUs
ARCHAEOLOGY_LEAVES_OUT = (
    "Left out, and why: majors before 9.6 (no prebuilt binaries; pgbenchlab manages 9.6 on);",
    "other storage (one data directory each, beside the results: `new platform` compares",
    "storage); other compilers and flags (prebuilt binaries are as their publisher built them,",
    "recorded in each one's provenance; a [build] table with `configure` and `compiler` makes",
    "them yours); a second machine (pgbench runs here: [[host]] and [pgbench] hosts move it).",
)
PIN_FROM_CPUS = 4


def archaeology(m: Machine) -> str:
    about = (
        (
            "The majors asked for (installed, built from the build cache, else prebuilt",
            "binaries), one pgbench for all, select-only (-S) and simple-update (-N), datasets",
            "in shared_buffers, in RAM and beyond.",
        )
        if m.options.majors
        else (
            "Every major installed here (and builds from the build cache), one pgbench for all,",
            "select-only (-S) and simple-update (-N), datasets in shared_buffers, in RAM and",
            "beyond.",
        )
    )
    text = m.start(
        "archaeology",
        "how have PostgreSQL versions changed on this machine?",
        *about,
        description="PostgreSQL majors side by side on this machine",
        repeats=3,
    )
    m.timing(text, 30, vacuum="pgbench")
    text.table("pgbench", "one client program for every server: the server is what changes")
    text.key("install", "newest")
    installs = _archaeology_installs(m)
    clients = m.ladder(None if m.quick else ARCHAEOLOGY_CLIENTS_PER_CPU * m.facts.cpus)
    for build in m.facts.builds:
        if installs.get(build.major) == {"build": f"pg{build.major}"}:
            text.table(f"build.pg{build.major}", "a major not installed, built from its source")
            text.key("source", build.source)
            text.key("configure", list(build.configure))
    for major in sorted(installs, key=major_order):  # oldest first: the report's order
        server(text, f"pg{major}", installs[major], m.settings(clients[-1]))
    m.matrix(
        text,
        m.scales,
        ["select-only", "simple-update"],
        clients,
        workload_note="-S (reads) and -N (writes)",
        clients_note=f"1 … {ARCHAEOLOGY_CLIENTS_PER_CPU} × CPUs",
    )
    for line in ARCHAEOLOGY_LEAVES_OUT:
        text.comment(line)
    return finish(text, m.facts.cpus)


def _archaeology_installs(m: Machine) -> dict[str, Value]:
    """Each major's install: the installed one, else a build from the build cache, else (when
    asked for) prebuilt binaries. Without --majors: what is installed or cached (a quick study:
    the newest two installed)."""
    installed: dict[str, Value] = {i.major: i.name for i in m.facts.installs}
    cached: dict[str, Value] = {b.major: {"build": f"pg{b.major}"} for b in m.facts.builds}
    if m.options.majors:
        return {
            major: installed.get(major) or cached.get(major) or {"binaries": major}
            for major in m.options.majors
        }
    if m.quick:
        return dict(list(installed.items())[:ARCHAEOLOGY_MAJORS_QUICK])
    return installed | cached


def major_order(major: str) -> tuple[int, ...]:
    """ "9.6" before "13" before "18"."""
    return tuple(int(part) for part in major.split("."))


def platform(m: Machine) -> str:
    text = m.start(
        "platform",
        "how do storage and platforms compare, for the same PostgreSQL?",
        "One server per data directory given (--data-dir), a dataset in RAM, a long read-only",
        "warmup, read-only then read-write with every table vacuumed before each run.",
        description="the same PostgreSQL on each storage given",
        repeats=3,
    )
    m.timing(text, 60, vacuum="all")
    clients = sizing.tens_ladder(m.facts, m.quick)
    settings = m.settings(clients[-1])
    dirs = m.options.data_dirs
    if not dirs:
        server(text, "default", m.facts.newest.name, settings)
        text.comment(
            "the data directory goes beside the results; give --data-dir DIR (once per",
            'storage) to compare storages, or a data_dir = "/mnt/..." key here',
        )
    for index, path in enumerate(dirs, start=1):
        server(text, f"storage{index}", m.facts.newest.name, settings)
        text.key("data_dir", str(path.resolve()), "must be empty or pgbenchlab's own")
    m.matrix(
        text,
        m.scales[1:2],
        [
            {"builtin": "select-only", "warmup": "1s" if m.quick else "300s"},
            {"builtin": "tpcb-like"},
        ],
        clients,
        workload_note="a long read-only warmup fills the caches first",
        clients_note="1, 10, 20 … 4 × CPUs",
    )
    text.key("connection", "tcp", "over TCP with a password, as applications connect")
    return finish(text, m.facts.cpus)


def scalability(m: Machine) -> str:
    text = m.start(
        "scalability",
        "where does scaling stop?",
        "Select-only on a dataset in shared_buffers (no I/O: CPU, locks and the kernel only),",
        "clients from 1 to hundreds, threads up to the CPUs.",
        description="select-only in memory, clients to hundreds",
        repeats=3,
    )
    m.timing(text, 10, vacuum="pgbench")
    if not m.quick:
        profile(text, "where the time goes per client count")
    top = 2 * m.facts.cpus if m.quick else max(256, 8 * m.facts.cpus)
    clients = m.ladder(top)
    server_cpus, pgbench_cpus = pinning(m.facts.cpus)
    if pgbench_cpus:
        text.table("pgbench", "pgbench on CPUs of its own: it never takes the server's")
        text.key("cpus", pgbench_cpus)
    if not server_cpus:
        text.blank().comment(
            f"Not pinned: below {PIN_FROM_CPUS} CPUs, a CPU of pgbench's own would take a "
            "third or more",
            "of the server's, though select-only's client needs less than a whole one; from",
            f"{PIN_FROM_CPUS} CPUs the plan gives pgbench a quarter ([pgbench] cpus), the server "
            "the rest.",
        )
    server(text, "server", m.facts.newest.name, m.settings(clients[-1]))
    if server_cpus:
        text.key("cpus", server_cpus, "the rest of the CPUs")
    m.matrix(
        text,
        m.scales[:1],
        ["select-only"],
        clients,
        clients_note=f"1 … {top}: far past the {m.facts.cpus} CPUs",
    )
    return finish(text, m.facts.cpus)


def pinning(cpus: int) -> tuple[str | None, str | None]:
    """The server's and pgbench's CPU lists: a quarter of the CPUs (the last ones) for
    pgbench, the rest for the server; none below 4 CPUs."""
    if cpus < PIN_FROM_CPUS:
        return None, None
    first_client = cpus - cpus // 4
    return cpu_range(0, first_client - 1), cpu_range(first_client, cpus - 1)


def cpu_range(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"
