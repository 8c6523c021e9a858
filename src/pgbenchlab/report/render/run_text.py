"""One run for a person, on one screen: the run's line, pgbench's own report, the latency
percentiles and where they came from, what limited the run and its evidence, the top wait
events and the server events (checkpoints, autovacuum). `show --json` prints the data instead."""

from __future__ import annotations

import shlex
import time
from typing import Any

from pgbenchlab import builds, findings
from pgbenchlab.report.render.costs_text import cost_lines
from pgbenchlab.report.views.run import RunDetail

PERCENTILES = (("p50", "p50_ms"), ("p90", "p90_ms"), ("p95", "p95_ms"), ("p99", "p99_ms"))
MORE_PERCENTILES = (("p99.9", "p999_ms"), ("min", "min_ms"), ("max", "max_ms"))
SERVICE_PERCENTILES = (("p50", "service_p50_ms"), ("p99", "service_p99_ms"))
LAG_PERCENTILES = (("p50", "lag_p50_ms"), ("p99", "lag_p99_ms"), ("p99.9", "lag_p999_ms"))
INDENT = "  "


def as_text(view: RunDetail) -> str:
    d = view.detail
    sections = [
        run_lines(view.campaign, d),
        pgbench_lines(view),
        server_part_lines(d),
        generator_lines(d),
        latency_lines(d),
        cost_lines(d.get("costs"), d["transactions"], INDENT, d["client_cpu_us_per_tx"]),
        affinity_lines(d),
        diagnosis_lines(d),
        wait_lines(d),
        event_lines(d),
        gap_lines(d),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"


def run_lines(campaign: str, d: dict[str, Any]) -> list[str]:
    tuned = {**d["server_settings"], **d.get("sysctl", {})}  # kernel tunables as read back
    settings = " ".join(f"{k}={v}" for k, v in tuned.items())
    duration = f"{d['duration_s']} s" if d["duration_s"] else f"-t {d['transactions_per_client']}"
    each = " per server" if d.get("server_parts") else ""  # a group's run: the whole cell each
    cell = (
        f"{d['server']}{' ' + settings if settings else ''} · {d['workload']} · "
        f"scale {d['scale']} · {plural(d['clients'], 'client')}{each} · "
        f"{plural(d['threads'], 'thread')}{each} · {d['protocol']} · {duration}"
        f" (warmup {d['warmup_s']} s)"
    )
    if d["rate"]:
        cell += f" · rate {d['rate']:g}/s"
    cell += f" · {connection_text(d)}"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["started_at"]))
    lines = [
        f"run {d['id']} of campaign {campaign} (repeat {d['repeat']}, started {started})",
        cell,
        f"status {d['status']} · {tps_text(d)}",
    ]
    if d["error"]:
        lines.append(f"error: {d['error'].strip()}")
    lines += [f"warning: {w.text}" for w in findings.from_stored(d["warnings"])]
    if d["argv"]:
        lines.append(f"command: {shlex.join(d['argv'])}")
    if d.get("server_build"):
        lines += [f"{title}: {text}" for title, text in builds.describe(d["server_build"])]
    lines += [f"{title}: {text}" for title, text in d.get("server_setup", ())]
    if d.get("profile"):
        p = d["profile"]
        extra = " (auto's extra repeat, out of the statistics)" if p["profiled"] == "extra" else ""
        if p.get("counter"):
            lines.append(
                f"counted: {p['samples']:,} {p['counter']} beyond the one-transaction "
                f"reference; `pgbenchlab profile {d['id']}` for its top functions"
            )
        else:
            lines.append(
                f"profiled{extra}: {p['samples']:,} samples at {p['frequency_hz']} Hz, "
                f"{p['lost']:,} lost; `pgbenchlab profile {d['id']}` for its top functions"
            )
        if p.get("pgbench_samples") is not None:
            lines.append(
                f"pgbench profiled too: {p['pgbench_samples']:,} samples; "
                f"`pgbenchlab profile {d['id']} --process pgbench`"
            )
    return lines


