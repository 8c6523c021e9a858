"""Size and speed of the HTML report for a campaign of 1,000 runs.

    .venv/bin/python bench/report_size.py [--runs-per-cell 5] [--rounds 8] [--dir /tmp/x]

The figure of record is the command without options (a few minutes). The results are
synthetic: no PostgreSQL runs; the figure is the report's size and speed, not pgbench's.
Writes a synthetic results database through the real Store (5 servers x 2 scales x 2
workloads x 10 client counts x 5 repeats = 1,000 runs of 60 s: per-second series, stored
latency histograms of 20,000 transactions each, kept pgbench output, and telemetry shaped like
a real run's: every source its server version has, per second, wait events and server-log
events), then measures, in interleaved rounds: the time to write the report (a fresh process
each round, the Vega bundle already cached), its size, and the time Chromium takes from
navigation to every chart drawn (measured in the page; network disabled). The cold-cache
bundle build is measured once. Medians go to stdout and to bench/report_size.md, with the
command, date, machine, commit and verdict (bench/figure.py).

Decided before the run:
- Estimator: the median of the whole report command's wall time and of Chromium's time to
  every chart drawn, each with its distribution-free 95 % interval (`figure.median_interval`);
  the file's size is the same every round and judged as measured.
- Design: one synthetic database; rounds interleave the HTML report, the Markdown summary and
  the browser's drawing, each report written by a fresh process after one warm-up.
- Rounds: 8 (the sign test's interval needs at least 6 for 95 %).
- Bar: the report ≤ 5 MB; written ≤ 5 s; drawn ≤ 5 s (each on its whole interval).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from conftest_report import FakeServer, SyntheticPlan, run_count, write_synthetic  # noqa: E402
from figure import Bar, Provenance, median_interval, verdict_line, write_figure  # noqa: E402
from report_browser import chromium, open_report  # noqa: E402

DATA_BLOCK = r'<script type="application/json" id="report-data">(.*?)</script>'
SIZE = Bar("≤ 5 MB", 5_000_000, at_most=True)
WRITTEN = Bar("written ≤ 5 s", 5.0, at_most=True)
DRAWN = Bar("drawn ≤ 5 s", 5.0, at_most=True)
WRITE = (
    "import sys, time; from pathlib import Path; from pgbenchlab.report import write_report; "
    "t = time.perf_counter(); write_report(Path(sys.argv[1]), output=Path(sys.argv[2]), "
    "fmt=sys.argv[3]); print(time.perf_counter() - t)"
)


def thousand_runs(repeats: int) -> SyntheticPlan:
    servers = tuple(
        FakeServer(f"pg{v}", f"{v}.4", 1 + 0.03 * i, {"shared_buffers": f"{i + 1}GB"})
        for i, v in enumerate((14, 15, 16, 17, 18))
    )
    return SyntheticPlan(
        name="thousand",
        servers=servers,
        scales=(10, 100),
        workloads=("select-only", "tpcb-like"),
        clients=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        repeats=repeats,
        duration_s=60,
        telemetry=True,
    )


def write_time(
    db: Path, out: Path, fmt: str, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """(seconds in write_report, seconds for the whole process with Python's start)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", WRITE, str(db), str(out), fmt],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return float(done.stdout.strip()), time.perf_counter() - started


def cold_bundle_time(db: Path, out: Path) -> float:
    with tempfile.TemporaryDirectory() as cache:
        return write_time(db, out, "html", {**os.environ, "XDG_CACHE_HOME": cache})[1]


def measure(db: Path, work: Path, rounds: int) -> dict[str, list[float]]:
    html, md = work / "report.html", work / "report.md"
    results: dict[str, list[float]] = {"write": [], "process": [], "markdown": [], "render": []}
    write_time(db, html, "html")  # warm the bundle cache and the page cache
    for _ in range(rounds):
        call, whole = write_time(db, html, "html")
        results["write"].append(call)
        results["process"].append(whole)
        results["markdown"].append(write_time(db, md, "markdown")[1])
        if chromium():
            page = open_report(html)
            if page.console or page.render_ms is None:
                raise SystemExit(f"the report did not load cleanly: {page.console}")
            results["render"].append(page.render_ms / 1000)
    results["size"] = [float(html.stat().st_size)]
    results["charted"] = [float(telemetry_charted(html))]
    return results


def telemetry_charted(html: Path) -> int:
    """How many runs' telemetry charts the report embeds."""
    data = re.search(DATA_BLOCK, html.read_text(encoding="utf-8"), re.DOTALL)
    assert data is not None
    runs = json.loads(data.group(1))["detail"]["runs"]
    return sum(1 for run in runs.values() if "x" in run)


def report(
    provenance: Provenance, results: dict[str, list[float]], runs: int, cold: float, db_size: int
) -> str:
    def median(key: str) -> str:
        values = results[key]
        if not values:
            return "not measured (no chromium)"
        middle, low, high = median_interval(values)
        return f"{middle:.2f} s ({low:.2f} – {high:.2f})"

    def judged(bar: Bar, key: str) -> str:
        return bar.verdict(*median_interval(results[key])[1:]) if results[key] else "not shown"

    size = results["size"][0]
    verdicts = [
        (SIZE, SIZE.verdict(size, size)),
        (WRITTEN, judged(WRITTEN, "process")),
        (DRAWN, judged(DRAWN, "render")),
    ]
    return "\n".join(
        [
            "# HTML report: size and speed for 1,000 runs",
            "",
            *provenance.header(),
            verdict_line(verdicts),
            "",
            f"Load average at the end {os.getloadavg()[0]:.2f}; medians of "
            f"{len(results['write'])} interleaved rounds with their distribution-free 95 % "
            "intervals, all from this run of "
            "`bench/report_size.py`.",
            "",
            f"Synthetic campaign (no PostgreSQL ran): {runs} runs (5 servers x 2 scales x 2 "
            "workloads x 10 client counts x 5 repeats), 60 s each with a per-second series, a "
            "stored latency histogram (20,000 transactions), pgbench's kept output and "
            "telemetry (every source, per second, wait events, server-log events) per run; "
            "results database "
            f"{db_size / 1e6:.1f} MB.",
            "",
            "| measure | value | bar |",
            "|---|---:|---:|",
            f"| report file size | {size / 1e6:.2f} MB | ≤ 5 MB |",
            f"| write the HTML report: whole command | {median('process')} | ≤ 5 s |",
            f"| of which `write_report()` itself | {median('write')} | |",
            f"| Chromium: navigation to every chart drawn | {median('render')} | ≤ 5 s |",
            f"| write the Markdown summary: whole command | {median('markdown')} | |",
            f"| first report on a machine (builds the Vega bundle cache) | {cold:.2f} s | |",
            "",
            "Of the file, about 0.9 MB is the inlined Vega, "
            "Vega-Lite and vega-embed bundle; the rest is data: per-second series, histograms "
            "regrouped to 8 bins per power of two (exact sums), one row per run, and the "
            f"telemetry charts of {results['charted'][0]:.0f} runs (the report's budget of "
            "telemetry values).",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-per-cell", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    provenance = Provenance.start()
    work = args.dir or Path(tempfile.mkdtemp(prefix="pgbenchlab-report-bench-"))
    plan = thousand_runs(args.runs_per_cell)
    db = work / "results" / "results.db"
    if not db.exists():
        started = time.perf_counter()
        write_synthetic(work / "results", plan)
        print(f"wrote {db} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    cold = cold_bundle_time(db, work / "cold.html")
    results = measure(db, work, args.rounds)
    text = report(provenance, results, run_count(plan), cold, db.stat().st_size)
    print(text)
    write_figure(HERE / "report_size.md", text)


if __name__ == "__main__":
    main()
