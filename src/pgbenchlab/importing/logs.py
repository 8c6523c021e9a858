"""Which -l log files belong to which output, and what they give it: exact percentiles and a
per-second series, through the parsers the campaign uses.

A log belongs to an output when:

1. its prefix is the output's name without its extension, in the same directory (``--log-prefix
   c4-s10`` beside ``c4-s10.txt``: the shell loop names both after the run), and it is the only
   pgbench process with that prefix there; or else
2. the output is the only one in its directory and the directory holds the logs of exactly one
   pgbench process (``cd run-3 && pgbench -l ... > out.txt``).

A matched log is used only when it is that run's whole log: one file per thread the report
counts, and as many transactions as the report's "actually processed" (a sampled log, or the log
of another run with the same name, fails this). Every log not used is listed with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.importing.scan import LogProcess, Output, Tree
from pgbenchlab.pgbench.logs import TransactionLogSummary, analyse_transaction_logs
from pgbenchlab.pgbench.report import PgbenchReport

UNMATCHED = (
    "a -l log matched to no output: name it after its output (--log-prefix STEM beside "
    "STEM.txt) or keep one run per directory"
)


@dataclass(frozen=True)
class LogUse:
    """A matched log's analysis, or why it is not used."""

    process: LogProcess
    summary: TransactionLogSummary | None
    reason: str = ""


def match_logs(tree: Tree) -> dict[str, LogProcess]:
    """Each output's log process (by the output's path); the logs matched to none are marked
    unread in tree, with the reason."""
    matched: dict[str, LogProcess] = {}
    by_dir: dict[Path, list[Output]] = defaultdict(list)
    for output in tree.outputs:
        by_dir[output.file.path.parent].append(output)
    ambiguous: set[int] = set()
    for output in tree.outputs:
        named = [
            p
            for p in tree.processes
            if p.directory == output.file.path.parent and p.prefix == output.stem
        ]
        if len(named) == 1:
            matched[output.file.rel] = named[0]
        elif named:
            ambiguous.update(id(p) for p in named)
    claimed = {id(p) for p in matched.values()} | ambiguous
    for directory, outputs in by_dir.items():
        if len(outputs) != 1 or outputs[0].file.rel in matched:
            continue
        rest = [p for p in tree.processes if p.directory == directory and id(p) not in claimed]
        if len(rest) == 1 and len([p for p in tree.processes if p.directory == directory]) == 1:
            matched[outputs[0].file.rel] = rest[0]
            claimed.add(id(rest[0]))
    for process in tree.processes:
        if id(process) in ambiguous:
            _unread(tree, process, "logs of several pgbench processes are named after one output")
        elif id(process) not in claimed:
            _unread(tree, process, UNMATCHED)
    return matched


def _unread(tree: Tree, process: LogProcess, reason: str) -> None:
    for seen in process.files:
        tree.unread[seen.rel] = reason


def use_log(process: LogProcess, report: PgbenchReport) -> LogUse:
    """The log's analysis when it is the whole log of the run the report describes."""
    if len(process.files) != report.threads:
        return LogUse(
            process,
            None,
            f"{len(process.files)} thread file(s), the report {report.threads} thread(s): "
            "not this run's whole log",
        )
    fifteen_on = report.failed is not None  # 15+ prints the failures line: its log words
    try:
        summary = analyse_transaction_logs(
            [s.path for s in process.files],
            pg_major=15 if fifteen_on else 14,
            rate_limited=report.lag_avg_ms is not None,
            has_retries_column=fifteen_on and report.max_tries != 1,
        )
    except PgbenchParseError as exc:
        return LogUse(process, None, str(exc).split("\n", 1)[0])
    if summary.latency is None and report.transactions:
        return LogUse(process, None, "no per-transaction latency in it (an aggregate log?)")
    counted = summary.successful
    # "actually processed" counts skipped transactions too in 9.6 and 10
    if report.transactions not in (counted, counted + summary.skipped):
        return LogUse(
            process,
            None,
            f"{counted} transactions in the log, {report.transactions} in the report: a "
            "sampled log (--sampling-rate) or another run's",
        )
    return LogUse(process, summary)
