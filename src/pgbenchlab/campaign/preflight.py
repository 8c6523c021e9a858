"""What is checked before a campaign starts, as one ordered list (`CHECKS`): each a named check
with what it checks and its remedy. They run in order and every problem is collected (a check
that needs an earlier one which failed is skipped, and says so); the problems are raised
together (`NotReady`: a line each with its fix, exit 2) before anything is started or changed.

Two passes over the same list. First what this machine alone can tell, with nothing built,
fetched, started or connected to (`check_before_start`: `run --dry-run` shows its outcomes;
`run` and `capacity` call it before they build). The items that need more (a build made,
prebuilt binaries fetched, a host reached, an external server connected to) are left to the
second pass (`check_equipment`, from `equipment.prepared`), which runs the checks that left some.
"""

from __future__ import annotations

from functools import partial

from pgbenchlab import builds
from pgbenchlab.analysis.slo import Slo
from pgbenchlab.builds import BuildRecipe
from pgbenchlab.campaign.checklist import (
    Check,
    CheckOutcome,
    Findings,
    Readiness,
    Status,
    refuse,
    run_checks,
)
from pgbenchlab.campaign.counting import check_valgrind
from pgbenchlab.campaign.floors import restart_problems
from pgbenchlab.campaign.hosts import used_hosts
from pgbenchlab.campaign.pinning import placements
from pgbenchlab.campaign.servers import (
    check_external,
    check_pooler,
    check_settings,
    check_tls,
    data_dir_clashes,
)
from pgbenchlab.campaign.tablespace_checks import tablespace_dirs
from pgbenchlab.errors import UserError
from pgbenchlab.hosts import Host
from pgbenchlab.installs import Installation
from pgbenchlab.invocation.scripts import check_script
from pgbenchlab.plan import POOLER, Plan, ServerPlan
from pgbenchlab.plan.reset import restored_servers
from pgbenchlab.store.metrics import METRICS
from pgbenchlab.telemetry.profiler import check_perf
from pgbenchlab.tunables import KernelTunables

__all__ = [
    "CHECKS",
    "Check",
    "CheckOutcome",
    "Findings",
    "Readiness",
    "Status",
    "check_before_start",
    "check_equipment",
    "completed",
    "first_pass",
    "refuse",
    "run_checks",
    "searchable_problems",
]


def capacity_search(ready: Readiness, found: Findings) -> None:
    if ready.slo is not None:
        found.add(searchable_problems(ready.plan, ready.slo))


def decided_metrics(ready: Readiness, found: Findings) -> None:
    verdicts = ready.plan.verdicts
    known = set(METRICS) | {m.column for m in METRICS.values()}
    found.add([
        f"decide names {name!r}, not a metric; metrics: {', '.join(METRICS)}"
        for name in verdicts.decide
        if name not in known
    ])  # fmt: skip


def searchable_problems(plan: Plan, slo: Slo) -> list[str]:
    """Why the plan's cells cannot be searched for a capacity under slo, a line each."""
    problems = []
    if rated := next((s for s in plan.specs if s.options.rate is not None), None):
        problems.append(
            f"the plan gives a rate (-R {rated.options.rate:g}, cell {rated.label}): capacity "
            "searches the rate itself; remove the rate axis"
        )
    if counted := next((s for s in plan.specs if s.options.duration_s is None), None):
        problems.append(
            f"workload {counted.workload.name} runs a fixed count of transactions "
            "(transactions = N) and cannot be rate-limited for a time: give it a duration"
        )
    if slo.latency_bound_ms is None and any(s.options.latency_limit_ms is None for s in plan.specs):
        problems.append(
            "the SLO bounds no latency and the plan gives no latency_limit: -L needs one "
            "of them for late and skipped transactions"
        )
    return problems


def build_sources(ready: Readiness, found: Findings) -> None:
    for recipe in ready.plan.needed_builds:
        found.attempt(partial(build_source, recipe, found))


