"""A/A on real runs: two identical servers, every cell interleaved, compared cell by cell.

Both servers are the same installation with the same settings, so every "improved" or
"regressed" verdict is a false alarm. The requirement: fewer than 5 % of cells called changed at
the default settings (threshold 2 %, 95 % confidence).

Usage: .venv/bin/python bench/aa_real.py [--repeats 5] [--seconds 5]
Writes bench/aa_real.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from pgbenchlab import plan, runner
from pgbenchlab.report import compare
from pgbenchlab.store import Store
from pgbenchlab.telemetry.machine import describe_machine

HERE = Path(__file__).parent

PLAN = """
[campaign]
name = "aa"
repeats = {repeats}
order = "random"
seed = 7
[defaults]
duration = "{seconds}s"
warmup = "1s"
[[server]]
name = "a"
install = "embedded"
settings = {{ shared_buffers = "256MB" }}
[[server]]
name = "b"
install = "embedded"
settings = {{ shared_buffers = "256MB" }}
[matrix]
scale = [10]
workload = ["select-only", "tpcb-like"]
clients = [1, 2, 4, 8]
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    text = PLAN.format(repeats=args.repeats, seconds=args.seconds)
    the_plan = plan.parse(text, "aa.toml", base=HERE)
    results = Path(tempfile.mkdtemp(prefix="pgbl-aa-"))
    try:
        runner.run_campaign(the_plan, results, runner.NullReporter())
        with Store(results / runner.RESULTS_DB) as store:
            changes = compare.within_campaign(store, "aa", "a", "b", threshold=0.02)
    finally:
        runner.remove_clusters(results)
    verdicts = Counter(c.verdict for c in changes)
    called = verdicts["improved"] + verdicts["regressed"]
    lines = [
        "# A/A on real runs: identical servers compared cell by cell",
        "",
        f"Latest result: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{describe_machine()}. Two identical "
        f"embedded PostgreSQL 18 servers, scale 10, select-only and tpcb-like, clients 1/2/4/8, "
        f"{args.repeats} repeats of {args.seconds} s in random interleaved order. "
        "Script: `bench/aa_real.py`.",
        "",
        f"Comparisons (cells × metrics TPS, p50, p99): {len(changes)}; called changed: "
        f"{called} ({called / len(changes):.1%}). Requirement: < 5 %.",
        "",
        "| verdict | comparisons |",
        "|---|---|",
        *(f"| {v} | {verdicts[v]} |" for v in ("improved", "regressed", "within_noise",
                                              "not_enough_data")),
        "",
        "```",
        compare.as_text(changes, "a", "b"),
        "```",
    ]  # fmt: skip
    (HERE / "aa_real.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
