"""`pgbenchlab import outputs`: a directory of pgbench outputs becomes one campaign.

Each output (a file holding pgbench's report) becomes one ok run (aborted when its stderr says
a client or the run aborted, or nothing succeeded), its figures read by `pgbench.report` exactly
as printed; latency percentiles and the per-second series from its -l log when one is matched
(`importing.logs`), else the series from its -P lines. Outputs of one cell are its repeats, in
path order. Every file read is recorded with its SHA-256; a file that gave nothing is listed
with the reason. Nothing is written before every output is read: a pattern that contradicts
a report stops the import with nothing stored.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from pgbenchlab import tomltext
from pgbenchlab.campaign.assemble import (
    latency_summary,
    log_series,
    report_figures,
    seconds_from_progress,
)
from pgbenchlab.errors import PgbenchParseError, UserError
from pgbenchlab.importing.axes import AxisMap, Unusable, cell_id, cell_of
from pgbenchlab.importing.logs import LogUse, match_logs, use_log
from pgbenchlab.importing.scan import Output, Tree, scan
from pgbenchlab.pgbench.progress import error_summary, parse_stderr
from pgbenchlab.records.cell import RunCell
from pgbenchlab.records.version import parse_version
from pgbenchlab.results import RunResult, RunStatus
from pgbenchlab.server import ServerFacts
from pgbenchlab.store import ImportedCampaign, ImportedFile, ImportedServer

KEPT_OUTPUT = "stdout.txt.zst"  # the output's text, kept as a run's stdout is (`show`)
UNKNOWN_VERSION = "unknown"


@dataclass(frozen=True)
class ImportedRun:
    output: Output
    cell: RunCell
    log: LogUse | None


@dataclass(frozen=True)
class Imported:
    """The campaign the outputs make, and each run's output text (kept as its stdout)."""

    campaign: ImportedCampaign
    texts: tuple[str, ...]


def read_outputs(root: Path, axis_map: AxisMap, name: str) -> Imported:
    """The campaign the directory's outputs make (nothing stored yet)."""
    tree = scan(root)
    if not tree.outputs:
        raise UserError(f"no pgbench report in any file under {root}: {_why_none(tree)}")
    logs = match_logs(tree)
    runs: list[ImportedRun] = []
    for output in tree.outputs:
        try:
            cell = cell_of(output.report, axis_map.groups(output.file.rel), output.file.rel)
        except Unusable as exc:
            tree.unread[output.file.rel] = str(exc)
            continue
        process = logs.get(output.file.rel)
        found = None if process is None else use_log(process, output.report)
        if found is not None and found.summary is None:
            for seen in found.process.files:
                tree.unread[seen.rel] = found.reason
        runs.append(ImportedRun(output, cell, found))
    if not runs:
        raise UserError(f"no output under {root} can be imported: {_why_none(tree)}")
    results = _results(runs)
    campaign = ImportedCampaign(
        name=name,
        source=str(root.resolve()),
        plan_text=_plan_text(root, axis_map),
        digest=_digest(tree, axis_map),
        description=f"imported from {root.resolve()}",
        pgbench_version=_single({r.pgbench_version for r in results}),
        servers=_servers(runs),
        runs=results,
        files=_files(tree, runs),
        started_at=min(r.started_at for r in results),
        finished_at=max(r.finished_at for r in results),
    )
    return Imported(campaign, tuple(r.output.text for r in runs))


def _why_none(tree: Tree) -> str:
    reasons = Counter(tree.unread.values())
    if not reasons:
        return "the directory holds no file"
    return "; ".join(f"{n} file(s): {why}" for why, n in reasons.most_common(3))


def _results(runs: list[ImportedRun]) -> tuple[RunResult, ...]:
    repeats: Counter[str] = Counter()
    found = []
    for sequence, run in enumerate(runs):
        identity = cell_id(run.cell)
        repeats[identity] += 1
        found.append(_result(run, sequence, identity, repeats[identity]))
    return tuple(found)


