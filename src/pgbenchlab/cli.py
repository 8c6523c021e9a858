"""The command line: a thin layer over the library. Exit codes: 0 done, 1 some runs failed
(the campaign finished) or the results could no longer be written (the campaign stopped), 2 a
user mistake or an environment fault the user can fix (one line says what), 130 interrupted."""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from pgbenchlab import __version__, exporting, installs, jsontext, plan, report
from pgbenchlab.campaign import RESULTS_DB, Reporter, remove_clusters, run_campaign
from pgbenchlab.campaign.assemble import first_line
from pgbenchlab.errors import CampaignStopped, UserError
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.redaction import redact_setting
from pgbenchlab.report.views import compare
from pgbenchlab.report.views import compare_series as series
from pgbenchlab.results import FAILED, RunResult, RunStatus
from pgbenchlab.store import Store

DEFAULT_RESULTS = Path("pgbenchlab-results")
EXIT_OK, EXIT_RUNS_FAILED, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except UserError as exc:  # exit 2 before anything started; 1 once a campaign ran
        print(f"pgbenchlab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("pgbenchlab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into head, say: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps Python's exit flush quiet
        return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgbenchlab", description="PostgreSQL OLTP performance laboratory"
    )
    parser.add_argument("--version", action="version", version=f"pgbenchlab {__version__}")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    def results_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--results",
            type=Path,
            default=DEFAULT_RESULTS,
            metavar="DIR",
            help="results directory (database, raw outputs); default %(default)s",
        )

    p = command("installs", cmd_installs, "list the PostgreSQL installations found here")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    for name, handler, text in (
        ("run", cmd_run, "run every cell of a plan file and store the results"),
        ("quickstart", cmd_quickstart, "a small campaign on the embedded PostgreSQL, in minutes"),
    ):
        p = command(name, handler, text)
        if name == "run":
            p.add_argument("plan", type=Path, help="the plan file (TOML)")
        results_option(p)
        p.add_argument(
            "--dry-run",
            action="store_true",
            help="show the expanded matrix, its order and estimated time; run nothing",
        )
        p.add_argument(
            "--fresh",
            action="store_true",
            help="start the campaign anew instead of continuing it (keeps old results)",
        )
        p.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
        p.add_argument("--json", action="store_true", help="JSON lines of events on stdout")

    p = command("runs", cmd_runs, "list the runs of a campaign (the latest by default)")
    results_option(p)
    p.add_argument("--campaign", help="campaign name (default: the latest)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("show", cmd_show, "everything stored about one run")
    results_option(p)
    p.add_argument("run_id", type=int, help="the run's id (see `pgbenchlab runs`)")

    p = command("export", cmd_export, "export a campaign's runs as CSV, JSON or Parquet")
    results_option(p)
    p.add_argument("--campaign", help="campaign name (default: the latest)")
    p.add_argument("--format", choices=exporting.FORMATS, default="csv")
    p.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")

    p = command("report", cmd_report, "write a campaign's report: HTML, Markdown, chart images")
    results_option(p)
    p.add_argument("--campaign", help="campaign name (default: the latest)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="output file (HTML: default report.html beside the results database; "
        "Markdown: default standard output)",
    )
    p.add_argument("--format", choices=report.FORMATS, default="html")
    p.add_argument(
        "--images", type=Path, metavar="DIR", help="also write every chart as PNG and SVG"
    )
    p.add_argument(
        "--baseline", metavar="SERVER", help="the server others are compared with (default: first)"
    )

    p = command(
        "compare",
        cmd_compare,
        "compare two servers of a campaign (--baseline/--candidate) or two campaigns, "
        "cell by cell, with confidence intervals and verdicts; or find the steps along an "
        "ordered axis (--series)",
    )
    results_option(p)
    p.add_argument(
        "campaigns",
        nargs="*",
        metavar="CAMPAIGN",
        help="two campaigns to compare, or with --series campaign three or more, in order",
    )
    p.add_argument("--campaign", help="within this campaign (default: the latest)")
    p.add_argument("--baseline", metavar="SERVER")
    p.add_argument("--candidate", metavar="SERVER")
    p.add_argument(
        "--series",
        metavar="AXIS",
        help="find where TPS, p50 or p99 step along AXIS, in every cell of the other axes: "
        "server (servers in the order the plan lists them: list versions oldest first), a "
        "[matrix.setting] name (its values in plan order), scale, clients, rate, "
        "latency_limit or duration (numeric order); or `campaign` with the campaigns as "
        "arguments, in order (one per commit or nightly build)",
    )
    p.add_argument(
        "--threshold",
        default="2%",
        help="smallest change that matters, e.g. 3%% (default %(default)s)",
    )
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when any cell regressed (with --series: when any step is a regression)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("campaigns", cmd_campaigns, "list the campaigns in a results database")
    results_option(p)

    p = command("clean", cmd_clean, "stop and delete the PostgreSQL clusters campaigns created")
    results_option(p)
    return parser


# -- installs ------------------------------------------------------------------------------------


def cmd_installs(args: argparse.Namespace) -> int:
    found = installs.discover()
    if args.json:
        rows = [
            {
                "name": i.name,
                "source": i.source,
                "version": i.version.text,
                "bin_dir": str(i.bin_dir),
                "server": i.has_server,
                "pgbench": i.has_pgbench,
            }
            for i in found
        ]
        print(jsontext.dumps(rows, indent=2))
        return EXIT_OK
    table = [["name", "version", "server", "pgbench", "bin directory"]]
    for i in found:
        table.append(
            [i.name, i.version.text, yes(i.has_server), yes(i.has_pgbench), str(i.bin_dir)]
        )
    print_table(table)
    return EXIT_OK


def yes(flag: bool) -> str:
    return "yes" if flag else "-"


# -- run / quickstart ----------------------------------------------------------------------------


def quickstart_plan_path() -> Path:
    return Path(str(resources.files("pgbenchlab") / "plans" / "quickstart.toml"))


def cmd_quickstart(args: argparse.Namespace) -> int:
    args.plan = quickstart_plan_path()
    return cmd_run(args)


def cmd_run(args: argparse.Namespace) -> int:
    the_plan = plan.load(args.plan)
    if args.dry_run:
        if not args.quiet:
            print_plan_warnings(the_plan, sys.stderr)
        print_dry_run(the_plan)
        return EXIT_OK
    reporter = make_reporter(args)
    outcome = run_campaign(the_plan, args.results, reporter, fresh=args.fresh)
    database = outcome.results_dir / RESULTS_DB
    try:
        summarise(args, database, outcome.campaign_id, the_plan.name)
    except UserError as exc:
        raise CampaignStopped(
            f"{exc}; every run is stored: `pgbenchlab report` writes the report once fixed"
        ) from None
    if outcome.interrupted:
        print("pgbenchlab: interrupted; run the same command again to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_RUNS_FAILED if outcome.failed else EXIT_OK


def summarise(args: argparse.Namespace, database: Path, campaign: int, name: str) -> None:
    """The summary table and the HTML report of a campaign that ran."""
    with Store(database) as store:
        summary = report.summary_text(store, campaign)
    print(summary, file=sys.stdout if not args.json else sys.stderr)
    html = report.write_report(database, campaign=name)
    print(f"results: {database}\nreport: {html}", file=sys.stderr)


def print_plan_warnings(the_plan: plan.Plan, stream: TextIO) -> None:
    for warning in the_plan.warnings:
        print(f"pgbenchlab: warning: {warning}", file=stream)


def print_dry_run(the_plan: plan.Plan) -> None:
    table = [
        [
            "#",
            "server",
            "settings",
            "scale",
            "workload",
            "clients",
            "threads",
            "protocol",
            "duration",
            "warmup",
            "rate",
            "repeat",
        ]
    ]
    for spec in the_plan.specs:
        o = spec.options
        table.append(
            [
                str(spec.sequence + 1),
                spec.server,
                ",".join(f"{k}={redact_setting(k, v)}" for k, v in spec.server_settings) or "-",
                str(spec.scale),
                spec.workload.name,
                str(spec.clients),
                str(o.threads),
                o.protocol,
                f"{o.duration_s}s" if o.duration_s else f"-t {o.transactions}",
                f"{o.warmup_s}s",
                f"{o.rate:g}" if o.rate else "-",
                str(spec.repeat),
            ]
        )
    print_table(table)
    estimate = the_plan.estimated_seconds()
    print(
        f"\n{len(the_plan.specs)} runs, order {the_plan.order}, "
        f"estimated {format_duration(estimate)} (runs, warmups and ~1.5 s per run around them; "
        "plus initialising datasets)"
    )


class TerminalReporter:
    """Campaign and current-run progress on stderr; a live line on a terminal."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.live = stream.isatty()
        self.total = 0
        self.started = time.monotonic()
        self.expected = 0.0
        self.spent_expected = 0.0
        self.index = 0

    def campaign_started(self, the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> None:
        self.total = len(todo)
        self.expected = sum(run_seconds(s) for s in todo)
        resumed = f", {done} already done" if done else ""
        if not self.quiet:
            print_plan_warnings(the_plan, self.stream)
        self.say(f"campaign {the_plan.name}: {len(todo)} runs to do{resumed}")

    def run_started(self, spec: plan.RunSpec, index: int, total: int) -> None:
        self.index = index
        self.current = spec

    def prefix(self) -> str:
        elapsed = time.monotonic() - self.started
        remaining = max(0.0, self.expected - self.spent_expected)
        rate = elapsed / self.spent_expected if self.spent_expected else 1.0
        return f"[{self.index}/{self.total} ETA {format_duration(remaining * rate)}]"

    def phase(self, spec: plan.RunSpec, text: str) -> None:
        self.live_line(f"{self.prefix()} {spec.label}: {text}")

    def progress(self, spec: plan.RunSpec, line: ProgressLine) -> None:
        lat = f"{line.latency_avg_ms:.3f} ms" if line.latency_avg_ms is not None else "-"
        elapsed = f"{line.elapsed_s:.0f}s" if line.elapsed_s is not None else ""
        self.live_line(f"{self.prefix()} {spec.label}: {elapsed} {line.tps:,.0f} tps, lat {lat}")

    def run_finished(self, spec: plan.RunSpec, result: RunResult) -> None:
        self.spent_expected += run_seconds(spec)
        if result.status == FAILED or result.tps is None:
            text = f"{result.status.upper()}: {first_line(result.error)}"
        else:
            p99 = result.latency.percentiles_ms.get("99") if result.latency else None
            text = f"{result.tps:,.0f} tps" + (f", p99 {p99:.3f} ms" if p99 is not None else "")
            if result.diagnosis is not None and result.diagnosis.verdict != "unclear":
                text += f", {result.diagnosis.verdict.replace('_', ' ')}"
            if result.status != RunStatus.OK:
                text += f" ({result.status})"
        self.live_line("")
        self.say(f"{self.prefix()} {spec.label}: {text}")
        for warning in result.warnings:
            self.say(f"    warning: {warning.text}")

    def note(self, text: str) -> None:
        self.say(text)

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def live_line(self, text: str) -> None:
        if self.live and not self.quiet:
            width = 120
            print(
                f"\r{text[:width]:<{width}}",
                end="\r" if not text else "",
                file=self.stream,
                flush=True,
            )


class JsonReporter:
    """Events as JSON lines on stdout, for scripts."""

    def emit(self, event: str, **fields: Any) -> None:
        print(jsontext.dumps({"event": event, "time": time.time(), **fields}), flush=True)

    def campaign_started(self, the_plan: plan.Plan, todo: list[plan.RunSpec], done: int) -> None:
        self.emit(
            "campaign_started",
            campaign=the_plan.name,
            todo=len(todo),
            done=done,
            warnings=list(the_plan.warnings),
        )

    def run_started(self, spec: plan.RunSpec, index: int, total: int) -> None:
        self.emit("run_started", run=spec.run_key, index=index, total=total, cell=spec.cell)

    def phase(self, spec: plan.RunSpec, text: str) -> None:
        self.emit("phase", run=spec.run_key, phase=text)

    def progress(self, spec: plan.RunSpec, line: ProgressLine) -> None:
        self.emit(
            "progress",
            run=spec.run_key,
            elapsed_s=line.elapsed_s,
            tps=line.tps,
            latency_ms=line.latency_avg_ms,
        )

    def run_finished(self, spec: plan.RunSpec, result: RunResult) -> None:
        self.emit(
            "run_finished",
            run=spec.run_key,
            status=result.status,
            tps=result.tps,
            error=result.error,
            warnings=[w.text for w in result.warnings],
        )

    def note(self, text: str) -> None:
        self.emit("note", text=text)


def make_reporter(args: argparse.Namespace) -> Reporter:
    if args.json:
        return JsonReporter()
    return TerminalReporter(sys.stderr, args.quiet)


def run_seconds(spec: plan.RunSpec) -> float:
    return (spec.options.duration_s or 10) + spec.options.warmup_s + 1.5


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[list[str]], stream: TextIO = sys.stdout) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(),
            file=stream,
        )


# -- reading results -----------------------------------------------------------------------------


def open_store(results: Path) -> Store:
    path = results / RESULTS_DB
    if not path.is_file():
        raise UserError(f"no results database at {path}; run a campaign or give --results DIR")
    return Store(path)


def campaign_id(store: Store, name: str | None) -> int:
    row = store.campaign(name)
    if row is None:
        raise UserError(f"no campaign {name!r} in {store.path}" if name else "no campaign yet")
    return int(row["id"])


def cmd_campaigns(args: argparse.Namespace) -> int:
    with open_store(args.results) as store:
        table = [["id", "name", "status", "runs", "started", "description"]]
        for c in store.campaigns():
            started = time.strftime("%Y-%m-%d %H:%M", time.localtime(c["started_at"]))
            about = " ".join(str(c["description"]).split())  # one line per campaign
            table.append([str(c["id"]), c["name"], c["status"], str(c["runs"]), started, about])
        print_table(table)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    with open_store(args.results) as store:
        rows = exporting.run_rows(store, campaign_id(store, args.campaign))
        if args.json:
            print(jsontext.dumps(rows, indent=2))
            return EXIT_OK
        table = [
            [
                "id",
                "server",
                "scale",
                "workload",
                "clients",
                "repeat",
                "status",
                "tps",
                "lat avg ms",
                "p99 ms",
                "latency from",
            ]
        ]
        for r in rows:
            table.append(
                [
                    str(r["id"]),
                    r["server"],
                    str(r["scale"]),
                    r["workload"],
                    str(r["clients"]),
                    str(r["repeat"]),
                    r["status"],
                    fmt(r["tps"], ",.0f"),
                    fmt(r["latency_avg_ms"], ".3f"),
                    fmt(r["p99_ms"], ".3f"),
                    r["latency_source"] or "-",
                ]
            )
        print_table(table)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with open_store(args.results) as store:
        detail = exporting.run_detail(store, args.run_id)
    print(jsontext.dumps(detail, indent=2))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    written = report.write_report(
        args.results / RESULTS_DB,
        campaign=args.campaign,
        output=args.output,
        fmt=args.format,
        images_dir=args.images,
        baseline=args.baseline,
    )
    print(written, end="" if isinstance(written, str) else "\n")
    return EXIT_OK


def parse_threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise UserError(f"--threshold {text!r}: give a share such as 3% or 0.03")
    return value


def cmd_compare(args: argparse.Namespace) -> int:
    threshold = parse_threshold(args.threshold)
    if args.series:
        return compare_series(args, threshold)
    with open_store(args.results) as store:
        if args.campaigns:
            if len(args.campaigns) != 2 or args.baseline or args.candidate:
                raise UserError("compare CAMPAIGN_A CAMPAIGN_B, or --baseline and --candidate")
            baseline, candidate = args.campaigns
            changes = compare.across_campaigns(store, baseline, candidate, threshold)
        else:
            if not (args.baseline and args.candidate):
                raise UserError("give --baseline SERVER and --candidate SERVER, or two campaigns")
            baseline, candidate = args.baseline, args.candidate
            changes = compare.within_campaign(store, args.campaign, baseline, candidate, threshold)
    print(compare.as_json(changes) if args.json else compare.as_text(changes, baseline, candidate))
    if args.fail_on_regression and compare.regressed(changes):
        return EXIT_RUNS_FAILED
    return EXIT_OK


def compare_series(args: argparse.Namespace, threshold: float) -> int:
    if args.baseline or args.candidate:
        raise UserError("--series scans every value of an axis; drop --baseline/--candidate")
    with open_store(args.results) as store:
        if args.series == series.CAMPAIGN:
            if args.campaign:
                raise UserError("--series campaign takes the campaigns as arguments, in order")
            found = series.across_campaigns(store, args.campaigns, threshold)
        else:
            if args.campaigns:
                raise UserError(
                    f"--series {args.series} scans one campaign (--campaign NAME); "
                    "campaigns in order need --series campaign"
                )
            found = series.within_campaign(store, args.campaign, args.series, threshold)
    print(series.as_json(found) if args.json else series.as_text(found))
    return EXIT_RUNS_FAILED if args.fail_on_regression and series.regressed(found) else EXIT_OK


def cmd_clean(args: argparse.Namespace) -> int:
    removed = remove_clusters(args.results)
    for data_dir in removed:
        print(f"removed cluster {data_dir}")
    print(f"{len(removed)} clusters removed; the results database and raw outputs are kept")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    with open_store(args.results) as store:
        rows = exporting.run_rows(store, campaign_id(store, args.campaign))
    exporting.write(rows, args.format, args.output)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