def build_source(recipe: BuildRecipe, found: Findings) -> None:
    """What building the recipe needs, and its configure options as its source's configure
    lists them (left to the build when the source is not fetched yet)."""
    builds.check(recipe)
    if not builds.check_configure_options(recipe, builds.cache_root()):
        found.leave(f"build {recipe.name}: its configure options (its source not fetched yet)")


def perf(ready: Readiness, found: Findings) -> None:
    if any(spec.profiled for spec in ready.plan.specs):
        found.attempt(check_perf)


def valgrind(ready: Readiness, found: Findings) -> None:
    for server in (s for s in ready.managed if ready.plan.counts(s.name)):
        host = ready.host(server.host)
        if host is None:
            found.leave(f"server {server.name}: valgrind on host {server.host}")
        else:
            found.attempt(partial(check_valgrind, host), f"server {server.name}")


def restarts(ready: Readiness, found: Findings) -> None:
    if ready.plan.restart != "never":
        found.add(restart_problems(ready.plan))


def kernel_tunables(ready: Readiness, found: Findings) -> None:
    if ready.plan.sysctl_names:
        found.add(KernelTunables(ready.plan.sysctl_names).problems())


def shared_data_dirs(ready: Readiness, found: Findings) -> None:
    if any(s.managed and s.data_dir for s in ready.plan.servers):
        found.add(data_dir_clashes(ready.plan))


def hosts(ready: Readiness, found: Findings) -> None:
    reached = ready.hosts
    for name in used_hosts(ready.plan):
        if reached is None:
            found.leave(f"host {name} is reached")
        else:
            found.attempt(partial(reached.check, name))


def cpus(ready: Readiness, found: Findings) -> None:
    for what, where, check in placements(ready.plan):
        host = ready.host(where)
        if host is None:
            found.leave(f"{what}: checked on host {where}")
        else:
            found.attempt(partial(check, host))


def installations(ready: Readiness, found: Findings) -> None:
    for server in ready.managed:
        if waits := ready.waits_for(server):
            found.leave(f"server {server.name}: its installation ({waits}) is checked")
        else:
            found.attempt(partial(ready.install, server), f"server {server.name}")


def pgbench(ready: Readiness, found: Findings) -> None:
    if waits := ready.pgbench_waits_for():
        found.leave(waits)
    else:
        found.attempt(ready.pgbench)


def scripts(ready: Readiness, found: Findings) -> None:
    """Each custom script parsed by the campaign's pgbench, where it runs."""
    plan = ready.plan
    files = {
        s.name: s.text for spec in plan.specs for s in spec.workload.scripts if s.kind == "file"
    }
    if not files:
        return
    if ready.pgbench_waits_for():
        found.leave(f"{len(files)} script(s) are parsed by pgbench")
        return
    host = ready.host(plan.pgbench_hosts[0] if plan.pgbench_hosts else None)
    assert host is not None, "the pgbench choice waited for its host"
    binary = ready.pgbench().binary
    for name, text in sorted(files.items()):
        found.attempt(partial(check_script, host, binary, name, text))


def pooler(ready: Readiness, found: Findings) -> None:
    """On each host that runs a pooled server (this machine included)."""
    plan = ready.plan
    pooled = {s.host: s.name for s in ready.managed if plan.uses_connection(POOLER, s.name)}
    for name, server in pooled.items():
        host = ready.host(name)
        if host is None:
            found.leave(f"server {server}: its pooler on host {name} is found")
        else:
            found.attempt(partial(check_pooler, plan, host))


def settings(ready: Readiness, found: Findings) -> None:
    """Every combination of settings each managed server starts with, judged by its own
    postgres; and TLS where the plan connects with it."""
    for server in ready.managed:
        host = ready.host(server.host)
        if (waits := ready.waits_for(server)) or host is None:
            found.leave(f"server {server.name}: its settings ({waits}) are judged")
        else:
            found.attempt(partial(judge_settings, ready, server, host))


