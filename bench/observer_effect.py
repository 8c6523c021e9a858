"""Observer effect: pgbench as pgbenchlab runs it, against bare pgbench with the same options.

Configurations, interleaved round by round on one managed server (PostgreSQL 18, embedded):
  bare       pgbench -n -c C -j J -M prepared -T D -b WORKLOAD       (what a user would type;
             pgbench then does not time transactions: its latency average is derived)
  bare-P1    the same with -P 1: pgbench times every transaction (latency measured)
  lab        the argv pgbenchlab builds: -P 1 and its per-transaction log with the sampling
             rate "auto" picks from the warmup TPS
  full-log   the same as lab with every transaction logged (for reference)

For each workload it reports TPS ratios against bare and against bare-P1 with a 95 % confidence
interval over the rounds (Welch on log TPS, see docs/statistics.md), and the client CPU per
transaction (pgbench's user + system time from wait4 ÷ transactions), which is far less noisy.

Usage: .venv/bin/python bench/observer_effect.py [--rounds 15] [--seconds 8] [--clients 4]
Writes bench/observer_effect.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pgbenchlab import comparison, dataset, installs, osuser, plan, runner
from pgbenchlab.pgbench import command
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.pgbench.version import PgVersion, parse_version
from pgbenchlab.server import ManagedServer
from pgbenchlab.telemetry.machine import describe_machine

HERE = Path(__file__).parent


def spec_for(workload: str, clients: int, seconds: int) -> plan.RunSpec:
    text = f"""
[defaults]
duration = "{seconds}s"
warmup = "2s"
[matrix]
scale = [10]
workload = ["{workload}"]
clients = [{clients}]
"""
    return plan.parse(text, "bench.toml", base=HERE).specs[0]


def run_once(
    binary: Path,
    version: PgVersion,
    spec: plan.RunSpec,
    env: dict[str, str],
    mode: str,
    logs: Path,
    warmup_tps: float | None = None,
) -> tuple[float, float]:
    """(TPS, client CPU µs per transaction) of one run in the given mode."""
    for old in logs.glob("pgbench_log.*"):
        old.unlink()
    sampling = 1.0 if mode == "full-log" else runner.sampling_rate(spec, warmup_tps)
    invocation = command.Invocation(
        spec.workload,
        spec.scale,
        spec.clients,
        spec.options,
        spec.options.duration_s,
        log_dir=None if mode.startswith("bare") else logs,
        sampling_rate=sampling or 1.0,
        progress=mode != "bare",
    )
    argv = command.build_argv(binary, version, invocation, env["PGDATABASE"])
    done = command.execute(argv, env, cwd=logs)
    report = parse_report(done.stdout)
    assert report.tps is not None
    return report.tps, done.cpu_s * 1e6 / report.transactions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()

    account = osuser.server_account()
    found = installs.discover()
    install = osuser.reachable_install(installs.resolve("embedded", found), account)
    home = account.make_dir(Path(tempfile.mkdtemp(prefix="pgbl-bench-", dir="/var/tmp")), 0o755)
    server = ManagedServer("bench", install, home / "data", account, {"shared_buffers": "512MB"})
    server.prepare()
    binary = install.binary("pgbench")
    version = parse_version(command.version_of(binary))
    logs = Path(tempfile.mkdtemp(prefix="pgbl-bench-logs-"))
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    try:
        endpoint = dataset.ensure(server, 10, pgbench=binary, work_dir=logs, force=True).endpoint
        env = endpoint.libpq_env()
        for workload in ("select-only", "tpcb-like"):
            spec = spec_for(workload, args.clients, args.seconds)
            warm = spec_for(workload, args.clients, 5)
            warmup_tps, _ = run_once(binary, version, warm, env, "bare", logs)
            per_mode: dict[str, list[tuple[float, float]]] = {
                mode: [] for mode in ("bare", "bare-P1", "lab", "full-log")
            }
            for round_no in range(args.rounds):
                order = list(per_mode)
                if round_no % 2:  # alternate who goes first
                    order.reverse()
                for mode in order:
                    dataset.vacuum(endpoint, "pgbench")
                    measured = run_once(binary, version, spec, env, mode, logs, warmup_tps)
                    per_mode[mode].append(measured)
                print(workload, round_no + 1, {m: round(v[-1][0]) for m, v in per_mode.items()})
            results[workload] = per_mode
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    write_markdown(args, results)


def ratio_text(baseline: list[float], values: list[float]) -> str:
    """Mean ratio with its 95 % interval over rounds (Welch on logs), and the verdict."""
    cmp = comparison.compare(baseline, values, higher_is_better=True)
    text = f"{1 + cmp.relative_change:.3f}"
    if cmp.ci_low is not None and cmp.ci_high is not None:
        text += f" ({1 + cmp.ci_low:.3f} – {1 + cmp.ci_high:.3f})"
    return f"{text} {cmp.verdict.value.replace('_', ' ')}"


def write_markdown(
    args: argparse.Namespace, results: dict[str, dict[str, list[tuple[float, float]]]]
) -> None:
    lines = [
        "# Observer effect: pgbenchlab's measurement against bare pgbench",
        "",
        f"Latest result: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{describe_machine()}, PostgreSQL 18 embedded, scale 10, {args.clients} clients, "
        f"{args.rounds} interleaved rounds of {args.seconds} s per configuration.",
        "",
        "Script: `bench/observer_effect.py` (see its docstring for the configurations).",
        "Requirement: TPS ratio ≥ 0.98 against bare pgbench with the same options.",
        "",
        "| workload | config | mean TPS | TPS ÷ bare (95 % CI) | TPS ÷ bare-P1 (95 % CI) "
        "| client CPU µs/tx | CPU ÷ bare | CPU ÷ bare-P1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workload, per_mode in results.items():
        tps = {mode: [t for t, _ in values] for mode, values in per_mode.items()}
        cpu = {mode: statistics.median(c for _, c in values) for mode, values in per_mode.items()}
        for mode in per_mode:
            lines.append(
                f"| {workload} | {mode} | {statistics.fmean(tps[mode]):,.0f} | "
                f"{ratio_text(tps['bare'], tps[mode])} | {ratio_text(tps['bare-P1'], tps[mode])} | "
                f"{cpu[mode]:.2f} | {cpu[mode] / cpu['bare']:.3f} | "
                f"{cpu[mode] / cpu['bare-P1']:.3f} |"
            )
    lines += [
        "",
        "Client CPU per transaction is the median over rounds of pgbench's own user + system CPU",
        "time (from wait4) divided by its transactions: on this noisy 2-core machine it resolves",
        "differences that TPS ratios over a few rounds cannot.",
    ]
    (HERE / "observer_effect.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
