"""Telemetry overhead: the same pgbench run with and without the full telemetry capture.

Two configurations, interleaved round by round (the order alternates) on one managed server
(PostgreSQL 18, embedded, scale 10):
  off   pgbench as pgbenchlab runs it (-P 1, the per-transaction log sampled as "auto" picks)
  on    the same, with `telemetry.capture.Capture` beside it: pg_stat_activity 5×/s, the
        cumulative views and /proc once a second over one connection, the server log read
        after the run, pg_stat_statements when loaded (it is not, here)

For each workload it reports the TPS ratio on/off with a 95 % confidence interval over the
rounds (Welch on log TPS, docs/statistics.md) and the CPU per transaction of everything the
measurement involves: the server's processes (postmaster, backends, the sampler's backend),
pgbench, and this process (the sampler thread). CPU accounting is far tighter than TPS on a
noisy machine. First it measures the sampler's own cost directly: a capture beside an idle
server for 10 s, the CPU of this process and of the sampler's backend per second.

Usage: .venv/bin/python bench/telemetry_overhead.py [--rounds 20] [--seconds 5] [--clients 4]
       [--workloads select-only,tpcb-like]
Writes bench/telemetry_overhead.md (--output elsewhere for a smoke test).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import comparison, dataset, installs, osuser, plan, runner
from pgbenchlab.pgbench import command
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.pgbench.version import PgVersion, parse_version
from pgbenchlab.server import Endpoint, ManagedServer
from pgbenchlab.telemetry import osstats
from pgbenchlab.telemetry.campaign import device_of, postmaster_pid
from pgbenchlab.telemetry.capture import Capture, CaptureConfig
from pgbenchlab.telemetry.machine import describe_machine

HERE = Path(__file__).parent
MODES = ("off", "on")


@dataclass(frozen=True)
class Measured:
    tps: float
    cpu_us_per_tx: float  # server + pgbench + this process, per transaction
    sampler_us_per_s: float  # this process's CPU per second of run (the sampler thread)


def spec_for(workload: str, clients: int, seconds: int) -> plan.RunSpec:
    text = f"""
