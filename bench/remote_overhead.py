"""Remote overhead: pgbench driven over SSH against the same pgbench started by hand, and a
remote campaign's wall time against the same campaign run on this machine.

Hosts: network namespaces on one bridge, each with its own sshd (tests/netns_hosts.py; root
only): the server on db1 (Debian's PostgreSQL 15, managed by pgbenchlab there), pgbench on lg1.

(a) TPS, interleaved round by round (the order rotates), on one server and one dataset
(select-only, scale 10, 4 clients, -M prepared, -P 1 and the per-transaction log at the rate
"auto" picks, connected over TCP as a campaign connects):
  lab    the campaign's own call: `campaign.measure.Pgbench.run` through the
         `GeneratorExecutor` of lg1 (started detached over SSH, output followed, logs brought
         back);
  hand   the same argv and environment, started by hand in lg1's network namespace
         (`ip netns exec`) in a session of its own, as from a shell there; its log written on
         this machine.
  lab ÷ hand as the median of the rounds' ratios with its distribution-free 95 % interval
  (`harness.paired_median`), the geometric mean beside it. Requirement: the median ≥ 0.98.
  The median because other tenants slow a run by a third now and then, in either mode (one
  round in 12 or so in each, in the runs of 2026-11-25): such a round moves a geometric mean
  of 12 by 3 %, which is the whole margin, and the median by one rank. (This estimator was
  chosen after two runs judged on the geometric mean; their files are in the History.) The
  CPU that processes outside the measurement used during each run is recorded, so a run
  beside other work says so. Beside TPS, the
  CPU per transaction of everything involved (cpuacct cgroups holding this process and each
  host's sshd with all they start), lab ÷ hand: the lab's cost itself, which TPS on this
  shared machine (other tenants, ±15 % from run to run) cannot resolve to 2 %.

Decided before the run:
- Estimator: the median of the rounds' paired TPS ratios lab ÷ hand, with its distribution-
  free 95 % interval (`harness.paired_median`).
- Design: the two modes alternate which goes first, round by round, on one server and dataset.
- Rounds: 24 of 10 s runs.
- Bar: lab ÷ hand ≥ 0.98 on the interval's lower end.

Where the CPU went while pgbench ran (bench/remote_cpu.py: cgroups and per-thread schedstat;
CPU seconds per 10 s run, select-only, 4 clients, mean of 3, the machine loaded by others):

  lab's own processes while pgbench ran   before    after
    this process: SSH loop, output pump    0.014    0.014
    lg1 tail (stderr; stdout too before)   0.007    0.004
    lg1 sshd, monitor, sh                  0.005    0.005
    total                                  0.026    0.023   (pgbench + postgres: 8.5, 0.3 %)

  So the lab's CPU during the run was never the 12 % (nor were `-P 1` streaming, the start
  wrapper, clock probes or the forward: none runs in this figure's window, or costs more than
  these). What differed is scheduling: with autogroups (kernel.sched_autogroup_enabled = 1)
  every session is a scheduling group. pgbench started over SSH runs in a session of its own;
  by hand it ran, before, in this process's session, and its run-queue wait showed it
  (pgbench 5.5 s vs 8.9 s over SSH; postgres 22.7 s vs 18.7 s); by hand in a session of its
  own it waits as over SSH (8.7 s; 17.3 s). Hence "hand" in a session of its own since then.
  In a campaign (not in this figure) the telemetry sampler read /proc on the server's host
  over SFTP, 4 round trips per file: 51 ms and 24 ms of CPU here per sample; now one
  round trip per batch through a reader kept open there: 2.3 ms and 1.1 ms (local: 0.2 ms).

(b) Wall time of a small campaign through the command line (`pgbenchlab run PLAN`, a fresh
process on an empty results directory, its HTML report included), interleaved: remote (server
on db1, pgbench on lg1) and local (the same server installation and pgbench on this machine,
also over TCP). remote ÷ local as a paired ratio, and each one's excess over the time pgbench
ran. Where the remote one's time went (every RemoteHost call timed, cProfile of the main
thread; one campaign each, the machine loaded by others): before, 38.1 s against 19.5 s here,
of which about 2 s per pgbench (9: warmups, runs, the dataset's load) waiting for the end of
a detached command, seen by tail watching its monitor, a zombie until the host's init reaps
it (about 2 s late in these namespaces' container); tail now watches the command itself. Then
1.4 s of /proc samples over SFTP at the runs' starts and ends (batched now). After: 20.3 s;
what is left is about 50 ms per pgbench start (python3 monitor) and 10-20 ms per command
(mktemp, rm, exit and output files) over SSH.

The figure of record: .venv/bin/python bench/remote_overhead.py   (about 12 min: 24 rounds of
2 × 10 s, then 3 rounds of two campaigns of 4 runs of 3 s + 1 s warmup).
Smoke test: --rounds 1 --seconds 2 --campaign-rounds 1 --output /tmp/remote_overhead.md.
Writes bench/remote_overhead.md (--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cgroups import holding, usage_s
from cpuclock import machine_busy_s
from figure import Bar, verdict_line, write_figure
from harness import (
    HERE,
    REPO,
    SCALE,
    Provenance,
    Ratio,
    paired_median,
    paired_ratio,
    rotated,
)
from pgbenchlab import installs, plan
from pgbenchlab.campaign import remove_clusters
from pgbenchlab.campaign.client import choose_pgbench
from pgbenchlab.campaign.executor import GeneratorExecutor
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.campaign.measure import Pgbench, measured_invocation, sampling_rate
from pgbenchlab.campaign.servers import Servers
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.server import Endpoint

sys.path.insert(0, str(REPO / "tests"))
from netns_hosts import TestHosts, unavailable  # the tests' own hosts

CLI = Path(sys.executable).with_name("pgbenchlab")  # the virtualenv's entry point
MODES = ("lab", "hand")
CAMPAIGN_MODES = ("remote", "local")
WORKLOAD = "select-only"
CAMPAIGN_RUNS = """
[defaults]
duration = "3s"
warmup = "1s"
connection = "tcp"

