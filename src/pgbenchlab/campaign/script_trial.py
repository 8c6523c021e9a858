"""`run --check`'s trial of the custom scripts against a dataset: each script run once (`pgbench
-t 1`) by the campaign's pgbench on a throwaway cluster of each installation its managed servers
here use, in a scale-1 dataset made as the plan makes its datasets (`[dataset]`: its pgbench -i
options and setup SQL). What parsing cannot tell (a table or column that does not exist, a
function the major lacks, a variable never set) is then a problem with the script's line,
listed with every other check's before hours of builds and runs.

The cheapest honest way: the server judges the SQL as it will in the campaign (names, types,
what its major offers), on a dataset made the campaign's way, for the price of an initdb and a
scale-1 `pgbench -i` per installation. The cluster lives in a private temporary directory,
removed afterwards: the results directory is not touched. A check killed meanwhile leaves its
trial behind; the next check, and `clean`, stop and remove the trials whose check is gone.
Servers on other hosts and external servers are not tried (their datasets are not ours to
write into), nor is anything when pgbench runs on a load generator host.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pgbenchlab import dataset, osuser
from pgbenchlab.campaign.checklist import Check, Findings, Readiness
from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import LOCAL_HOST, process_running
from pgbenchlab.installs import Installation
from pgbenchlab.invocation.command import Call, execute
from pgbenchlab.invocation.scripts import aborted_at
from pgbenchlab.pgbench.progress import error_summary
from pgbenchlab.plan import Plan, Script, ServerPlan
from pgbenchlab.server import Endpoint, ManagedServer, stop_leftover

TRIAL_SCALE = 1
TRIAL_PREFIX = "pgbenchlab-trial-"
TRIAL_TIMEOUT_S = 60
OWNER = "owner-pid"  # in a trial's directory: the process of the check that made it


@dataclass(frozen=True)
class Trial:
    """One script as a cell runs it: its variables (-D) and protocol (-M). Prepared is tried
    as extended (the same parameters): an older pgbench prepares every command of a script at
    its first, and a command that fails to prepare is then reported as a prepared statement
    that does not exist."""

    script: Script
    defines: tuple[tuple[str, str], ...]
    protocol: str

    @property
    def mode(self) -> str:
        return "simple" if self.protocol == "simple" else "extended"


def trials(plan: Plan) -> dict[str, list[Trial]]:
    """The scripts each managed server of this machine runs (alone or in a group), once each."""
    found: dict[str, dict[str, Trial]] = {}
    for spec in plan.specs:
        for name in plan.members(spec.server):
            server = plan.server(name)
            if not server.managed or server.host is not None:
                continue
            for script in (s for s in spec.workload.scripts if s.kind == "file"):
                trial = Trial(script, spec.workload.defines, spec.options.protocol)
                found.setdefault(name, {}).setdefault(script.name, trial)
    return {name: list(by_script.values()) for name, by_script in found.items()}


def try_scripts(ready: Readiness, found: Findings) -> None:
    """Each custom script run once on a scale-1 dataset of each installation its servers use."""
    plan, servers = ready.plan, ready.servers
    if servers is None or plan.pgbench_hosts:  # pgbench runs elsewhere: nothing to try here
        return
    remove_stale_trials()
    by_install: dict[Path, tuple[ServerPlan, list[Trial]]] = {}
    for name, wanted in trials(plan).items():
        if ready.waits_for(plan.server(name)) is None:
            install = ready.install(plan.server(name))
            kept = by_install.setdefault(install.bin_dir, (plan.server(name), []))[1]
            kept += [t for t in wanted if t.script.name not in {k.script.name for k in kept}]
    pgbench = ready.pgbench().binary
    for server, wanted in by_install.values():
        found.attempt(partial(try_on_dataset, ready, server, wanted, pgbench))


def try_on_dataset(
    ready: Readiness, server: ServerPlan, wanted: list[Trial], pgbench: Path
) -> None:
    """The trials on a throwaway cluster of the server's installation: PlanError naming every
    script that failed, at its line."""
    with throwaway_dataset(ready, server, pgbench) as (endpoint, install, work):
        problems = [p for t in wanted if (p := run_once(pgbench, endpoint, t, work))]
    if problems:
        release = install.version.text.split(" ")[0]  # 15.18, without the vendor's suffix
        where = f"on a scale-{TRIAL_SCALE} dataset of {install.name}, PostgreSQL {release}"
        raise PlanError(f"{'; '.join(problems)} ({where})")


@contextmanager
def throwaway_dataset(
    ready: Readiness, server: ServerPlan, pgbench: Path
) -> Iterator[tuple[Endpoint, Installation, Path]]:
    """A cluster of the server's installation, started with its defaults, holding a scale-1
    dataset made as the plan makes them; stopped and removed afterwards."""
    servers = ready.servers
    assert servers is not None and servers.account is not None
    account = servers.account
    install = osuser.reachable_install(ready.install(server), account)
    # beside the results nothing is written: a check leaves no trace there
    top = Path(LOCAL_HOST.make_temp_dir(TRIAL_PREFIX, Path(tempfile.gettempdir()), owner=account))
    (top / OWNER).write_text(f"{os.getpid()}\n")  # a killed check's trial is found by it
    cluster = ManagedServer(f"{server.name}-trial", install, top / "data", account)
    try:
        work = top / "work"
        work.mkdir()
        cluster.prepare()
        made = dataset.ensure(
            cluster, TRIAL_SCALE, pgbench=pgbench, work_dir=work, force=False,
            options=ready.plan.dataset,
        )  # fmt: skip
        yield made.endpoint, install, work
    finally:
        cluster.stop()
        LOCAL_HOST.remove_tree(top)


def remove_stale_trials(temp: Path | None = None) -> list[Path]:
    """The trial clusters of checks that were killed (their process is gone): each one's
    postmaster stopped and its directory removed. Returns their data directories."""
    removed = []
    for top in sorted((temp or Path(tempfile.gettempdir())).glob(f"{TRIAL_PREFIX}*")):
        try:
            owner = int((top / OWNER).read_text())
        except (OSError, ValueError):
            continue  # being made, or not a trial's
        if process_running(owner, LOCAL_HOST):
            continue
        stop_leftover(top / "data")
        LOCAL_HOST.remove_tree(top)
        removed.append(top / "data")
    return removed


def run_once(pgbench: Path, endpoint: Endpoint, trial: Trial, work: Path) -> str | None:
    """Why the script failed its one transaction ("script X, line 3: ERROR: …"), or None."""
    script = work / "script.sql"
    script.write_text(trial.script.text)
    defines = [f"-D{name}={value}" for name, value in trial.defines]
    # no -s: :scale stays 1, the dataset's (the campaign gives each run its cell's)
    argv = [str(pgbench), "-n", "-t", "1", "-M", trial.mode, *defines, "-f", str(script)]
    done = execute(
        Call((*argv, endpoint.dbname), endpoint.libpq_env(), work, timeout_s=TRIAL_TIMEOUT_S)
    )
    if done.interrupted:
        raise KeyboardInterrupt
    if done.returncode == 0:
        return None
    said = aborted_at(trial.script.text, done.stderr) or error_summary(done.stderr)
    return f"script {trial.script.name}, {said}"


TRIAL = Check(
    "scripts on a dataset",
    "run --check: each custom script run once (pgbench -t 1) on a scale-1 dataset of each "
    "installation its managed servers here use, made as the plan makes datasets",
    try_scripts,
    "correct the script at the line named (a table, column or function its server lacks, "
    "a variable never set), or the [dataset] setup_sql that should make it",
    needs=("scripts", "installations", "pgbench", "server settings"),
)
