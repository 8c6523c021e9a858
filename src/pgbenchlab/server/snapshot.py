"""A managed cluster's data directory imaged once its datasets are built, and restored from
that image before each run (`[dataset] reset = "snapshot"`), so every repeat starts from the
same files.

A cluster has one image, holding every dataset made in it so far (taken again, from the
restored image, when a run needs a dataset the image lacks: the others stay as they were
built). It lies inside the data directory it copies (``pgbenchlab-snapshots``): on the same
file system, so a reflink copy serves where the file system makes them (btrfs, XFS), a
plain copy otherwise, and the run records which. Taking one stops the server cleanly (its
shutdown checkpoint leaves the files whole), copies every file PostgreSQL owns and records the
cluster's system identifier and latest checkpoint (pg_controldata) and the SHA-256 of every
relation file (``base/``, ``global/``); the record is written last, so an image cut short has
none and is taken again. Restoring one stops the server, puts the image's files back and checks
those three against the record before the server starts again: a difference fails the run,
naming what differs. pgbenchlab's own files in the data directory (its marker, the server log,
the records of its socket and pooler directories, callgrind's counts) stay as they are.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import PurePath

from pgbenchlab.errors import ServerError
from pgbenchlab.server.cluster_files import LOG_FILE, MARKER, POOLER_RECORD, SOCKET_RECORD
from pgbenchlab.server.counting import COUNT_DIR
from pgbenchlab.server.managed import ManagedServer
from pgbenchlab.server.settings import postgres_env

SNAPSHOTS = "pgbenchlab-snapshots"
FILES = "files"  # the image's copy of the data directory
RECORD = "image.json"
RELATION_DIRS = ("base", "global")
REFLINK, COPY = "reflink", "copy"
# pgbenchlab's own entries of a data directory: neither imaged nor restored
OWN = frozenset({MARKER, LOG_FILE, SOCKET_RECORD, POOLER_RECORD, COUNT_DIR, SNAPSHOTS})
SHOWN = 3  # differing files named in a mismatch's message


@dataclass(frozen=True)
class Image:
    """A data directory's image and what it was taken with."""

    directory: str
    copy: str  # how it was made: REFLINK or COPY
    system_identifier: str
    checkpoint: str  # pg_controldata's latest checkpoint location
    checksums: dict[str, str]  # relation file, relative to the data directory → SHA-256
    taken_at: float


def image_directory(server: ManagedServer) -> PurePath:
    return server.data_dir / SNAPSHOTS


def stored_image(server: ManagedServer) -> Image | None:
    """The cluster's image, when one was taken whole (its record written); where it lies now,
    should the data directory have moved since."""
    directory = image_directory(server)
    try:
        text = server.host.read_text(directory / RECORD)
    except OSError:
        return None
    return Image(**json.loads(text) | {"directory": str(directory)})


def take(server: ManagedServer) -> Image:
    """The data directory imaged with the server stopped (an earlier image replaced); the
    server started again."""
    directory = image_directory(server)
    host = server.host
    server.stop()
    try:
        if host.exists(directory):
            host.remove_tree(directory)
        for level in (directory, directory / FILES):  # the server account's, as its files
            host.mkdir(level, owner=server.account)
        made = _copy(server, server.data_dir, directory / FILES)
        control = _control(server, directory / FILES)
        image = Image(
            str(directory),
            made,
            control.get("Database system identifier", ""),
            control.get("Latest checkpoint location", ""),
            _checksums(server, directory / FILES),
            time.time(),
        )
        text = json.dumps(asdict(image), sort_keys=True)
        host.write_text(directory / RECORD, text, owner=server.account)
    finally:
        server.start()
    return image


