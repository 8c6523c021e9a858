"""Files the user names: plans and scripts read as bounded UTF-8 text from regular files only,
outputs (reports, exports, images) written whole or not at all. What can go wrong with them is
the user's to fix, and says so in one line."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from pgbenchlab.errors import UserError

MAX_TEXT_BYTES = 1 << 20  # plans and pgbench scripts are small; a larger file is a mistake

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


class Unreadable(Exception):
    """Why a text file cannot be used; the caller says which file it was for."""


def read_text(path: Path, *, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes. Devices, pipes and
    directories are refused before opening (reading /dev/zero would never end)."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise Unreadable(f"it is {kind}: give a text file")
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    if len(data) > limit:
        raise Unreadable(f"it is larger than {limit // 1024} KiB: give the right file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(
            f"it is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
            "save it as UTF-8"
        ) from None


@contextmanager
def output_errors(path: Path, what: str, fix: str) -> Iterator[None]:
    """OSErrors while writing an output as the one line that names the path and the fix."""
    try:
        yield
    except OSError as exc:
        raise UserError(f"cannot write {what} to {path}: {_reason(exc, path)}: {fix}") from None


def _reason(exc: OSError, path: Path) -> str:
    # mkdir(exist_ok=True) over a file raises FileExistsError: the file is the problem.
    text = "not a directory" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
    culprit = exc.filename
    return f"{culprit}: {text}" if culprit and str(culprit) != str(path) else text


def write_output(
    path: Path, data: bytes, what: str, fix: str, *, make_parents: bool = False
) -> None:
    """Write ``data`` whole or not at all: a reader never opens half a file, and a failed
    write leaves nothing behind."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with output_errors(path, what, fix):
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            temporary.write_bytes(data)
            temporary.replace(path)
        except OSError as exc:
            with suppress(OSError):
                temporary.unlink()
            if exc.filename == str(temporary):
                exc.filename = str(path)  # the user named path, not the temporary file
            raise


# Names that become directory names (campaigns, servers, clusters, artifacts): a first letter or
# digit keeps ".", ".." and hidden names out, and the rest keeps them one path component. The
# plan's rule for the names it gives, and the merge's for names read from another machine.
PLAIN_NAME = re.compile(r"\w[\w.-]*")


def is_plain_name(text: str) -> bool:
    return PLAIN_NAME.fullmatch(text) is not None


def file_name(text: str) -> str:
    """text as one file name: characters other than letters, digits and ._-=+, become "_" (a
    name made of stored text, a server's say, names no other directory)."""
    return re.sub(r"[^\w.=+,-]", "_", text)


def inside(root: Path, *parts: str) -> Path:
    """root/parts, refused when user text in parts would lead out of root (names are checked
    in the plan too; this holds for every path built from them)."""
    path = within(root, *parts)
    if path is None:
        raise UserError(f"{'/'.join(parts)!r} would lead out of {root}: use plain names")
    return path


def within(root: Path, *parts: str) -> Path | None:
    """root/parts, or None where they would lead out of root: a part that is not one plain path
    component ("", ".", "..", a "/" or a NUL in it), or a symbolic link on the way that points
    elsewhere. Every path built from stored text (a results database may come from another
    machine) goes through here."""
    if any(p in ("", ".", "..") or "/" in p or "\0" in p for p in parts):
        return None
    path = root.joinpath(*parts)
    return path if path.resolve().is_relative_to(root.resolve()) else None
