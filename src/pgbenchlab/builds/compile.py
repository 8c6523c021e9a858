"""The steps that turn an unpacked tree into an installation: patches, then configure, make and
make install, or meson setup, ninja and meson install (server, pgbench, pg_stat_statements),
every line of output in the build's log."""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from pgbenchlab.builds import series
from pgbenchlab.builds.recipe import PatchFile, pgbench_dir
from pgbenchlab.errors import BuildError
from pgbenchlab.hosts import LOCAL_HOST, Host

Progress = Callable[[str, float], None]  # (phase, seconds since the build started)
TAIL_LINES = 12
STATEMENTS_DIR = "contrib/pg_stat_statements"
MESON_DIR = "build-meson"  # meson's build directory, inside the unpacked tree
_MESON_UNKNOWN = re.compile(r"ERROR: Unknown options?: (.+)|error: unrecognized arguments: (.+)")


class StepFailed(Exception):
    """A command of the build exited non-zero; its last lines are kept."""

    def __init__(self, what: str, tail: list[str], first_error: str | None = None) -> None:
        self.what = what
        self.tail = tail
        self.first_error = first_error  # the compiler's first "error:" line, when it said one
        super().__init__(what)


class BuildLog:
    """The build's log file, and the commands run with their output streamed into it."""

    def __init__(self, path: Path, progress: Progress | None, host: Host = LOCAL_HOST) -> None:
        self.path = path
        self.host = host
        self.progress = progress
        self.started = time.monotonic()
        self._told = 0.0
        self._stream: TextIO = path.open("w", encoding="utf-8", errors="replace")
        self.phase = ""

    def close(self) -> None:
        self._stream.close()

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.write(f"==> {phase}")
        self._tell(force=True)

    def write(self, line: str) -> None:
        self._stream.write(line + "\n")

    def _tell(self, *, force: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        if self.progress and (force or elapsed - self._told >= 10):
            self._told = elapsed
            self.progress(self.phase, elapsed)

    def run(self, argv: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> str:
        """Run argv in cwd; its output goes to the log. StepFailed when it exits non-zero."""
        self.write("$ " + " ".join(argv))
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        lines: list[str] = []

        def take(line: str) -> None:
            self.write(line)
            tail.append(line)
            lines.append(line)
            self._tell()

        environment = {**os.environ, "LC_ALL": "C", **(env or {})}
        process = self.host.start(
            argv, env=environment, cwd=cwd, on_stdout_line=take, on_stderr_line=take,
            new_session=True,
        )  # fmt: skip
        try:
            status = process.wait()
        except BaseException:  # interrupted: end make and every compiler it started
            process.kill()  # its whole process group (its own session)
            process.wait()
            raise
        self._stream.flush()
        if status.returncode != 0:
            first_error = next((line.strip() for line in lines if "error:" in line), None)
            raise StepFailed(what, list(tail), first_error)
        return "\n".join(lines)


def apply_patches(tree: Path, patches: tuple[PatchFile, ...], log: BuildLog) -> None:
    """Apply the patches in order (git apply semantics, patch -p1 for what git refuses);
    BuildError naming the patch (its place in a series of several), the file and the hunk
    that do not apply."""
    if patches:
        log.enter("patch")
    # git apply must not take a repository above the tree for the tree's root.
    env = {"GIT_CEILING_DIRECTORIES": str(tree.parent)}
    with tempfile.TemporaryDirectory(prefix="pgbenchlab-patch-") as scratch:
        for index, patch in enumerate(patches, start=1):
            path = patch.path
            if patch.content is not None:  # one patch of a file holding several
                path = str(Path(scratch) / f"{index:04d}.patch")
                Path(path).write_bytes(patch.content)
            try:
                log.run(["git", "apply", "--check", "-p1", path], tree, "git apply", env)
                log.run(["git", "apply", "-p1", path], tree, "git apply", env)
                continue
            except StepFailed as refused:
                git_says = _first_error(refused.tail)
            try:
                log.run(["patch", "-p1", "-f", "-s", "--dry-run", "-i", path], tree, "patch")
            except StepFailed:
                text = Path(path).read_text(errors="replace")
                raise BuildError(
                    f"patch {_which(patch, index, len(patches))} does not apply: {git_says}"
                    + series.failed_hunk(text, git_says)
                ) from None
            log.run(["patch", "-p1", "-f", "-s", "-i", path], tree, "patch")


def _which(patch: PatchFile, index: int, count: int) -> str:
    """The patch as a person finds it: its name (quoted when it has spaces, a subject say),
    and in a series of several its place, and the file holding it when that holds several."""
    name = f'"{patch.name}"' if " " in patch.name else patch.name
    if count == 1:
        return name
    held = f" in {Path(patch.path).name}" if patch.content is not None else ""
    return f"{name} ({index} of {count}{held})"


def _first_error(lines: list[str]) -> str:
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error:")]
    return (errors or lines or ["no output"])[0]


def configure(
    tree: Path, prefix: Path, compiler: str, options: tuple[str, ...], log: BuildLog
) -> None:
    """./configure with the options; an option configure rejects or ignores is refused."""
    log.enter("configure")
    argv = ["./configure", f"--prefix={prefix}", f"CC={compiler}", *options]
    try:
        output = log.run(argv, tree, "configure")
    except StepFailed as failed:
        errors = [line for line in failed.tail if "error:" in line]
        reason = (errors or failed.tail or ["no output"])[-1].strip()
        raise BuildError(f"configure failed: {reason} (log: {log.path})") from None
    unknown = re.search(r"unrecognized options: (.+)", output)
    if unknown:
        raise BuildError(f"configure does not know the option(s) {unknown[1].strip()}")


def make_and_install(tree: Path, version: str, staging: Path, jobs: int, log: BuildLog) -> None:
    """Build the server, pgbench and pg_stat_statements, and install them under staging
    (DESTDIR: the installation's final prefix is inside it)."""
    extra = [STATEMENTS_DIR]
    if pgbench_dir(version).startswith("contrib/"):
        extra.append(pgbench_dir(version))
    log.enter("make")
    try:
        log.run(["make", f"-j{jobs}"], tree, "make")
        for directory in extra:
            log.run(["make", f"-j{jobs}", "-C", directory], tree, f"make -C {directory}")
        log.enter("install")
        destdir = f"DESTDIR={staging}"
        log.run(["make", "install", destdir], tree, "make install")
        for directory in extra:
            log.run(["make", "-C", directory, "install", destdir], tree, "make install")
    except StepFailed as failed:
        tail = "\n".join(f"  {line}" for line in failed.tail)
        first = f": {failed.first_error}" if failed.first_error else ""
        raise BuildError(
            f"{failed.what} failed{first}; its last lines:\n{tail}\nlog: {log.path}"
        ) from None


def meson_setup(
    tree: Path, prefix: Path, compiler: str, options: tuple[str, ...], log: BuildLog
) -> None:
    """meson setup with the options: "-Dname=value" and meson's "--" options go to meson,
    "NAME=value" (CFLAGS=…) into its environment; an option meson does not know is refused."""
    log.enter("configure")
    if not (tree / "meson.build").is_file():
        raise BuildError(
            'build_system = "meson" needs a tree with meson.build (PostgreSQL 16 or later)'
        )
    arguments = [o for o in options if o.startswith("-")]
    env = dict(o.split("=", 1) for o in options if not o.startswith("-") and "=" in o)
    argv = ["meson", "setup", MESON_DIR, f"--prefix={prefix}", "--libdir=lib", *arguments]
    try:
        log.run(argv, tree, "meson setup", {**env, "CC": compiler})
    except StepFailed as failed:
        for line in failed.tail:
            if found := _MESON_UNKNOWN.search(line):
                unknown = (found[1] or found[2]).strip()
                raise BuildError(f"meson does not know the option(s) {unknown}") from None
        errors = [line for line in failed.tail if "ERROR:" in line or "error:" in line]
        reason = (errors or failed.tail or ["no output"])[-1].strip()
        raise BuildError(f"meson setup failed: {reason} (log: {log.path})") from None


def ninja_and_install(tree: Path, staging: Path, jobs: int, log: BuildLog) -> None:
    """Build everything meson builds by default (server, programs, contrib) and install it
    under staging (DESTDIR, as for make)."""
    log.enter("make")
    try:
        log.run(["ninja", "-C", MESON_DIR, f"-j{jobs}"], tree, "ninja")
        log.enter("install")
        install = ["meson", "install", "-C", MESON_DIR, "--no-rebuild", "--quiet"]
        log.run(install, tree, "meson install", {"DESTDIR": str(staging)})
    except StepFailed as failed:
        tail = "\n".join(f"  {line}" for line in failed.tail)
        raise BuildError(
            f"{failed.what} failed; its last lines:\n{tail}\nlog: {log.path}"
        ) from None