def _result(run: ImportedRun, sequence: int, identity: str, repeat: int) -> RunResult:
    report = run.output.report
    stderr = parse_stderr(run.output.stderr_lines)
    aborted = stderr.aborted or bool(stderr.client_aborts) or report.tps is None
    summary = run.log.summary if run.log else None
    started, finished = _times(run)
    return RunResult(
        run_key=f"{identity}-r{repeat}",
        cell_id=identity,
        sequence=sequence,
        repeat=repeat,
        status=RunStatus.ABORTED if aborted else RunStatus.OK,
        spec=run.cell,
        argv=(),
        started_at=started,
        finished_at=finished,
        pgbench_version=pgbench_version(report.client_version),
        error=_error(run.output.stderr_lines) if aborted else None,
        **report_figures(report),
        latency=None if summary is None else latency_summary(summary, 1.0),
        seconds=(log_series(summary, 1.0) if summary else ())
        or seconds_from_progress(stderr.progress),
        report=report,
        artifacts=(KEPT_OUTPUT,),
    )


def _error(stderr: str) -> str:
    """Why the run aborted, in pgbench's words; a report alone says only that none succeeded."""
    return error_summary(stderr) or "no transaction succeeded: pgbench's report has no tps line"


def pgbench_version(client: str | None) -> str:
    """As `pgbench -V` prints it, from the report's header (14+); older reports have none."""
    if client is None:
        return f"{UNKNOWN_VERSION} (a report without a version line: pgbench 13 or older)"
    return f"pgbench (PostgreSQL) {client}"


def _times(run: ImportedRun) -> tuple[float, float]:
    """From the log's completion times when there is one, else the output's modification
    time as the end (a duration before it with -T)."""
    summary = run.log.summary if run.log else None
    if summary is not None and summary.per_second:
        return float(summary.per_second[0].start_s), float(summary.per_second[-1].start_s + 1)
    end = run.output.file.path.stat().st_mtime
    return end - (run.output.report.duration_s or 0), end


def _servers(runs: list[ImportedRun]) -> tuple[ImportedServer, ...]:
    versions: dict[tuple[str, tuple[tuple[str, str], ...]], set[str]] = defaultdict(set)
    for run in runs:
        report = run.output.report
        version = report.server_version or report.client_version or UNKNOWN_VERSION
        versions[(run.cell.server, run.cell.server_settings)].add(version)
    found = []
    for (name, variant), seen in sorted(versions.items()):
        version = _single(seen) or UNKNOWN_VERSION
        facts = ServerFacts(
            name=name,
            kind="imported",
            version=version,
            version_num=version_num(version),
            settings=dict(variant),
            requested=dict(variant),
            install=None,
            data_dir=None,
        )
        found.append(ImportedServer(facts, variant))
    return tuple(found)


def version_num(text: str) -> int:
    """server_version_num of a version text; 0 where none was printed."""
    try:
        return parse_version(text).num
    except PgbenchParseError:
        return 0  # not printed: the reports of 13 and older name no version


def _single(values: set[str]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None


def _files(tree: Tree, runs: list[ImportedRun]) -> tuple[ImportedFile, ...]:
    role: dict[str, tuple[str, int | None, str]] = {}
    for index, run in enumerate(runs):
        output = run.output
        role[output.file.rel] = ("output", index, "")
        if output.stderr is not None:
            role[output.stderr.rel] = ("stderr", index, f"stderr of {output.file.rel}")
        if run.log is not None and run.log.summary is not None:
            for seen in run.log.process.files:
                role[seen.rel] = ("log", index, f"-l log of {output.file.rel}")
    for rel, why in tree.unread.items():
        role[rel] = ("unread", None, why)
    return tuple(
        ImportedFile(s.rel, s.sha256, s.size, *role[s.rel]) for s in tree.seen if s.rel in role
    ) + tuple(ImportedFile(rel, "", 0, "unread", None, why) for rel, why in _unseen(tree))


def _unseen(tree: Tree) -> list[tuple[str, str]]:
    """Unread paths that could not even be opened (no digest)."""
    seen = {s.rel for s in tree.seen}
    return sorted((rel, why) for rel, why in tree.unread.items() if rel not in seen)


def _digest(tree: Tree, axis_map: AxisMap) -> str:
    """Of every file's digest and the pattern: the same import again has the same one."""
    identity = json.dumps([sorted((s.rel, s.sha256) for s in tree.seen), axis_map.text])
    return "import:" + hashlib.sha256(identity.encode()).hexdigest()


def _plan_text(root: Path, axis_map: AxisMap) -> str:
    data: dict[str, tomltext.Value] = {"kind": "outputs", "source": str(root.resolve())}
    if axis_map.text is not None:
        data["map"] = axis_map.text
    return "# imported by `pgbenchlab import outputs`: not a plan to run\n" + tomltext.document(
        {"import": data}
    )