def connection_text(d: dict[str, Any]) -> str:
    """How pgbench connected: the kind, -C, and over TLS what was negotiated."""
    kind = d.get("connection") or "socket"
    text = {"socket": "Unix socket", "tcp": "TCP", "tls": "TLS"}.get(kind, kind)
    if d["connect"]:
        text += ", a new connection per transaction (-C)"
    if d.get("tls_protocol"):
        text += f" ({d['tls_protocol']}, {d['tls_cipher']})"
    return text


def tps_text(d: dict[str, Any]) -> str:
    if d["tps"] is None:
        return "no TPS"
    text = f"{d['tps']:,.0f} tps"
    if d["warmup_tps"] is not None:
        text += f" (warmup {d['warmup_tps']:,.0f} tps)"
    took = [
        f"{name} {d[key]:.2f} s"
        for name, key in (("VACUUM", "vacuum_s"), ("CHECKPOINT", "checkpoint_s"))
        if d.get(key) is not None
    ]
    took = [*_reset_text(d.get("reset")), *took]
    if took:
        text += f"; before it {', '.join(took)}"
    if d.get("instructions_per_tx") is not None:
        text += (
            f"; {d['instructions_per_tx']:,.0f} instructions per transaction "
            f"(counted by {d['instructions_tool']}, connection setup excluded)"
        )
    return text


RESET_TEXTS = {
    "init": "the dataset made again by pgbench -i",
    "snapshot (reflink)": "the dataset restored from its snapshot (a reflink copy)",
    "snapshot (copy)": "the dataset restored from its snapshot (a plain copy)",
}


def _reset_text(reset: str | None) -> list[str]:
    """How the run's dataset started, unless as the runs before left it (the default)."""
    if reset is None or reset == "reuse":
        return []
    return [RESET_TEXTS.get(reset, f"the dataset: {reset}")]


def pgbench_lines(view: RunDetail) -> list[str]:
    if not view.pgbench_output.strip():
        return []
    title = (
        "pgbench's report, as pgbench printed it:"
        if view.output_kept
        else "pgbench's report, rebuilt from the stored fields (its raw output is not kept):"
    )
    return [title, *(INDENT + line for line in view.pgbench_output.rstrip().splitlines())]


def generator_lines(d: dict[str, Any]) -> list[str]:
    """A run split across load generators: each one's share and own figures."""
    rows = d.get("generators") or []
    lines = [f"load generators ({len(rows)}; TPS is their sum):"] if rows else []
    for g in rows:
        tps = "no report" if g["tps"] is None else f"{g['tps']:,.1f} TPS"
        latency = "" if g["latency_avg_ms"] is None else f", {g['latency_avg_ms']:.3f} ms"
        busy = "" if g["busy"] is None else f" ({g['busy']:.0%} of {g['cpus'] or '?'} CPU(s))"
        rate = f", rate {g['rate']:g}/s" if g["rate"] else ""
        lines.append(
            f"  {g['host']}: {plural(g['clients'], 'client')}, {plural(g['threads'], 'thread')}"
            f"{rate}, seed {g['seed']}, clock {g['clock_offset_s'] * 1000:+.2f} ms · {tps}"
            f"{latency} · CPU {g['cpu_s']:.2f} s{busy}"
        )
    return lines