[defaults]
duration = "{seconds}s"
[matrix]
scale = [10]
workload = ["{workload}"]
clients = [{clients}]
"""
    return plan.parse(text, "bench.toml", base=HERE).specs[0]


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Bench:
    binary: Path
    version: PgVersion
    server: ManagedServer
    endpoint: Endpoint
    logs: Path

    def run(self, spec: plan.RunSpec, mode: str, warmup_tps: float | None) -> Measured:
        for old in self.logs.glob("pgbench_log.*"):
            old.unlink()
        sampling = runner.sampling_rate(spec, warmup_tps)
        invocation = command.Invocation(
            spec.workload,
            spec.scale,
            spec.clients,
            spec.options,
            spec.options.duration_s,
            log_dir=self.logs if sampling else None,
            sampling_rate=sampling or 1.0,
        )
        argv = command.build_argv(self.binary, self.version, invocation, self.endpoint.dbname)
        pid = postmaster_pid(self.server.data_dir)
        assert pid is not None
        server_before = osstats.server_times(Path("/proc"), pid)
        own_before, started = own_cpu_s(), time.monotonic()
        capture = self.capture() if mode == "on" else None
        if capture is not None:
            capture.start()
        try:
            done = command.execute(
                argv,
                self.endpoint.libpq_env(),
                cwd=self.logs,
                on_start=capture.pgbench_started if capture else None,
            )
        finally:
            if capture is not None:
                capture.stop()
        own, wall = own_cpu_s() - own_before, time.monotonic() - started
        server_after = osstats.server_times(Path("/proc"), pid)
        assert server_before is not None and server_after is not None
        report = parse_report(done.stdout)
        assert report.tps is not None and report.transactions
        cpu = server_after[0] - server_before[0] + done.cpu_s + own
        return Measured(report.tps, cpu * 1e6 / report.transactions, own * 1e6 / wall)

    def sampler_cost(self, seconds: float = 10.0) -> tuple[float, float]:
        """(this process's, the sampler backend's) CPU in ms per second of capture."""
        capture = self.capture()
        before, started = own_cpu_s(), time.monotonic()
        capture.start()
        assert capture.conn is not None
        backend = str(capture.conn.info.backend_pid)
        backend_before = osstats.schedstat(Path("/proc"), backend)
        capture.pgbench_started(os.getpid())  # something to watch: ourselves
        time.sleep(seconds)
        backend_after = osstats.schedstat(Path("/proc"), backend)
        capture.stop()
        own, wall = own_cpu_s() - before, time.monotonic() - started
        assert backend_before is not None and backend_after is not None
        return own * 1000 / wall, (backend_after[0] - backend_before[0]) * 1000 / seconds

    def capture(self) -> Capture:
        return Capture(
            CaptureConfig(
                self.endpoint,
                log_path=self.server.log_path,
                postmaster_pid=postmaster_pid(self.server.data_dir),
                disk_device=device_of(self.server.data_dir),
                pgbench_threads=None,
                host_cpus=os.cpu_count(),
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workloads", default="select-only,tpcb-like")
    parser.add_argument("--output", type=Path, default=HERE / "telemetry_overhead.md")
    args = parser.parse_args()

    account = osuser.server_account()
    install = osuser.reachable_install(installs.resolve("embedded", installs.discover()), account)
    home = account.make_dir(Path(tempfile.mkdtemp(prefix="pgbl-bench-", dir="/var/tmp")), 0o755)
    server = ManagedServer("bench", install, home / "data", account, {"shared_buffers": "512MB"})
    server.prepare()
    binary = install.binary("pgbench")
    logs = Path(tempfile.mkdtemp(prefix="pgbl-bench-logs-"))
    results: dict[str, dict[str, list[Measured]]] = {}
    load = os.getloadavg()
    try:
        endpoint = dataset.ensure(server, 10, pgbench=binary, work_dir=logs, force=True).endpoint
        bench = Bench(binary, parse_version(command.version_of(binary)), server, endpoint, logs)
        cost = bench.sampler_cost()
        print(f"sampler: {cost[0]:.2f} ms/s in this process, {cost[1]:.2f} ms/s in its backend")
        for workload in args.workloads.split(","):
            results[workload] = run_workload(bench, workload, args)
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    write_markdown(args, cost, results, load, os.getloadavg())


def run_workload(
    bench: Bench, workload: str, args: argparse.Namespace
) -> dict[str, list[Measured]]:
    spec = spec_for(workload, args.clients, args.seconds)
    warmup_tps = bench.run(spec_for(workload, args.clients, 5), "off", None).tps
    per_mode: dict[str, list[Measured]] = {mode: [] for mode in MODES}
    for round_no in range(args.rounds):
        order = list(MODES) if round_no % 2 == 0 else list(reversed(MODES))
        for mode in order:
            dataset.vacuum(bench.endpoint, "pgbench")
            per_mode[mode].append(bench.run(spec, mode, warmup_tps))
        print(workload, round_no + 1, {m: round(v[-1].tps) for m, v in per_mode.items()})
    return per_mode


def write_markdown(
    args: argparse.Namespace,
    cost: tuple[float, float],
    results: dict[str, dict[str, list[Measured]]],
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> None:
    lines = [
        "# Telemetry overhead: a run with the full telemetry capture against one without",
        "",
        f"Latest result: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{describe_machine()}, "
        f"PostgreSQL 18 embedded, scale 10, {args.clients} clients, {args.rounds} interleaved "
        f"rounds of {args.seconds} s per configuration. Load average (1, 5, 15 min) before: "
        f"{', '.join(f'{x:.2f}' for x in load_before)}; after: "
        f"{', '.join(f'{x:.2f}' for x in load_after)}.",
        "",
        "Script: `bench/telemetry_overhead.py` (see its docstring for the configurations).",
        "Requirement: TPS with full telemetry ÷ without ≥ 0.99.",
        "",
        f"Sampler cost beside an idle server: {cost[0]:.2f} ms of CPU per second in this process "
        f"and {cost[1]:.2f} ms/s in its backend, {sum(cost) / 10:.2f} % of one CPU in all.",
        "",
        "| workload | config | mean TPS | ratio to off (95 % CI) | verdict | CPU µs/tx "
        "| CPU ratio | sampler CPU ms/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workload, per_mode in results.items():
        off = per_mode["off"]
        off_cpu = statistics.median(m.cpu_us_per_tx for m in off)
        for mode, values in per_mode.items():
            tps = [m.tps for m in values]
            cpu = statistics.median(m.cpu_us_per_tx for m in values)
            sampler = statistics.median(m.sampler_us_per_s for m in values) / 1000
            if mode == "off":
                ratio, verdict = "1", "-"
            else:
                cmp = comparison.compare([m.tps for m in off], tps, higher_is_better=True)
                low, high = cmp.ci_low, cmp.ci_high
                interval = (
                    "" if low is None or high is None else f" ({1 + low:.4f} – {1 + high:.4f})"
                )
                ratio = f"{1 + cmp.relative_change:.4f}{interval}"
                verdict = cmp.verdict.value
            lines.append(
                f"| {workload} | {mode} | {statistics.fmean(tps):,.0f} | {ratio} | {verdict} | "
                f"{cpu:.2f} | {cpu / off_cpu:.4f} | {sampler:.2f} |"
            )
    if max(load_before[0], load_after[0]) >= (os.cpu_count() or 1) / 2:
        lines += [
            "",
            "**Not the final figure**: this machine was busy with other work during the run (see",
            "the load average), so the TPS interval is wide. Take the final figure on a quiet",
            "machine: `.venv/bin/python bench/telemetry_overhead.py` (20 rounds of 5 s).",
        ]
    lines += [
        "",
        "CPU per transaction is the median over rounds of the CPU time of the server's processes",
        "(postmaster, backends and the sampler's backend, from /proc), pgbench (wait4) and this",
        "process (the sampler thread; in `off` rounds this process only waits for pgbench),",
        "divided by the transactions. Sampler CPU is this process's CPU per second of run.",
    ]
    args.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
