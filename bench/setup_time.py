"""Time the quick start spends setting up before its campaign, on a fresh machine.

    .venv/bin/python bench/setup_time.py [--rounds 8]

The figure of record is the command without options (about 5 minutes); --output elsewhere
for a smoke test. Each round clones the
repository's HEAD afresh and times `./lab --version` there: the virtual environment created
and every Python package `./lab quickstart` needs installed, then pgbenchlab started once.
Nothing is cached: each round has empty pip and uv caches (fresh PIP_CACHE_DIR, UV_CACHE_DIR,
XDG_CACHE_HOME) and no `uv` on PATH, as on a machine that never ran pgbenchlab; packages come
from the package index as a user's would. The Debian packages the quick start may install are
not part of it (a Debian machine of this kind has Python ≥ 3.11 with venv).

Decided before the run:
- Estimator: the median set-up time with the default installer (uv, which `lab` fetches with
  pip when it is not on PATH), with its distribution-free 95 % interval
  (`figure.median_interval`); pip's set-up (`LAB_INSTALLER=pip`, the fallback) beside it in
  the same rounds, as the time the installer saves.
- Design: pip runs in every other round, first in every other one of those.
- Rounds: 8 (the sign test's interval needs at least 6 for 95 %).
- Bar: set-up ≤ 15 s (the whole interval).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from figure import REPO, Bar, Provenance, median_interval, verdict_line, write_figure

HERE = Path(__file__).resolve().parent
SETUP = Bar("set-up ≤ 15 s", 15.0, at_most=True)


def path_without_uv() -> str:
    """PATH less every directory holding a `uv`, so `lab` must fetch its own."""
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(p for p in parts if not (Path(p) / "uv").exists())


def set_up(work: Path, installer: str) -> float:
    """Seconds `./lab --version` takes in a fresh clone with empty caches."""
    clone, caches = work / "clone", work / "caches"
    for old in (clone, caches):
        shutil.rmtree(old, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--local", str(REPO), str(clone)], check=True)
    env = {
        **os.environ,
        "PATH": path_without_uv(),
        "PIP_CACHE_DIR": str(caches / "pip"),
        "UV_CACHE_DIR": str(caches / "uv"),
        "XDG_CACHE_HOME": str(caches / "xdg"),
        "LAB_INSTALLER": installer,
    }
    started = time.perf_counter()
    subprocess.run([str(clone / "lab"), "--version"], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def markdown(provenance: Provenance, uv: list[float], pip: list[float]) -> str:
    middle, low, high = median_interval(uv)
    pip_middle = median_interval(pip)[0]
    rows = "\n".join(f"| {i + 1} | {s:.1f} s |" for i, s in enumerate(uv))
    return f"""# Set-up time of the quick start on a fresh machine

{chr(10).join(provenance.header())}
{verdict_line([(SETUP, SETUP.verdict(low, high))])}

Each round: a fresh clone of HEAD, empty pip and uv caches, no `uv` on PATH; the time of
`./lab --version` (virtual environment, every package the quick start needs, pgbenchlab
started once). All figures are from this run of `bench/setup_time.py` (its docstring gives
the estimator, design, rounds and bar decided before it ran).

- Default installer (uv, fetched by pip): median **{middle:.1f} s**, distribution-free 95 %
  interval {low:.1f} – {high:.1f} s over {len(uv)} rounds.
- pip alone (`LAB_INSTALLER=pip`, the fallback): median {pip_middle:.1f} s over {len(pip)}
  rounds ({", ".join(f"{s:.1f}" for s in pip)} s).

| round | default installer |
|---|---|
{rows}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--output", type=Path, default=HERE / "setup_time.md")
    args = parser.parse_args()
    provenance = Provenance.start()
    uv: list[float] = []
    pip: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pgbl-setup-") as tmp:
        work = Path(tmp)
        for round_no in range(args.rounds):
            # pip (the context, not the figure) in every other round, first in every other one
            order = ["uv"] if round_no % 2 else ["uv", "pip"] if round_no % 4 else ["pip", "uv"]
            for installer in order:
                seconds = set_up(work, installer)
                (uv if installer == "uv" else pip).append(seconds)
                print(f"round {round_no + 1} {installer}: {seconds:.1f} s", flush=True)
    text = markdown(provenance, uv, pip)
    write_figure(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
