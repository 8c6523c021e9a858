"""A patch series as it is posted: a directory of `git format-patch` files (v3-0001-….patch,
v3-0002-….patch …) or an mbox file holding several patches (inline in messages, or attached),
read into its patches in order; and the hunk a failed patch names.

An mbox's patches are its messages' parts that hold a diff, in the mbox's order; a cover
letter or a reply without a diff is left out. When every patch carries its number (a subject's
"[PATCH v3 2/3]", a file or attachment named "v3-0002-…"), the numbers give the order. A thread
holding several versions of the series (v1, v2, v3: a patch without one is v1) is its newest,
which must be whole (each of its patches numbered, from 1 to its last, "3/3"); numbering two
patches of it alike is refused: it cannot apply as one.
Reading only; the patches are applied by `compile.apply_patches`.
"""

from __future__ import annotations

import mailbox
import re
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.message import Message
from pathlib import Path

from pgbenchlab.errors import BuildError

# "v3-0002-Add-a-thing.patch", "0002-Add-a-thing.patch": a version, then the number.
_FILE_NUMBER = re.compile(r"^(?:v(\d+)-)?(\d{4})-.*\.(?:patch|diff)$", re.I)
_SUBJECT_NUMBER = re.compile(r"\[[^\]]*?\bPATCH\b[^\]]*?\b(\d+)/(\d+)\s*\]", re.I)
_SUBJECT_VERSION = re.compile(r"\[[^\]]*?\bPATCH\b[^\]]*?\bv(\d+)\b[^\]]*\]", re.I)
# A diff: git's header, or a unified diff's two file lines.
_DIFF = re.compile(rb"^(?:diff --git |--- \S.*\r?\n\+\+\+ \S)", re.M)
_PATCH_FAILED = re.compile(r"patch failed: (.+):(\d+)$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass(frozen=True)
class SeriesPatch:
    """One patch of a series: its name (the file's or attachment's, else the message's
    subject), its text as applied, and its number, version and the series' length as posted
    (None: not given)."""

    name: str
    text: bytes
    number: int | None = None
    version: int | None = None
    total: int | None = None


def read_series(path: Path) -> tuple[SeriesPatch, ...]:
    """The patches of a series, in order: a directory's numbered patch files, or an mbox's
    patches; BuildError naming what to fix when it holds none or cannot apply as one."""
    if path.is_dir():
        found = _directory(path)
    elif not path.is_file():
        raise BuildError(f"series {path}: no such file or directory")
    elif not _is_mbox(path):
        raise BuildError(
            f'series {path}: not an mbox (it does not begin with a "From " line); give an mbox '
            "of the series or a directory of its v1-0001-… files"
        )
    else:
        found = mbox_patches(path)
    if not found:
        raise BuildError(f"series {path}: no patch in it (no file or message holds a diff)")
    return _in_order(path, found)


def _directory(path: Path) -> tuple[SeriesPatch, ...]:
    """Its *.patch and *.diff files, each numbered as `git format-patch` names them; the cover
    letter (0000) left out."""
    found = []
    for file in sorted(path.iterdir()):
        if not file.is_file() or file.suffix.lower() not in (".patch", ".diff"):
            continue
        number = _FILE_NUMBER.match(file.name)
        if number is None:
            raise BuildError(
                f"series {path}: {file.name} has no number; name the files as git format-patch "
                "does (v3-0001-….patch, v3-0002-….patch …)"
            )
        if int(number[2]) == 0:
            continue
        version = int(number[1]) if number[1] else None
        found.append(SeriesPatch(file.name, file.read_bytes(), int(number[2]), version))
    return tuple(found)


def _is_mbox(path: Path) -> bool:
    with path.open("rb") as stream:
        return stream.read(5) == b"From "


def mbox_patches(path: Path) -> tuple[SeriesPatch, ...]:
    """Every part of the mbox's messages that holds a diff, in the mbox's order."""
    box = mailbox.mbox(path, create=False)
    try:
        return tuple(patch for message in box for patch in _message_patches(message))
    finally:
        box.close()


def _message_patches(message: Message) -> list[SeriesPatch]:
    subject = str(make_header(decode_header(message.get("Subject", "")))).strip()
    subject = re.sub(r"\s+", " ", subject)
    found = []
    for part in message.walk():
        if part.is_multipart():
            continue
        text = part.get_payload(decode=True)
        if not isinstance(text, bytes) or not _DIFF.search(text):
            continue
        filename = part.get_filename()
        if filename:
            number = _FILE_NUMBER.match(filename)
            found.append(
                SeriesPatch(
                    filename,
                    text,
                    int(number[2]) if number else None,
                    int(number[1]) if number and number[1] else None,
                )
            )
        else:
            numbered, version = _SUBJECT_NUMBER.search(subject), _SUBJECT_VERSION.search(subject)
            found.append(
                SeriesPatch(
                    subject or "(no subject)",
                    text,
                    int(numbered[1]) if numbered else None,
                    int(version[1]) if version else None,
                    int(numbered[2]) if numbered else None,
                )
            )
    return found


def _in_order(path: Path, found: tuple[SeriesPatch, ...]) -> tuple[SeriesPatch, ...]:
    """By their numbers when every patch has one (else as found), each number once; of several
    versions, the newest (`_newest`)."""
    found = _newest(path, found)
    if any(p.number is None for p in found):
        return found
    numbers = [p.number for p in found]
    twice = next((n for n in numbers if numbers.count(n) > 1), None)
    if twice is not None:
        alike = " and ".join(p.name for p in found if p.number == twice)
        raise BuildError(f"series {path}: two patches numbered {twice} ({alike}); keep one of them")
    return tuple(sorted(found, key=lambda p: p.number or 0))


def _newest(path: Path, found: tuple[SeriesPatch, ...]) -> tuple[SeriesPatch, ...]:
    """The patches of the newest version posted, when there are several (a thread's v1, v2,
    v3): that version whole, each of its patches numbered from 1 to its last."""
    versions = sorted({p.version or 1 for p in found})
    if len(versions) < 2:
        return found
    newest = versions[-1]
    chosen = tuple(p for p in found if (p.version or 1) == newest)
    numbers = {p.number for p in chosen}
    last = max([n or 0 for n in numbers] + [p.total or 0 for p in chosen])
    missing = sorted(set(range(1, last + 1)) - numbers)
    if None in numbers or missing:
        named = ", ".join(f"v{v}" for v in versions)
        lacks = "has an unnumbered patch" if None in numbers else (
            f"lacks patch {', '.join(map(str, missing))} of {last}"
        )  # fmt: skip
        raise BuildError(
            f"series {path}: holds versions {named}; its newest, v{newest}, {lacks}: give "
            f"every patch of v{newest}, or a directory of one version's files"
        )
    return chosen


def file_parts(path: Path) -> tuple[SeriesPatch, ...]:
    """The patches of a patch file that holds several (an mbox of a series), in order; none
    when the file is applied whole (a diff, or one `git format-patch` message)."""
    if not path.is_file() or not _is_mbox(path):
        return ()
    box = mailbox.mbox(path, create=False)
    try:
        messages = list(box)
    finally:
        box.close()
    if len(messages) == 1 and not messages[0].is_multipart():
        return ()
    return read_series(path)


def patch_count(path: Path) -> int:
    """How many patches a patch file applies (an mbox: its patches; otherwise one)."""
    return len(file_parts(path)) or 1


def failed_hunk(patch_text: str, git_error: str) -> str:
    """Which hunk git's "patch failed: FILE:LINE" is (LINE: the hunk's first line in the
    file), as " (hunk #N of FILE: @@ … @@)"; "" when the error names none or no hunk fits."""
    failed = _PATCH_FAILED.search(git_error)
    if failed is None:
        return ""
    name, line = failed[1], int(failed[2])
    old, current, index = "", "", 0
    left = [0, 0]  # lines of the hunk's old and new sides still to come
    for text in patch_text.splitlines():
        if left[0] > 0 or left[1] > 0:  # inside a hunk: "--- x" is a removed "-- x"
            sign = text[:1]
            left[0] -= sign in (" ", "-", "")
            left[1] -= sign in (" ", "+", "")
        elif text.startswith("--- "):
            old = _tree_path(text[4:])
        elif text.startswith("+++ "):
            new = _tree_path(text[4:])
            current, index = (old if new == "/dev/null" else new), 0
        elif header := _HUNK.match(text):
            index += 1
            if current == name and int(header[1]) == line:
                return f" (hunk #{index} of {name}: {header[0]})"
            left = [int(header[2] or 1), int(header[3] or 1)]
    return ""


def _tree_path(text: str) -> str:
    """A diff's file line as the tree names it (-p1: the a/ or b/ dropped; no timestamp)."""
    path = text.split("\t")[0].strip()
    return path if path == "/dev/null" else path.partition("/")[2]