[matrix]
scale = [1]
workload = ["select-only", "tpcb-like"]
clients = [1, 4]
"""


def hosts_toml(hosts: TestHosts) -> str:
    return "".join(
        f'[[host]]\nname = "{name}"\nssh = "{hosts.ssh_target(name)}"\n'
        f'identity = "{hosts.identity}"\nknown_hosts = "{hosts.known_hosts}"\n'
        for name in ("db1", "lg1")
    )


def remote_plan(hosts: TestHosts, name: str, body: str) -> str:
    return (
        f'[campaign]\nname = "{name}"\n\n{hosts_toml(hosts)}\n[pgbench]\nhosts = ["lg1"]\n\n'
        f'[[server]]\nname = "pg15"\nhost = "db1"\ninstall = "15"\n{body}'
    )


def local_plan(name: str, body: str) -> str:
    return f'[campaign]\nname = "{name}"\n\n[[server]]\nname = "pg15"\ninstall = "15"\n{body}'


# -- (a) TPS: pgbench over SSH against pgbench by hand -------------------------------------------


@dataclass
class Generator:
    """The lab's pgbench on lg1 and the by-hand command beside it, against one dataset."""

    pgbench: Pgbench
    endpoint: Endpoint  # how pgbench connects (TCP to db1)
    namespace: str  # lg1's network namespace
    spec: plan.RunSpec
    work: Path

    def lab(self, sampling: float | None) -> tuple[Run, list[str]]:
        """The campaign's own call, and the argv it ran (paths on this machine)."""
        artifacts = self._fresh("lab")
        run = measured_invocation(self.spec, artifacts, sampling)
        done = self.pgbench.run(self.endpoint, run, artifacts, lambda _line: None)
        if done.returncode != 0:
            raise SystemExit(f"pgbench on lg1 exited {done.returncode}: {done.stderr[-500:]}")
        return _run(done.stdout), [a.replace(str(artifacts), "{LOGS}") for a in done.argv]

    def hand(self, argv: list[str], *, new_session: bool = True) -> Run:
        """The same pgbench started by hand in lg1's namespace, in a session of its own as from
        a shell there (the lab's is in one too: with the kernel's autogroups a session is a
        scheduling group, and one shared with this process schedules pgbench differently)."""
        logs = self._fresh("hand")
        env = {"PATH": "/usr/bin:/bin", "PG_COLOR": "never", **self.endpoint.libpq_env()}
        done = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                self.namespace,
                *(a.replace("{LOGS}", str(logs)) for a in argv),
            ],
            env=env,
            cwd=logs,
            capture_output=True,
            text=True,
            check=False,
            start_new_session=new_session,
        )
        if done.returncode != 0:
            raise SystemExit(f"pgbench by hand exited {done.returncode}: {done.stderr[-500:]}")
        return _run(done.stdout)

    def _fresh(self, name: str) -> Path:
        path = self.work / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        return path


@dataclass(frozen=True)
class Run:
    tps: float
    transactions: int


def _run(stdout: str) -> Run:
    report = parse_report(stdout)
    assert report.tps is not None
    return Run(report.tps, report.transactions)


