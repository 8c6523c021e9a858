"""What every figure file (bench/NAME.md) says of itself, and how its verdict is reached.

A figure file opens with how, when and where it was made: the command, the UTC date and run
time, the machine, the commit measured and the digest of the code that measured it (the
script and the bench modules it imports), so `tests/test_bench_figures.py` can tell a figure
whose script changed since it ran. Its verdict line judges the interval the script's docstring
decided on before the run: "met" only when the whole interval is on the right side of the bar,
"not met" when the whole interval is on the wrong side, "not shown" otherwise. Rewriting a
figure file keeps the earlier runs' outcomes in its History section.

Its heavier imports (scipy, pgbenchlab's machine description) are made where they are used:
scripts whose children are the measurement (log analysis, peak memory included) import this
module at their top.
"""

from __future__ import annotations

import ast
import hashlib
import math
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
HISTORY = "## History"
VERDICTS = ("met", "not met", "not shown")


# -- the bar and the verdict ----------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """A figure's requirement: its estimate at most (or at least) ``limit``; ``text`` is how
    the README states it ("≤ 1.5 s")."""

    text: str
    limit: float
    at_most: bool

    def verdict(self, low: float, high: float) -> str:
        """Judged on the interval [low, high], never on the point estimate alone."""
        if self.at_most:
            good, bad = high <= self.limit, low > self.limit
        else:
            good, bad = low >= self.limit, high < self.limit
        return "met" if good else "not met" if bad else "not shown"


def median_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The median of ``values`` and the distribution-free interval between two of their order
    statistics (the sign test's, covering at least ``confidence``); (median, 0, inf) when there
    are too few values for one. It assumes nothing of the noise's shape: a run another tenant
    slowed moves it by one rank."""
    from scipy.stats import binom

    ordered = sorted(values)
    n = len(ordered)
    k = int(binom.ppf((1 - confidence) / 2, n, 0.5))  # P(fewer than k below) ≤ (1 - c) / 2
    if k < 1:
        return statistics.median(ordered), 0.0, math.inf
    return statistics.median(ordered), ordered[k - 1], ordered[n - k]


def verdict_line(judged: Sequence[tuple[Bar, str]]) -> str:
    """The figure file's verdict line: each bar with its word, in the README's order."""
    return "- Verdict: " + "; ".join(f"{bar.text}: {word}" for bar, word in judged)


# -- provenance ---------------------------------------------------------------------------------


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _from_repo(path: str) -> str:
    """``path`` relative to the repository root when it lies inside it: the command then reads
    the same on any checkout. The interpreter is not resolved (a virtualenv's python is a
    symlink to the system one, which would lose the virtualenv)."""
    absolute = Path(path).absolute()
    return str(absolute.relative_to(REPO)) if absolute.is_relative_to(REPO) else path


def command_line() -> str:
    """This process's command as typed from the repository root: interpreter, script, arguments
    verbatim."""
    return shlex.join([_from_repo(sys.executable), _from_repo(sys.argv[0]), *sys.argv[1:]])


def bench_imports(script: Path) -> set[Path]:
    """The bench modules ``script`` imports, directly or through each other, itself included."""
    seen: set[Path] = set()
    todo = [script.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            todo += [HERE / f"{n}.py" for n in names if (HERE / f"{n}.py").exists()]
    return seen


def script_digest(script: Path) -> str:
    """SHA-256 over the code that measured a figure: the script and the bench modules it
    imports (pgbenchlab itself is named by the commit)."""
    digest = hashlib.sha256()
    for path in sorted(bench_imports(script)):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def measured_commit() -> str:
    """The commit measured, and whether the source or bench code differed from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # the code only: the figure files a run writes (bench/*.md) are not what it measured
    changed = git("status", "--porcelain", "--", "src", "bench/*.py", "pyproject.toml", "lab")
    return f"{head} with uncommitted changes" if changed else head


@dataclass(frozen=True)
class Provenance:
    """The command, start date, machine, commit and code digest of one run of a benchmark
    script, and how long it ran: every bench/NAME.md opens with these lines."""

    command: str
    started: str
    clock: float  # time.monotonic() at the start
    commit: str
    digest: str

    @classmethod
    def start(cls) -> Provenance:
        script = Path(sys.argv[0])
        return cls(
            command_line(), utc_now(), time.monotonic(), measured_commit(), script_digest(script)
        )

    def elapsed_s(self) -> float:
        return time.monotonic() - self.clock

    def header(self) -> list[str]:
        """Markdown lines, one fact each (a list, so each renders on its own line)."""
        from pgbenchlab.telemetry.machine import describe_machine

        return [
            f"- Command: `{self.command}`",
            f"- Date: {self.started} (start); run time {duration_text(self.elapsed_s())}",
            f"- Machine: {describe_machine()}",
            f"- Commit: {self.commit}",
            f"- Script digest: {self.digest}",
        ]


def duration_text(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


# -- the figure file, with its history -----------------------------------------------------------


def _fact(text: str, name: str) -> str | None:
    prefix = f"- {name}: "
    found = (line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix))
    return next(found, None)


def _changes(path: Path) -> list[str]:
    """The commits that changed ``path``, newest first."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "log", "--format=%h", "--", str(path)],
        capture_output=True,
        text=True,
    )
    return done.stdout.split()


def history_entry(path: Path, earlier: str) -> str:
    """One line of History for the run an earlier figure file recorded, naming the commits
    that hold it whole (all of them for a file from before the figure rules, whose earlier
    runs were overwritten)."""
    date = _fact(earlier, "Date") or "undated"
    verdict = _fact(earlier, "Verdict")
    commit = _fact(earlier, "Commit") or "commit not recorded"
    kept = _changes(path)
    if verdict is None:
        verdict = "no verdict (measured before the figure rules)"
        where = f"; this and earlier runs' files: `git show C:bench/{path.name}` for C in " + (
            ", ".join(kept) if kept else "none"
        )
    else:
        where = f"; the whole file: `git show {kept[0]}:bench/{path.name}`" if kept else ""
    return f"- {date}, {commit}: {verdict}{where}"


def write_figure(path: Path, body: str) -> None:
    """Writes a figure file: ``body`` (its header, verdict line and results), then the History
    of every earlier run, the one this replaces first."""
    lines: list[str] = []
    if path.exists():
        earlier = path.read_text(encoding="utf-8")
        current, _, history = earlier.partition(f"\n{HISTORY}\n")
        lines = [history_entry(path, current), *history.strip().splitlines()]
    text = body.rstrip("\n") + "\n"
    if lines:
        text += f"\n{HISTORY}\n\nEarlier runs of this figure, newest first.\n\n"
        text += "\n".join(line for line in lines if line.startswith("- ")) + "\n"
    path.write_text(text, encoding="utf-8")
