"""SSH connections for remote hosts, over asyncssh, with OpenSSH's conventions.

Host keys are checked against known_hosts (the user's own, those ~/.ssh/config names, or the
plan's file): an unknown or changed key is refused with the fix. Keys come from the agent, the
key files OpenSSH would use or the plan's identity; no password is ever asked for or kept.

The `Host` interface is synchronous; asyncssh is not. One event loop in a daemon thread serves
every connection, and `Connection.call` runs a coroutine there and waits for its result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from pgbenchlab.errors import HostError

T = TypeVar("T")
KEEPALIVE_S = 5  # a peer silent for 3 intervals is gone: the run fails, the campaign goes on
CONNECT_TIMEOUT_S = 10

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """The loop every SSH connection lives on, started once in a daemon thread."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="ssh", daemon=True).start()
        return _loop


def submit(coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start coroutine on the SSH loop."""
    return asyncio.run_coroutine_threadsafe(coroutine, event_loop())


def call(coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run coroutine on the SSH loop and wait for it (never call this from the loop itself)."""
    future = submit(coroutine)
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise


@dataclass(frozen=True)
class SshTarget:
    """Where a host is reached: the plan's `ssh = "user@address"` and its options."""

    name: str
    ssh: str
    port: int | None = None
    identity: str | None = None
    known_hosts: str | None = None

    @property
    def user(self) -> str | None:
        return self.ssh.rpartition("@")[0] or None

    @property
    def address(self) -> str:
        return self.ssh.rpartition("@")[2]

    def scan_fix(self) -> str:
        port = f"-p {self.port} " if self.port else ""
        where = self.known_hosts or "~/.ssh/known_hosts"
        return f"ssh-keyscan {port}{self.address} >> {where} (after checking the key)"


async def open_connection(target: SshTarget) -> asyncssh.SSHClientConnection:
    """A verified, logged-in connection; HostError with the reason and the fix otherwise."""
    options: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "keepalive_interval": KEEPALIVE_S,
        "keepalive_count_max": 3,
        "password": None,  # never asked for
        "kbdint_auth": False,
    }
    if target.user:
        options["username"] = target.user
    if target.port:
        options["port"] = target.port
    if target.identity:
        options["client_keys"] = [check_identity(target)]
    if target.known_hosts:
        options["known_hosts"] = check_known_hosts(target)
    try:
        return await asyncssh.connect(target.address, **options)
    except asyncssh.HostKeyNotVerifiable as exc:
        raise HostError(
            f"the host key of {target.address} is not in known_hosts or has changed "
            f"({exc.reason}): refused; if the key is the host's, {target.scan_fix()}",
            where=f"host {target.name}",
        ) from None
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError, asyncssh.ConfigParseError) as exc:
        raise HostError(
            f"a key or ~/.ssh/config that ssh would use for it cannot be read ({exc}): fix "
            "~/.ssh/config (its IdentityFile) or ~/.ssh/id_*, or give the plan's identity",
            where=f"host {target.name}",
        ) from None
    except asyncssh.PermissionDenied:
        raise HostError(
            f"{target.ssh} refused the login: check the user name and that one of your keys "
            "(agent, ~/.ssh/id_*, or the plan's identity) is in its authorized_keys",
            where=f"host {target.name}",
        ) from None
    except (OSError, asyncssh.Error) as exc:
        raise HostError(
            f"cannot reach {target.address} over SSH: {_reason(exc)}; check the address, "
            "that sshd runs there and that the network lets you through",
            where=f"host {target.name}",
        ) from None


def check_identity(target: SshTarget) -> str:
    """The plan's identity file, expanded, once it reads as a private key asyncssh can use
    without a passphrase; HostError naming the file and the fix otherwise."""
    assert target.identity is not None
    path = str(Path(target.identity).expanduser())
    try:
        asyncssh.read_private_key(path)
    except OSError as exc:
        raise _file_error(target, "identity", path, exc) from None
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
        # asyncssh says this one sentence for an encrypted key of every format.
        if str(exc).startswith("Passphrase must be specified"):
            why = (
                "is protected by a passphrase, which pgbenchlab never asks for: load it into "
                f"the agent (ssh-add {path}) and remove identity from the plan"
            )
        elif _is_public_key(path):
            why = "is a public key: give the private key (the file without .pub)"
        else:
            why = f"is not a private key ({exc}): give the private key ssh -i would take"
        raise HostError(f"identity {path} {why}", where=f"host {target.name}") from None
    return path


def _is_public_key(path: str) -> bool:
    try:
        asyncssh.read_public_key(path)
    except (OSError, asyncssh.KeyImportError):
        return False
    return True


def check_known_hosts(target: SshTarget) -> str:
    """The plan's known_hosts file, expanded, once it reads as one; HostError naming the file
    and the fix otherwise."""
    assert target.known_hosts is not None
    path = str(Path(target.known_hosts).expanduser())
    try:
        asyncssh.read_known_hosts(path)
    except OSError as exc:
        raise _file_error(target, "known_hosts", path, exc) from None
    except ValueError:  # its text is the file's line: never shown (it may be a key)
        port = f"-p {target.port} " if target.port else ""
        raise HostError(
            f"known_hosts {path} is not a known_hosts file: give a file of host keys as ssh "
            f"keeps them (~/.ssh/known_hosts); `ssh-keyscan {port}{target.address}` prints "
            "this host's line, to check and keep",
            where=f"host {target.name}",
        ) from None
    return path


def _file_error(target: SshTarget, key: str, path: str, exc: OSError) -> HostError:
    return HostError(
        f"cannot read {key} {path}: {exc.strerror or exc}; fix the plan's {key}",
        where=f"host {target.name}",
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer within " + f"{CONNECT_TIMEOUT_S} s"
    if isinstance(exc, asyncssh.Error):
        return exc.reason
    return str(exc) or type(exc).__name__


def sftp_error(exc: asyncssh.SFTPError, path: object) -> OSError:
    """The OSError pathlib would raise for an SFTP failure."""
    if isinstance(exc, asyncssh.SFTPNoSuchFile):
        return FileNotFoundError(2, exc.reason, str(path))
    if isinstance(exc, asyncssh.SFTPPermissionDenied):
        return PermissionError(13, exc.reason, str(path))
    if isinstance(exc, asyncssh.SFTPFileAlreadyExists):
        return FileExistsError(17, exc.reason, str(path))
    return OSError(5, exc.reason, str(path))


LOCAL_ONLY_ENV = frozenset({"PATH", "HOME"})  # this machine's mean nothing on another
# A remote command's environment travels on its stdin, one NAME=value line each, never in argv.
ENV_READER = 'while IFS= read -r v && [ -n "$v" ]; do export "$v"; done; '


def env_lines(env: Mapping[str, str] | None) -> str:
    """The environment as `ENV_READER` reads it (this machine's PATH and HOME left out)."""
    lines = []
    for name, value in (env or {}).items():
        if name in LOCAL_ONLY_ENV:
            continue
        if "\n" in value or "\n" in name or "=" in name:
            raise ValueError(f"environment variable {name!r} cannot be passed to a remote host")
        lines.append(f"{name}={value}\n")
    return "".join(lines) + "\n"