def server_part_lines(d: dict[str, Any]) -> list[str]:
    """A group's run: each member server's part, the commits its server counted and what
    limited it."""
    rows = d.get("server_parts") or []
    lines = [f"servers driven together ({len(rows)}; TPS is their sum):"] if rows else []
    for p in rows:
        tps = "no report" if p["tps"] is None else f"{p['tps']:,.1f} TPS"
        counted = "" if p["transactions"] is None else f", {p['transactions']:,} transactions"
        failed = f", {p['failed']:,} failed" if p["failed"] else ""
        latency = "" if p["latency_avg_ms"] is None else f", {p['latency_avg_ms']:.3f} ms"
        commits = (
            ""
            if p["server_commits"] is None
            else f" · server committed {p['server_commits']:,}"
            f" ({p['commits_unexplained']:+,} unexplained)"
        )
        lines.append(
            f"  {p['server']}: {plural(p['clients'], 'client')} · {tps}{counted}{failed}"
            f"{latency}{commits}"
        )
        if p.get("verdict"):
            lines += verdict_lines({"verdict": p["verdict"], "evidence": p["evidence"]}, INDENT * 2)
        lines += [
            INDENT * 2 + line for line in cost_lines(p.get("costs"), p["transactions"], INDENT)
        ]
    return lines


def latency_lines(d: dict[str, Any]) -> list[str]:
    if d["p50_ms"] is None:
        return []
    samples = d["latency_samples"]
    counted = f", {samples:,} samples" if samples else ""
    lines = [
        f"latency percentiles (from the {d['latency_source'] or 'unknown source'}{counted}):",
        INDENT + ms_row(d, PERCENTILES),
        INDENT + ms_row(d, MORE_PERCENTILES),
    ]
    if d["service_p50_ms"] is not None:
        lines.append(
            INDENT + "service time (without schedule lag): " + ms_row(d, SERVICE_PERCENTILES)
        )
    if d["lag_p50_ms"] is not None:
        lines.append(INDENT + "schedule lag: " + ms_row(d, LAG_PERCENTILES))
    return lines


def ms_row(d: dict[str, Any], names: tuple[tuple[str, str], ...]) -> str:
    return "  ".join(f"{name} {d[key]:.3f} ms" for name, key in names if d[key] is not None)


def affinity_lines(d: dict[str, Any]) -> list[str]:
    found = d.get("cpu_affinity") or []
    if not found:
        return []
    lines = ["CPUs allowed (read back from /proc/PID/status during the run):"]
    lines += [INDENT + a["text"] for a in found]
    return lines


def diagnosis_lines(d: dict[str, Any]) -> list[str]:
    diagnosis = d["diagnosis"]
    if not diagnosis:
        return []
    return verdict_lines(diagnosis)


def verdict_lines(diagnosis: dict[str, Any], indent: str = "") -> list[str]:
    verdict = str(diagnosis["verdict"]).replace("_", " ")
    evidence = (f"{indent}{INDENT}- {e}" for e in diagnosis["evidence"])
    return [f"{indent}what limited it: {verdict}", *evidence]


def wait_lines(d: dict[str, Any]) -> list[str]:
    waits = d["wait_events"]
    if not waits:
        return []
    width = max(len(f"{w['type']}:{w['event']}") for w in waits)
    lines = ["top wait events (pg_stat_activity samples; average backends in each):"]
    for w in waits:
        name = f"{w['type']}:{w['event']}"
        average = w["average_backends"]
        share = f"  {average:.2f}" if average is not None else ""
        lines.append(f"{INDENT}{name:<{width}}  {w['samples']:>6} samples{share}")
    return lines


def event_lines(d: dict[str, Any]) -> list[str]:
    events = d["server_events"]
    if not events:
        return ["server events (checkpoints, autovacuum): none during the run"]
    lines = ["server events (from the server log; seconds into the run):"]
    lines += [f"{INDENT}{e['t']:7.1f} s  {e['kind']:<12} {e['detail']}" for e in events]
    return lines


def gap_lines(d: dict[str, Any]) -> list[str]:
    """The telemetry the run lacks, each with why (a major without the view, a setting off)."""
    gaps = d.get("telemetry_gaps") or []
    if not gaps:
        return []
    lines = ["telemetry not captured, or only in part:"]
    for gap in gaps:
        state = "partly" if gap["captured"] else "absent"
        lines.append(f"{INDENT}{gap['source']} ({state}): {gap['note'] or 'not captured'}")
    return lines


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
