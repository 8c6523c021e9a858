"""Separate "hosts" on this machine for multi-host tests: network namespaces on one bridge, each
running Debian's own sshd on its own address with its own host key, and one unprivileged
account (password field `*`, key login only) whose home and /tmp are private to each host
(`unshare --mount` with tmpfs), so code reading this machine's paths by mistake fails there.

Root only. Names are unique per `TestHosts`; `close()` removes everything it made (sshd and
every process of the account, namespaces, bridge, account, files), also after a failure half
way through `add()`.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")
STATE_PARENT = Path("/run")  # outside /tmp: the hosts' own /tmp is a private tmpfs


def unavailable() -> str | None:
    """Why test hosts cannot be made here (None when they can)."""
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces, accounts)"
    for tool in (SSHD, Path("/usr/bin/ssh-keygen"), Path("/usr/bin/unshare")):
        if not tool.exists():
            return f"{tool} is missing: ./lab test installs openssh-server"
    if shutil.which("ip") is None:
        return "ip (iproute2) is missing: ./lab test installs iproute2"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done


@dataclass
class TestHost:
    name: str  # also its namespace's name
    __test__ = False
    address: str
    sshd: subprocess.Popen[bytes] | None = None
    extra_mounts: tuple[str, ...] = ()
    holder: subprocess.Popen[bytes] | None = None  # holds its private mount namespace
    cpus: int | None = None  # the CPUs it says it has (None: this machine's)

    @property
    def namespace(self) -> str:
        return self.name

    def ns(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command in this host's network namespace (this machine's files)."""
        return _run("ip", "netns", "exec", self.namespace, *argv, check=check)

    def pids(self) -> list[int]:
        """The processes in this host's network namespace."""
        done = _run("ip", "netns", "pids", self.namespace, check=False)
        return [int(p) for p in done.stdout.split()]