@contextmanager
def generator(hosts: TestHosts, seconds: int, clients: int) -> Iterator[Generator]:
    """A managed server on db1 with a scale-10 dataset, pgbench on lg1: the campaign's own
    classes, as `pgbenchlab run` sets them up."""
    body = f'[defaults]\nduration = "{seconds}s"\nconnection = "tcp"\n'
    body += f'[matrix]\nscale = [{SCALE}]\nworkload = ["{WORKLOAD}"]\nclients = [{clients}]\n'
    work = Path(tempfile.mkdtemp(prefix="pgbl-remote-"))
    the_plan = plan.parse(remote_plan(hosts, "tps", body), str(work / "tps.toml"), base=work)
    campaign_hosts = CampaignHosts(the_plan)
    servers = Servers(the_plan, work, installs.discover(), campaign_hosts)
    try:
        for name in sorted(campaign_hosts.used):
            campaign_hosts.check(name)
        campaign_hosts.stop_leftovers()
        servers.claim()
        spec = the_plan.specs[0]
        server, _ = servers.get(spec)
        lg1 = campaign_hosts.get("lg1")
        client = choose_pgbench(the_plan, campaign_hosts.installations("lg1"), lg1)
        executor = GeneratorExecutor(lg1)
        prepared = executor.prepare_dataset(
            server, SCALE, pgbench=client.binary, work_dir=work, force=True
        )
        endpoint = server.client_endpoint("tcp").with_dbname(prepared.endpoint.dbname)
        namespace = hosts.hosts["lg1"].namespace
        yield Generator(Pgbench(client, executor), endpoint, namespace, spec, work)
    finally:
        servers.stop_all()
        servers.release()
        campaign_hosts.close()
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class TpsFound:
    """Per mode and round: TPS, and CPU µs per transaction of everything the run involved."""

    tps: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    cpu_us: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    other_share: list[float] = field(default_factory=list)  # CPUs used outside, per run


def measure_tps(hosts: TestHosts, args: argparse.Namespace) -> TpsFound:
    sshd = {name: host.sshd.pid for name, host in hosts.hosts.items() if host.sshd}
    tag = f"pgbl-overhead-{os.getpid()}"
    with (
        holding({"here": os.getpid(), **sshd}, tag) as groups,
        generator(hosts, args.seconds, args.clients) as lg1,
    ):
        warmup, _ = lg1.lab(None)  # untimed: caches warm, and the log's sampling rate
        sampling = sampling_rate(lg1.spec, warmup.tps)
        _, argv = lg1.lab(sampling)
        found = TpsFound()
        for round_no in range(args.rounds):
            for mode in rotated(MODES, round_no):
                before = (usage_s(groups), machine_busy_s(), time.monotonic())
                run = lg1.lab(sampling)[0] if mode == "lab" else lg1.hand(argv)
                ours, busy, wall = (
                    a - b
                    for a, b in zip(
                        (usage_s(groups), machine_busy_s(), time.monotonic()), before, strict=True
                    )
                )
                found.cpu_us[mode].append(ours / run.transactions * 1e6)
                found.other_share.append(max(0.0, busy - ours) / ((os.cpu_count() or 1) * wall))
                found.tps[mode].append(run.tps)
            print("tps round", round_no + 1, {m: round(v[-1]) for m, v in found.tps.items()})
        return found


# -- (b) wall time: a remote campaign against the same campaign here -----------------------------


def timed_cli(argv: list[str]) -> float:
    """The wall seconds of one CLI process, which must succeed (a failed run is no figure)."""
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stdout[-500:]}{done.stderr}")
    return wall


def campaign_wall(hosts: TestHosts, mode: str, round_no: int) -> float:
    """One campaign through the command line on an empty results directory; its clusters go
    afterwards (outside the time), so every campaign makes its own."""
    name = f"overhead{round_no}"
    work = Path(tempfile.mkdtemp(prefix="pgbl-remote-campaign-"))
    text = (
        remote_plan(hosts, name, CAMPAIGN_RUNS)
        if mode == "remote"
        else local_plan(name, CAMPAIGN_RUNS)
    )
    plan_file = work / f"{mode}.toml"
    plan_file.write_text(text)
    results = work / "results"
    try:
        wall = timed_cli([str(CLI), "run", str(plan_file), "--results", str(results), "-q"])
    finally:
        remove_clusters(results)
        if mode == "remote":
            hosts_of_plan = CampaignHosts(plan.load(plan_file))
            db1 = hosts_of_plan.get("db1")
            state = db1.state_dir()
            assert state is not None  # a remote host keeps one
            db1.remove_tree(state / "clusters" / name)
            hosts_of_plan.close()
        shutil.rmtree(work, ignore_errors=True)
    return wall