def restore(server: ManagedServer, image: Image) -> str:
    """The data directory put back as image holds it and verified identical, then the server
    started again: how the files were copied (REFLINK or COPY). A difference is a
    `ServerError` naming it, raised once the server runs again."""
    host, data_dir = server.host, server.data_dir
    server.stop()
    try:
        before = _control(server, data_dir).get("Database system identifier", "")
        for name in host.list_dir(data_dir):
            if name not in OWN:
                host.remove_tree(data_dir / name)
        made = _copy(server, PurePath(image.directory) / FILES, data_dir, image.copy)
        after = _control(server, data_dir)
        problems = _differences(image, before, after, _checksums(server, data_dir))
    finally:
        server.start()
    if problems:
        taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(image.taken_at))
        raise ServerError(
            f"server {server.name}'s data directory restored from its snapshot differs from the "
            f"image taken {taken}: {'; '.join(problems)}; remove {image.directory} to take a "
            "new image"
        )
    return made


def _differences(
    image: Image, before: str, after: dict[str, str], checksums: dict[str, str]
) -> list[str]:
    found = []
    if before != image.system_identifier:
        found.append(
            f"the image is of another cluster (system identifier {image.system_identifier}, "
            f"this cluster's {before})"
        )
    if after.get("Database system identifier") != image.system_identifier:
        said = after.get("Database system identifier")
        found.append(f"system identifier {said} (image: {image.system_identifier})")
    if after.get("Latest checkpoint location") != image.checkpoint:
        said = after.get("Latest checkpoint location")
        found.append(f"latest checkpoint {said} (image: {image.checkpoint})")
    names = sorted(set(checksums) | set(image.checksums))
    differ = [n for n in names if checksums.get(n) != image.checksums.get(n)]
    if differ:
        more = f" and {len(differ) - SHOWN} more" if len(differ) > SHOWN else ""
        found.append(f"relation files differ: {', '.join(differ[:SHOWN])}{more}")
    return found


def _copy(server: ManagedServer, source: PurePath, target: PurePath, tried: str = REFLINK) -> str:
    """Every entry of source but pgbenchlab's own into target (as the server's account, so
    owners and modes stay): a reflink copy where the file system makes them, else a plain one
    (at once when `tried` says the image was one: its file system makes none)."""
    host = server.host
    entries = [source / n for n in sorted(host.list_dir(source)) if n not in OWN]
    ways: tuple[tuple[str, list[str]], ...] = ((REFLINK, ["--reflink=always"]), (COPY, []))
    reason = ""
    for how, options in ways if tried == REFLINK else ways[1:]:
        argv = ["cp", *options, "-a", "--", *(str(e) for e in entries), str(target)]
        done = host.run(argv, as_user=server.account)
        if done.returncode == 0:
            return how
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        for entry in entries:  # a reflink refused part way: start over with plain copies
            if host.exists(target / entry.name):
                host.remove_tree(target / entry.name)
    raise ServerError(f"copying {source} into {target} failed: {reason}")


def _control(server: ManagedServer, data_dir: PurePath) -> dict[str, str]:
    """pg_controldata's fields of the cluster files in data_dir."""
    program = server.install.binary("pg_controldata")
    if not server.host.exists(program):
        raise ServerError(
            f"installation {server.install.name} has no pg_controldata, which a snapshot "
            'reset needs to verify its images; use reset = "reuse" or "init" with it'
        )
    argv = [str(program), str(data_dir)]
    done = server.host.run(argv, env=postgres_env(server.install), as_user=server.account)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ServerError(
            f"pg_controldata of {server.install.name} could not read {data_dir}, which a "
            f'snapshot reset needs: {reason}; use reset = "reuse" or "init" with it'
        )
    fields = (line.partition(":") for line in done.stdout.splitlines())
    return {name.strip(): value.strip() for name, _, value in fields}


def _checksums(server: ManagedServer, data_dir: PurePath) -> dict[str, str]:
    """The SHA-256 of every relation file under data_dir, by its path there."""
    argv = ["find", *RELATION_DIRS, "-type", "f", "-exec", "sha256sum", "--", "{}", "+"]
    done = server.host.run(argv, cwd=data_dir, as_user=server.account)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ServerError(f"the relation files of {data_dir} could not be read: {reason}")
    pairs = (line.split(maxsplit=1) for line in done.stdout.splitlines() if line.strip())
    return {name: digest for digest, name in pairs}