@dataclass
class TestHosts:
    """A set of test hosts sharing a bridge, one account and one client key."""

    __test__ = False

    tag: str = field(
        default_factory=lambda: f"pbl{os.getpid() % 1000:03d}{random.randrange(100):02d}"
    )
    hosts: dict[str, TestHost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state = Path(tempfile.mkdtemp(prefix=f"{self.tag}-", dir=STATE_PARENT))
        self.bridge = f"{self.tag}br"
        self.subnet = f"10.{random.randrange(100, 250)}.{random.randrange(1, 250)}"
        self.user = self.tag
        self.home = Path("/home") / self.tag
        self.identity = self.state / "id_ed25519"
        self.known_hosts = self.state / "known_hosts"
        self._made_bridge = self._made_user = False
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    # -- set-up ------------------------------------------------------------------------------

    def _setup(self) -> None:
        # sshd's, made by its service (not started here) otherwise. Left in place: another set's
        # sshd (the suite's other worker) may need it still, and /run is emptied at boot.
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _run("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        _run("useradd", "--system", "--no-create-home", "--home-dir", str(self.home),
             "--shell", "/bin/sh", self.user)  # fmt: skip
        self._made_user = True
        _run("usermod", "-p", "*", self.user)  # not locked: sshd lets it in by key
        self.home.mkdir(mode=0o700)
        shutil.chown(self.home, self.user, self.user)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.identity))
        self.known_hosts.touch(mode=0o600)
        self.state.chmod(0o711)  # sshd reads the authorized key as the account
        Path(f"{self.identity}.pub").chmod(0o644)

    def add(
        self,
        name: str,
        *,
        hide: tuple[str, ...] = (),
        trusted: bool = True,
        sftp: bool = True,
        root_login: bool = False,
        cpus: int | None = None,
    ) -> TestHost:
        """A new host: its namespace, address and sshd. hide: directories made empty there
        (say /usr/lib/postgresql for a host without PostgreSQL). trusted: its host key goes
        into `known_hosts`. sftp: its sshd has the SFTP subsystem. root_login: root logs in
        there by the same key (`ssh_target(name, "root")`), as well as the account. cpus: the
        number of CPUs it says are online (its own /sys/devices/system/cpu/online)."""
        host = TestHost(f"{self.tag}{name}", f"{self.subnet}.{10 + len(self.hosts)}", None, hide)
        host.cpus = cpus
        self.hosts[name] = host
        veth = f"{self.tag}v{len(self.hosts)}"  # interface names: 15 characters at most
        _run("ip", "netns", "add", host.namespace)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
             host.namespace)  # fmt: skip
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        host.ns("ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        host.ns("ip", "link", "set", "eth0", "up")
        host.ns("ip", "link", "set", "lo", "up")
        directory = self.state / name
        directory.mkdir()
        if cpus is not None:
            (directory / "online").write_text(f"0-{cpus - 1}\n" if cpus > 1 else "0\n")
        key = directory / "host_key"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        (directory / "sshd_config").write_text(
            self._sshd_config(host, key, sftp=sftp, root_login=root_login)
        )
        self.start_sshd(name)
        if trusted:
            self.trust(host)
        return host

    def start_sshd(self, name: str) -> None:
        """Start the host's sshd (again, once killed) unless it runs, in its private mount
        namespace, which a `sleep` holds from the first start on (its home and /tmp outlive an
        sshd)."""
        host = self.hosts[name]
        if host.sshd is not None and host.sshd.poll() is None:
            return  # running: a second one could not bind, and the first would be lost
        directory = self.state / name
        if host.holder is None:
            host.holder = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    host.namespace,
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    self._private_mounts(host) + " && echo ready && exec sleep infinity",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
            assert host.holder.stdout is not None
            with host.holder.stdout as said:  # it says nothing more: `sleep` holds the mounts
                if said.readline() != b"ready\n":
                    raise RuntimeError(f"the private mounts of {host.name} failed")
        with open(directory / "sshd.log", "ab") as log:  # the child keeps its own descriptor
            host.sshd = self._sshd(host, directory, log)
        self._wait_listening(host)

    def _sshd(self, host: TestHost, directory: Path, log: IO[bytes]) -> subprocess.Popen[bytes]:
        assert host.holder is not None
        return subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                host.namespace,
                "nsenter",
                f"--mount=/proc/{host.holder.pid}/ns/mnt",
                str(SSHD),
                "-D",
                "-e",
                "-f",
                str(directory / "sshd_config"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def _private_mounts(self, host: TestHost) -> str:
        uid, gid = self._ids()
        mounts = [
            "mount -t tmpfs -o mode=1777 tmpfs /tmp",
            f"mount -t tmpfs -o mode=0700,uid={uid},gid={gid} tmpfs {self.home}",
            *(f"mount -t tmpfs -o mode=0755 tmpfs {path}" for path in host.extra_mounts),
        ]
        if host.cpus is not None:
            online = self.state / host.name.removeprefix(self.tag) / "online"
            mounts.append(f"mount --bind {online} /sys/devices/system/cpu/online")
        return " && ".join(mounts)

    def _sshd_config(self, host: TestHost, key: Path, *, sftp: bool, root_login: bool) -> str:
        return "\n".join(
            [
                f"ListenAddress {host.address}",
                "Port 22",
                f"HostKey {key}",
                f"PidFile {key.parent / 'sshd.pid'}",
                "UsePAM no",
                "StrictModes no",
                f"AuthorizedKeysFile {self.identity}.pub",
                f"AllowUsers {self.user}" + (" root" if root_login else ""),
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                f"PermitRootLogin {'prohibit-password' if root_login else 'no'}",
                "MaxSessions 64",
                "MaxStartups 64",
                *(["Subsystem sftp internal-sftp"] if sftp else []),
                "LogLevel ERROR",
                "",
            ]
        )

    def _wait_listening(self, host: TestHost) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert host.sshd is not None
            if host.sshd.poll() is not None:
                log = (self.state / host.name.removeprefix(self.tag) / "sshd.log").read_text()
                raise RuntimeError(f"sshd of {host.name} exited: {log}")
            probe = _run("ssh-keyscan", "-T", "2", host.address, check=False)
            if probe.stdout.strip():
                return
            time.sleep(0.1)
        raise RuntimeError(f"sshd of {host.name} is not listening on {host.address}")

    def trust(self, host: TestHost) -> None:
        scanned = _run("ssh-keyscan", "-T", "5", "-t", "ed25519", host.address).stdout
        with self.known_hosts.open("a") as file:
            file.write(scanned)

    def _ids(self) -> tuple[int, int]:
        import pwd

        entry = pwd.getpwnam(self.user)
        return entry.pw_uid, entry.pw_gid

    def ssh_target(self, name: str, user: str | None = None) -> str:
        return f"{user or self.user}@{self.hosts[name].address}"

    # -- faults ------------------------------------------------------------------------------

    def kill_sshd(self, name: str) -> None:
        """The host's sshd and every session it serves, gone (as on a machine that crashed)."""
        host = self.hosts[name]
        if host.sshd is not None and host.sshd.poll() is None:
            for pid in self._session_pids(host):
                _kill(pid)
            host.sshd.kill()
            host.sshd.wait()

    def link_down(self, name: str) -> None:
        self.hosts[name].ns("ip", "link", "set", "eth0", "down")

    def link_up(self, name: str) -> None:
        self.hosts[name].ns("ip", "link", "set", "eth0", "up")

    def slow_sessions(self, name: str, seconds: float | None) -> None:
        """Every SSH session (a command started, a signal sent) on that host begins `seconds`
        late (None: on time again): the login's ~/.ssh/rc, which sshd runs before each."""
        holder = self.hosts[name].holder
        assert holder is not None
        rc = self.home / ".ssh" / "rc"
        if seconds is None:
            change = f"rm -f {rc}"
        else:
            change = f"mkdir -p {rc.parent} && echo 'sleep {seconds}' > {rc} && chmod 644 {rc}"
        _run("nsenter", f"--mount=/proc/{holder.pid}/ns/mnt", "sh", "-c", change)

    def account_processes(self) -> list[str]:
        """What still runs as the test account, on any host (the PID namespace is shared);
        zombies (ended, not yet reaped by init) are not running."""
        done = _run("ps", "-u", self.user, "-o", "pid=,stat=,args=", check=False)
        rows = [line.split(None, 2) for line in done.stdout.splitlines() if line.strip()]
        return [f"{row[0]} {row[2]}" for row in rows if len(row) == 3 and "Z" not in row[1]]

    def leftovers(self, wait_s: float = 10) -> list[str]:
        """The commands still running as the account once its SSH sessions had time to end
        (sshd's own session processes are not commands)."""
        deadline = time.monotonic() + wait_s
        while True:
            left = [p for p in self.account_processes() if "sshd:" not in p]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)

    def _session_pids(self, host: TestHost) -> list[int]:
        """sshd's session processes (the commands they run stay, as on a crashed sshd)."""
        return [p for p in host.pids() if _cmdline(p).startswith(b"sshd:")]

    # -- tear-down ---------------------------------------------------------------------------

    def close(self) -> None:
        for host in self.hosts.values():
            for process in (host.sshd, host.holder):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
        if self._made_user:
            self._kill_account_processes()
        for host in self.hosts.values():
            for pid in host.pids():
                _kill(pid)
            _run("ip", "netns", "del", host.namespace, check=False)
        if self._made_bridge:
            _run("ip", "link", "del", self.bridge, check=False)
        if self._made_user:
            self._kill_account_processes()
            _run("userdel", "--force", self.user, check=False)
            shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)

    def _kill_account_processes(self) -> None:
        for _attempt in range(50):
            pids = [int(line.split()[0]) for line in self.account_processes()]
            if not pids:
                return
            for pid in pids:
                _kill(pid)
            time.sleep(0.1)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
