"""A build or prebuilt binaries on a `[[host]]`: the cached installation copied there once.

The installation made (or downloaded) on this machine is packed, sent over SFTP and unpacked
under pgbenchlab's state directory there, in a directory named by its cache key (the same
build, the same key: a second campaign finds it there and sends nothing). A copy is complete
only once renamed into place, with the key's provenance beside it; an interrupted copy leaves a
`.partial` directory that the next copy of that key replaces. PostgreSQL finds its libraries
and share/ relative to its programs, so the copy runs where it lands (the host needs the system
libraries the build links, as any copy of PostgreSQL does).
"""

from __future__ import annotations

import tarfile
import tempfile
import time
from dataclasses import replace
from pathlib import Path, PurePath

from pgbenchlab.builds import cache
from pgbenchlab.errors import InstallError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.hosts.host import LockedFile
from pgbenchlab.installs import Installation, inspect_bin_dir

SHIPPED_DIR = "installs"  # under the host's state directory
LOCK_WAIT_S = 600.0  # another campaign sending the same installation: wait for it


def shipped(install: Installation, host: Host) -> Installation:
    """The installation on host (as is on this machine): its copy there, sent when missing."""
    if host is LOCAL_HOST:
        return install
    prefix = install.bin_dir.parent
    facts = cache.read_provenance(prefix)
    if facts is None:
        raise InstallError(f"{install.name}: {prefix} has no provenance; build it again")
    key = str(facts["key"])
    state = host.state_dir()
    assert state is not None, "a [[host]] is another machine"
    target = state / SHIPPED_DIR / key
    if not host.exists(target / "bin"):
        host.mkdir(target.parent)
        lock = _locked(host, target.parent / f"{key}.lock")
        try:
            if not host.exists(target / "bin"):
                _send(prefix, host, target)
        finally:
            lock.release()
    found = inspect_bin_dir(Path(target / "bin"), install.source, host)
    if found is None or not found.has_server:
        raise InstallError(
            f"{install.name}: its copy on host {host.name} ({target}) runs no server there"
        )
    return replace(found, build=install.build, binaries=install.binaries)


def _locked(host: Host, path: PurePath) -> LockedFile:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return host.lock(path)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise InstallError(
                    f"host {host.name}: {path} stays locked by another campaign"
                ) from None
            time.sleep(0.5)


def _send(prefix: Path, host: Host, target: PurePath) -> None:
    partial = target.with_name(f"{target.name}.partial")
    host.remove_tree(partial)
    host.mkdir(partial)
    with tempfile.TemporaryDirectory(prefix="pgbenchlab-ship-") as work:
        archive = Path(work) / "install.tar.gz"
        with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
            tar.add(prefix, arcname=".")
        host.put_file(archive, partial / archive.name)
    done = host.run(["tar", "-xzf", archive.name, "--no-same-owner"], cwd=partial, timeout=600)
    if done.returncode != 0:
        raise InstallError(
            f"host {host.name}: unpacking {prefix.name} failed: {done.stderr.strip()}"
        )
    host.run(["rm", "-f", archive.name], cwd=partial, timeout=60)
    moved = host.run(["mv", "-T", str(partial), str(target)], timeout=60)
    if moved.returncode != 0:
        raise InstallError(f"host {host.name}: {moved.stderr.strip()}")