def judge_settings(ready: Readiness, server: ServerPlan, host: Host) -> None:
    install = ready.install(server)
    check_settings(server, ready.plan, install, host)
    if ready.plan.uses_connection("tls", server.name):
        check_tls(server, ready.plan, install, host)


def snapshot_tools(ready: Readiness, found: Findings) -> None:
    """pg_controldata in each installation whose data directory a snapshot reset restores:
    the restore verifies the image with it (prebuilt binaries ship none)."""
    plan = ready.plan
    for name in restored_servers(plan.specs, plan.groups, plan.dataset):
        server = plan.server(name)
        if waits := ready.waits_for(server):
            found.leave(f"server {name}: its installation ({waits}) has pg_controldata")
        else:
            found.attempt(partial(has_controldata, ready.install(server), name))


def has_controldata(install: Installation, server: str) -> None:
    if not install.binary("pg_controldata").is_file():
        raise UserError(
            f"server {server}: installation {install.name} has no pg_controldata, which reset = "
            '"snapshot" needs to verify each restored image; use reset = "reuse" or "init", or '
            "an installation with it (a build, or Debian's package)"
        )


def data_dirs(ready: Readiness, found: Findings) -> None:
    for server in (s for s in ready.managed if s.data_dir):
        if ready.servers is None:  # as the server account, known (or made) when it starts
            found.leave(f"server {server.name}: its data_dir is checked")
        else:
            found.attempt(partial(ready.servers.check_data_dir, server))


def external_servers(ready: Readiness, found: Findings) -> None:
    for server in (s for s in ready.plan.servers if not s.managed):
        if ready.servers is None:
            found.leave(f"server {server.name} is connected to")
        else:
            found.attempt(partial(check_external, server, ready.plan))


