"""Capture of tests/golden/perf/system-wide-connect.script (see README.md there).

    .venv/bin/python tests/golden/perf/capture_system_wide.py OUT.script

The embedded PostgreSQL 18 of bench/harness.py, perf recording every CPU as
`telemetry.profiler` does (at 99 Hz), a shell loop forking `date` beside it, and select-only
pgbench with -C (a new backend per transaction) for 1 s; prints the postmaster's pid.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

from harness import bench_server, spec_for  # noqa: E402
from pgbenchlab.invocation import command  # noqa: E402

RECORD = ["perf", "record", "-a", "-e", "cpu-clock", "-F", "99", "-g", "-N"]
SCRIPT = ["perf", "script", "-F", "comm,pid,tid,ip,sym,dso"]
SPIN = "end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do :; done"


def main(out: Path) -> None:
    data = Path(tempfile.mkdtemp(prefix="pgbl-perf-")) / "perf.data"
    with bench_server() as bench:
        record = [*RECORD, "-k", "CLOCK_MONOTONIC", "-o", str(data)]
        perf = subprocess.Popen(record, stderr=subprocess.DEVNULL)
        time.sleep(1)  # perf has opened its events
        spin = subprocess.Popen(["sh", "-c", SPIN])
        argv = [*bench.argv(spec_for("select-only", 2, 1), sampling=None, progress=False), "-C"]
        command.execute(argv, bench.endpoint.libpq_env(), cwd=bench.logs)
        spin.wait()
        perf.send_signal(signal.SIGINT)
        perf.wait()
        print("postmaster", bench.postmaster())
    script = [*SCRIPT, "-i", str(data), "--show-lost-events", "--show-task-events"]
    out.write_text(subprocess.run(script, capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