def measure_campaigns(hosts: TestHosts, rounds: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {mode: [] for mode in CAMPAIGN_MODES}
    for round_no in range(rounds):
        for mode in rotated(CAMPAIGN_MODES, round_no):
            found[mode].append(campaign_wall(hosts, mode, round_no))
        print("campaign round", round_no + 1, {m: round(v[-1], 1) for m, v in found.items()})
    return found


TPS = Bar("TPS ≥ 0.98", 0.98, at_most=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--campaign-rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=HERE / "remote_overhead.md")
    args = parser.parse_args()
    missing = unavailable()
    if missing:
        raise SystemExit(missing)
    provenance = Provenance.start()
    hosts = TestHosts()
    try:
        hosts.add("db1")
        hosts.add("lg1")
        tps = measure_tps(hosts, args)
        walls = measure_campaigns(hosts, args.campaign_rounds)
        left = hosts.leftovers()
    finally:
        hosts.close()
    text = markdown(provenance, args, tps, walls, left)
    write_figure(args.output, text)
    print(text)


def markdown(
    provenance: Provenance,
    args: argparse.Namespace,
    found: TpsFound,
    walls: dict[str, list[float]],
    left: list[str],
) -> str:
    tps = found.tps
    tps_ratio = paired_ratio(tps["hand"], tps["lab"])
    tps_median = paired_median(tps["hand"], tps["lab"])
    cpu_ratio = paired_ratio(found.cpu_us["hand"], found.cpu_us["lab"])
    wall_ratio = paired_ratio(walls["local"], walls["remote"])
    the_plan = plan.parse(local_plan("x", CAMPAIGN_RUNS), "x.toml", base=HERE)
    pgbench_s = sum((s.options.duration_s or 0) + s.options.warmup_s for s in the_plan.specs)
    other = statistics.fmean(found.other_share)
    lines = [
        "# Remote overhead: pgbench driven over SSH, and a remote campaign's wall time",
        "",
        *provenance.header(),
        verdict_line([(TPS, TPS.verdict(tps_median.low, tps_median.high))]),
        "",
        "Hosts are network namespaces on this machine, each with its own sshd "
        "(tests/netns_hosts.py): the server on db1 (PostgreSQL 15, managed there), pgbench on "
        "lg1. All figures are from this run of `bench/remote_overhead.py` (its docstring "
        "describes the configurations).",
        "",
        f"## TPS: pgbench started over SSH ÷ started by hand ({args.rounds} interleaved rounds)",
        "",
        f"{WORKLOAD}, scale {SCALE}, {args.clients} clients, {args.seconds} s per run, over TCP "
        "from lg1 to db1. Requirement: ≥ 0.98 on the median's interval. Processes outside the "
        f"measurement used {other:.1%} of the CPUs during the runs (mean; the largest "
        f"{max(found.other_share):.1%}).",
        "",
        "| configuration | median TPS | median CPU µs per transaction |",
        "|---|---|---|",
        *(
            f"| {mode} | {statistics.median(tps[mode]):,.0f} | "
            f"{statistics.median(found.cpu_us[mode]):.2f} |"
            for mode in MODES
        ),
        "",
        "TPS lab ÷ hand, paired, median of the rounds' ratios (distribution-free 95 % "
        f"interval; the requirement's figure): {_ratio(tps_median)}",
        "",
        f"TPS lab ÷ hand, paired, geometric mean (95 % t interval): {_ratio(tps_ratio)}",
        "",
        "CPU per transaction of everything involved (server, pgbench, the SSH sessions and "
        "their commands on both hosts, this process; cpuacct cgroups), lab ÷ hand, paired "
        f"(95 % interval): {_ratio(cpu_ratio)}. The lab's own cost as CPU rather than as "
        "the share of the machine each run got: with the CPUs saturated, TPS ≥ 0.98 needs "
        "this ≤ 1.02.",
        "",
        f"## Campaign wall time: remote ÷ local ({args.campaign_rounds} interleaved rounds)",
        "",
        f"{len(the_plan.specs)} runs of 3 s + 1 s warmup (pgbench ran {pgbench_s:.0f} s per "
        "campaign), each campaign through `pgbenchlab run PLAN --results EMPTY_DIR -q` with its "
        "initdb, server start, dataset, runs and HTML report.",
        "",
        "| campaign | median wall s | median wall ÷ pgbench time |",
        "|---|---|---|",
        *(
            f"| {mode} | {statistics.median(walls[mode]):.1f} | "
            f"{statistics.median(walls[mode]) / pgbench_s:.3f} |"
            for mode in CAMPAIGN_MODES
        ),
        "",
        f"Wall remote ÷ local, paired, geometric mean (95 % interval): {_ratio(wall_ratio)}",
        "",
        f"Left running as the hosts' account afterwards: {len(left)} processes.",
    ]
    return "\n".join(lines) + "\n"


def _ratio(ratio: Ratio) -> str:
    return (
        ratio.text(4)
        if ratio.high != float("inf")
        else f"{ratio.value:.4f} (one round: no interval)"
    )


if __name__ == "__main__":
    main()