CHECKS: tuple[Check, ...] = (
    Check(
        "capacity search",
        "capacity only: no rate axis, a duration for every workload, a latency bound for -L",
        capacity_search,
        "remove the rate axis, give durations, and a latency bound in the SLO or latency_limit",
    ),
    Check(
        "metrics",
        "decide names metrics the results database stores (`compare --metric` lists them)",
        decided_metrics,
        "name metrics such as tps, p99, latency_avg in [campaign] decide",
    ),
    Check(
        "builds",
        "each [build.NAME] used: its compiler, build system, patch files and source (a file, "
        "a repository and its ref, a source tree), and its configure options as its source's "
        "`configure --help` lists them",
        build_sources,
        "correct the [build.NAME] table (source, ref, compiler, patches, configure) or install "
        "what it needs",
    ),
    Check(
        "perf",
        "profiled runs: perf installed here and allowed to profile other users' processes",
        perf,
        "install linux-perf and run as root (or lower kernel.perf_event_paranoid)",
    ),
    Check(
        "valgrind",
        'counted servers (count = "instructions"): valgrind (callgrind) runs on their host',
        valgrind,
        "install valgrind (apt install valgrind) on the server's host, or remove count",
        needs=("hosts",),
    ),
    Check(
        "kernel tunables",
        "[matrix.sysctl]: pgbenchlab runs as root, and each tunable exists here",
        kernel_tunables,
        "run as root, and name tunables this kernel has (or remove [matrix.sysctl])",
    ),
    Check(
        "restarts",
        'restart = "each-round": pgbenchlab runs as root (it drops the page cache)',
        restarts,
        "run as root, or remove restart from [campaign]",
    ),
    Check(
        "data directories apart",
        "no two managed servers share a data_dir",
        shared_data_dirs,
        "give each server a data_dir of its own",
    ),
    Check(
        "hosts",
        "each [[host]] a server or load generator runs on: reached over SSH, its host key "
        "known, and a login other than root where a managed server runs",
        hosts,
        "correct the [[host]] (ssh, identity, known_hosts) or the host itself",
    ),
    Check(
        "cpus",
        "every CPU list names CPUs its host has, and the host can pin (taskset or numactl); "
        "every NUMA policy names nodes its host has, and the host has numactl",
        cpus,
        "name CPUs and nodes the host has, install taskset or numactl, or remove cpus or numa",
        needs=("hosts",),
    ),
    Check(
        "installations",
        "each managed server's installation found (a version, a source, a bin directory, a "
        "made build or fetched binaries)",
        installations,
        "name an installation that exists (`pgbenchlab installs` lists them)",
        needs=("hosts",),
    ),
    Check(
        "pgbench",
        "the [pgbench] install: found, the options its version lacks (max_tries, tls), the "
        "same one on every load generator, perf where pgbench is profiled",
        pgbench,
        "choose another [pgbench] install or remove the option it lacks",
        needs=("hosts",),
    ),
    Check(
        "scripts",
        "each custom script parsed by the campaign's pgbench (its meta-commands; the SQL is "
        "the server's to judge)",
        scripts,
        "correct the script where pgbench points (pgbench-reference: script syntax)",
        needs=("pgbench",),
    ),
    Check(
        "pooler",
        'connection = "pgbouncer": PgBouncer found on each pooled server\'s host ([pooler] '
        "install, PATH or Debian's), and able to pool the runs through it (-M prepared in a "
        "transaction or statement pool needs 1.21)",
        pooler,
        "install Debian's package pgbouncer (or name one), or change the protocol or pool_mode",
        needs=("hosts",),
    ),
    Check(
        "server settings",
        "each managed server's settings (every variant), and TLS where it is used, as its own "
        "postgres judges them",
        settings,
        "correct or remove the setting (or build with --with-openssl for TLS)",
        needs=("installations",),
    ),
    Check(
        "snapshot reset",
        '[dataset] reset = "snapshot": each restored server\'s installation has pg_controldata',
        snapshot_tools,
        'use reset = "reuse" or "init", or an installation with pg_controldata',
        needs=("installations",),
    ),
    Check(
        "server data directories",
        "each data_dir named: not inside another cluster, creatable by the server account",
        data_dirs,
        "choose another data_dir, or make its parent writable for the server account",
        needs=("hosts",),
    ),
    Check(
        "tablespaces",
        "[dataset] tablespace directories, on each managed server's host: outside every "
        "managed server's data directory there, and creatable (or writable) by the server "
        "account there",
        tablespace_dirs,
        "choose a directory outside the data directories that the server account can write",
        needs=("hosts",),
    ),
    Check(
        "external servers",
        "each external server reached with its dsn, its pgbench tables there unless init = true",
        external_servers,
        "correct the dsn, start the server, or set init = true",
    ),
)


def first_pass(plan: Plan, slo: Slo | None = None) -> list[CheckOutcome]:
    """The checks from this machine alone; what needs more is left for the campaign."""
    return run_checks(Readiness(plan, slo), CHECKS)


def check_before_start(plan: Plan, slo: Slo | None = None) -> list[CheckOutcome]:
    """The first pass (`first_pass`), NotReady when it found a problem."""
    outcomes = first_pass(plan, slo)
    refuse(outcomes)
    return outcomes


def check_equipment(ready: Readiness, first: list[CheckOutcome] | None) -> list[CheckOutcome]:
    """The second pass: the checks that left items for it (without a first pass: every
    check), now that the campaign has its builds, binaries and hosts; NotReady when it found
    a problem."""
    left = CHECKS if first is None else tuple(o.check for o in first if o.later)
    outcomes = run_checks(ready, left, first)
    refuse(outcomes)
    return outcomes


def completed(ready: Readiness, first: list[CheckOutcome]) -> list[CheckOutcome]:
    """Every check's outcome once those that left items in the first pass ran again with what
    ready has now (`run --check`), in the list's order; nothing raised."""
    again = run_checks(ready, tuple(o.check for o in first if o.later), first)
    by_name = {o.check.name: o for o in again}
    return [by_name.get(o.check.name, o) for o in first]
