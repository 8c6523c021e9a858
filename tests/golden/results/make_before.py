"""Write before-redesign.db: the results of the tiny campaign in tiny.toml, as the code of the
commit it runs on stores them (run as root from the repository: .venv/bin/python
tests/golden/results/make_before.py). tests/test_store_before_after.py migrates a copy and
compares it with what the current code writes for the same plan."""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from pgbenchlab import plan, runner

HERE = Path(__file__).resolve().parent
PLAN = HERE / "tiny.toml"
OUTPUT = HERE / "before-redesign.db"


class Quiet:
    """A reporter that prints only notes."""

    def campaign_started(self, *args: object) -> None: ...
    def run_started(self, *args: object) -> None: ...
    def phase(self, *args: object) -> None: ...
    def progress(self, *args: object) -> None: ...
    def sampled(self, *args: object) -> None: ...
    def run_finished(self, *args: object) -> None: ...

    def note(self, text: str) -> None:
        print(text, file=sys.stderr)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="pgbl-before-", dir="/var/tmp") as base:
        results = Path(base) / "results"
        the_plan = plan.load(PLAN)
        try:
            outcome = runner.run_campaign(the_plan, results, Quiet())  # type: ignore[arg-type]
        finally:
            runner.remove_clusters(results)
        if outcome.failed or outcome.ran != len(the_plan.specs):
            raise SystemExit(f"the campaign did not finish every run: {outcome}")
        OUTPUT.unlink(missing_ok=True)
        db = sqlite3.connect(results / runner.RESULTS_DB)
        try:
            db.execute("VACUUM INTO ?", (str(OUTPUT),))
        finally:
            db.close()
    print(f"{OUTPUT}: {OUTPUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
