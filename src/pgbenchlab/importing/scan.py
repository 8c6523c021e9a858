"""A directory tree of pgbench outputs, as shell loops leave it, sorted into what each file is.

Every regular file under the directory is read (its SHA-256 and size recorded) and becomes one
of: an *output* (a text file holding pgbench's report, alone or with its stderr: ``> out.txt
2>&1``), the *stderr* of an output (``STEM.err`` or ``STEM.stderr`` beside ``STEM[.EXT]``), a
*log* (``PREFIX.PID[.K][.zst]`` whose first line is a log line: one file per pgbench thread),
or *unread*, with the reason. Which output a log belongs to is decided by `match_logs`; nothing
is guessed from file contents beyond what pgbench printed.
"""

from __future__ import annotations

import hashlib
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pgbenchlab import files
from pgbenchlab.errors import PgbenchParseError, UserError
from pgbenchlab.pgbench.progress import parse_stderr
from pgbenchlab.pgbench.report import PgbenchReport, parse_report

MAX_OUTPUT_BYTES = 64 << 20  # a report with -P 1 lines over a day is far smaller
STDERR_SUFFIXES = (".err", ".stderr")
_LOG_NAME = re.compile(
    r"(?P<prefix>.+?)\.(?P<pid>[0-9]{1,10})(?:\.(?P<thread>[0-9]{1,4}))?(?:\.zst)?"
)
# A per-transaction line (6 to 8 fields, a word in the time column) or an aggregate one (6 to
# 15 numbers): never the first line of a report.
_LOG_LINE = re.compile(rb"[0-9]+(?: [0-9a-z]+){5,14}\r?\n?")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class Seen:
    """A file under the directory: its path there (POSIX), SHA-256 and size."""

    path: Path
    rel: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Output:
    """A file holding pgbench's report (with its -P lines when stderr went to it too)."""

    file: Seen
    text: str
    report: PgbenchReport
    stderr: Seen | None = None  # a STEM.err / STEM.stderr beside it
    stderr_text: str = ""

    @property
    def stderr_lines(self) -> str:
        """What pgbench wrote on stderr (-P lines, messages): the lines of the output its report
        does not hold (``2>&1``), then its stderr file."""
        return "\n".join((*self.report.unknown_lines, self.stderr_text))

    @property
    def stem(self) -> str:
        name = self.file.path.name
        return name.rsplit(".", 1)[0] if "." in name[1:] else name


@dataclass(frozen=True)
class LogProcess:
    """The -l files of one pgbench process: PREFIX.PID, PREFIX.PID.1, ... in thread order."""

    directory: Path
    prefix: str
    pid: int
    files: tuple[Seen, ...]


@dataclass
class Tree:
    """What the directory holds, sorted."""

    root: Path
    seen: list[Seen] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    processes: list[LogProcess] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)  # rel path → why


def scan(root: Path) -> Tree:
    """Every file under root, sorted into outputs, their stderr files, logs and unread ones."""
    if not root.is_dir():
        raise UserError(f"{root} is not a directory: give the directory of pgbench outputs")
    tree = Tree(root)
    logs: dict[tuple[Path, str, int], list[tuple[int, Seen]]] = {}
    others: dict[str, tuple[Seen, str]] = {}  # not reports: maybe stderr files
    for path in _files(root):
        seen = _seen(root, path)
        if seen is None:
            tree.unread[path.relative_to(root).as_posix()] = "not a regular file"
            continue
        tree.seen.append(seen)
        name = _LOG_NAME.fullmatch(path.name)
        if seen.size == 0:
            tree.unread[seen.rel] = "empty"
            others[seen.rel] = (seen, "")  # an empty STEM.err: a run that printed nothing there
        elif name and _looks_like_log(path):
            key = (path.parent, name["prefix"], int(name["pid"]))
            logs.setdefault(key, []).append((int(name["thread"] or 0), seen))
        else:
            _read_output(tree, seen, others)
    _attach_stderr(tree, others)
    tree.processes = [
        LogProcess(d, prefix, pid, tuple(s for _, s in sorted(found, key=lambda t: t[0])))
        for (d, prefix, pid), found in sorted(logs.items(), key=lambda kv: str(kv[0]))
    ]
    return tree


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if not path.is_dir():
            yield path


def _seen(root: Path, path: Path) -> Seen | None:
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with path.open("rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return None
    return Seen(path, path.relative_to(root).as_posix(), digest, path.stat().st_size)


def _looks_like_log(path: Path) -> bool:
    with path.open("rb") as file:
        head = file.read(256)
    if head.startswith(_ZSTD_MAGIC):
        return True
    return _LOG_LINE.match(head.split(b"\n", 1)[0] + b"\n") is not None


def _read_output(tree: Tree, seen: Seen, others: dict[str, tuple[Seen, str]]) -> None:
    try:
        text = files.read_text(seen.path, limit=MAX_OUTPUT_BYTES)
    except files.Unreadable as exc:
        tree.unread[seen.rel] = str(exc)
        return
    try:
        report = parse_report(text)
    except PgbenchParseError as exc:
        others[seen.rel] = (seen, text)
        tree.unread[seen.rel] = str(exc).split("\n", 1)[0]
        return
    tree.outputs.append(Output(seen, text, report))


def _attach_stderr(tree: Tree, others: dict[str, tuple[Seen, str]]) -> None:
    """An output's STEM.err or STEM.stderr (with -P lines or messages) becomes its stderr."""
    for index, output in enumerate(tree.outputs):
        base = output.file.path.parent / output.stem
        for suffix in STDERR_SUFFIXES:
            rel = Path(output.file.rel).with_name(base.name + suffix).as_posix()
            if rel in others and rel != output.file.rel:
                seen, text = others.pop(rel)
                if not _is_stderr(text):
                    continue
                tree.unread.pop(rel)
                tree.outputs[index] = Output(output.file, output.text, output.report, seen, text)
                break


def _is_stderr(text: str) -> bool:
    if not text.strip():
        return True
    found = parse_stderr(text)
    return bool(found.progress or found.messages or found.client_aborts) or "vacuum" in text
