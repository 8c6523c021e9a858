"""PostgreSQL servers: managed clusters (initdb, settings, start, stop) and external servers.

Runners and samplers see a server only through `Server`: a name, an `Endpoint` to connect to,
and lifecycle calls that an external server answers without touching anything. A remote
implementation fills the same interface.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgbenchlab import installs
from pgbenchlab.claims import CREATING, READY, Claim
from pgbenchlab.errors import ServerError
from pgbenchlab.installs import Installation
from pgbenchlab.osuser import OsAccount
from pgbenchlab.redaction import MASK, libpq_options, redact_setting, secrets_in

MARKER = "pgbenchlab-cluster.json"
SOCKET_PREFIX = "pgbl-"
SOCKET_RECORD = "pgbenchlab-socket-dir"  # in the data directory: the last socket directory
SETTINGS_FILE = "pgbenchlab.conf"
LOG_FILE = "pgbenchlab-server.log"
SUPERUSER = "pgbenchlab"
# Settings pgbenchlab owns: where and how the server listens, and what it logs.
RESERVED_SETTINGS = frozenset(
    {"port", "listen_addresses", "unix_socket_directories", "unix_socket_permissions"}
)
BASE_SETTINGS: dict[str, str] = {
    "log_checkpoints": "on",
    "log_autovacuum_min_duration": "0",
    "log_line_prefix": "%m [%p] ",
    "log_timezone": "UTC",
    "lc_messages": "C",
    "logging_collector": "off",
}


@dataclass(frozen=True)
class Endpoint:
    """How a client reaches a server. The password is never printed, stored or put in argv."""

    host: str
    port: int
    user: str
    dbname: str
    options: dict[str, str] = field(default_factory=dict)
    password: str | None = field(default=None, repr=False)

    def with_dbname(self, dbname: str) -> Endpoint:
        return Endpoint(self.host, self.port, self.user, dbname, self.options, self.password)

    def connect(self, *, autocommit: bool = True, timeout: int = 10) -> psycopg.Connection[Any]:
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "dbname": self.dbname,
            "connect_timeout": timeout,
            **self.options,
        }
        if self.password is not None:
            params["password"] = self.password
        return psycopg.connect(**params, autocommit=autocommit)

    def libpq_env(self) -> dict[str, str]:
        """Environment for libpq clients such as pgbench (keeps secrets out of argv): the same
        connection as `connect` makes, option for option."""
        env = {
            "PGHOST": self.host,
            "PGPORT": str(self.port),
            "PGUSER": self.user,
            "PGDATABASE": self.dbname,
        }
        names = libpq_environment_names()
        env |= {names[k]: v for k, v in self.options.items() if k in names}
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        return env

    def public(self) -> dict[str, str]:
        """What may be recorded about this endpoint: no password, no local socket path."""
        host = "local socket" if self.host.startswith("/") else self.host
        return {"host": host, "port": str(self.port), "user": self.user, "dbname": self.dbname}


@dataclass(frozen=True)
class ServerFacts:
    """What a server is, as recorded with every campaign."""

    name: str
    kind: str  # managed | external
    version: str  # server_version
    version_num: int
    settings: dict[str, str]  # every setting not at its default, as SHOW prints it
    requested: dict[str, str]  # what the plan asked for
    install: str | None  # installation name (managed)
    data_dir: str | None


class Server(Protocol):
    name: str

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def managed(self) -> bool: ...

    @property
    def init_allowed(self) -> bool: ...

    def prepare(self) -> None: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...

    def is_alive(self) -> bool: ...

    def facts(self) -> ServerFacts: ...

    def log_tail(self, lines: int = 20) -> list[str]: ...

    def log_problems(self, lines: int = 3) -> list[str]: ...


def libpq_environment_names() -> dict[str, str]:
    """libpq connection keyword → the environment variable libpq reads it from."""
    return {o.keyword.decode(): o.envvar.decode() for o in libpq_options() if o.envvar}


def libpq_environment() -> dict[str, str]:
    """The connection options libpq would take from this process's environment."""
    names = libpq_environment_names()
    return {k: os.environ[v] for k, v in names.items() if v in os.environ}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _quote_setting(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _settings_text(settings: Mapping[str, str]) -> str:
    return "".join(f"{key} = {_quote_setting(value)}\n" for key, value in settings.items())


# Words a configuration file reads as directives, not settings.
CONFIG_DIRECTIVES = frozenset({"include", "include_dir", "include_if_exists"})
# Where the cluster's files are: pgbenchlab's to choose, like its port.
LOCATION_SETTINGS = frozenset({"data_directory", "config_file", "hba_file", "ident_file"})
# Settings of the current transaction: PostgreSQL takes them from a configuration file without
# complaint, then every transaction starts from the default_… setting instead.
PER_TRANSACTION = frozenset(
    {"transaction_isolation", "transaction_read_only", "transaction_deferrable"}
)
_SETTING_NAME = re.compile(r"[A-Za-z0-9_.$]+")  # nothing a configuration line can be bent with
_SERVER_SAYS = re.compile(r"\b(?:LOG|WARNING|ERROR|FATAL|DETAIL|HINT):\s+(.*)")
_RANGE = re.compile(r'valid range for parameter "[^"]*" \((.*)\)')
_FAR_BELOW_ANY_MINIMUM = "-2147483647"


def settings_problem(install: Installation, settings: Mapping[str, str]) -> str | None:
    """Why the installation's server would refuse to start with these settings, or None.

    `postgres -C` reads a configuration file as the server does when it starts (names, values,
    units, ranges, enumerations, check hooks) and exits before it needs a data directory:
    4–11 ms, about what `--describe-config` costs, with nothing started or changed. A refusal
    costs one more read per setting, to name the one refused.
    """
    for name, value in settings.items():
        if reason := _refused_name(name):
            return f"setting {name} = {redact_setting(name, value)!r}: {reason}"
    if not settings or _postgres_refusal(install, settings) is None:
        return None
    for name, value in settings.items():
        if why := _postgres_refusal(install, {name: value}):
            shown = redact_setting(name, value)
            return f"setting {name} = {shown!r}: {_explained(install, name, why)}"
    names = ", ".join(settings)
    return f"settings {names} together: {_postgres_refusal(install, settings)}"


def _refused_name(name: str) -> str | None:
    if not _SETTING_NAME.fullmatch(name):
        return "not a setting name"
    if name.lower() in CONFIG_DIRECTIVES:
        return "a configuration-file directive, not a setting"
    if name.lower() in LOCATION_SETTINGS:
        return "where the cluster's files are is pgbenchlab's to choose; remove it"
    if name.lower() in PER_TRANSACTION:
        return (
            "a setting of one transaction, which a server's configuration cannot set (every "
            f"transaction starts from default_{name.lower()}); set default_{name.lower()}"
        )
    return None


def _postgres_refusal(install: Installation, settings: Mapping[str, str]) -> str | None:
    """What the installation's postgres says about a configuration file of these settings."""
    with tempfile.TemporaryDirectory(prefix="pgbl-settings-") as conf_dir:
        conf = Path(conf_dir)
        (conf / "postgresql.conf").write_text(f"include '{SETTINGS_FILE}'\n")
        (conf / "postgresql.auto.conf").write_text("")
        (conf / SETTINGS_FILE).write_text(_settings_text(settings))
        # -C first: the one mode postgres allows root to run.
        argv = [str(install.binary("postgres")), "-C", "server_version_num", "-D", conf_dir]
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PG_COLOR": "never"}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", timeout=60)
    if done.returncode == 0:
        return None
    said = [m.group(1) for line in done.stderr.splitlines() if (m := _SERVER_SAYS.search(line))]
    kept = [
        line.replace(f"{conf_dir}/", "")
        for line in said
        if not line.startswith(("configuration file", "skipping missing configuration file"))
    ]
    secrets = [s for n, v in settings.items() for s in secrets_in(n, v)]
    text = "; ".join(kept) or f"postgres exited with code {done.returncode}"
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def _explained(install: Installation, name: str, why: str) -> str:
    """PostgreSQL's refusal, with what it would allow where its message does not say."""
    major = install.version.major_text
    if why.startswith("unrecognized configuration parameter"):
        close = difflib.get_close_matches(name, list(installs.describe_settings(install)), n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        return f"PostgreSQL {major} has no such setting{hint}"
    if why.startswith("invalid value") and "; " not in why:
        probe = _postgres_refusal(install, {name: _FAR_BELOW_ANY_MINIMUM}) or ""
        if found := _RANGE.search(probe):
            return f"{why} (PostgreSQL {major} allows {found.group(1)})"
    return why


def query_facts(endpoint: Endpoint) -> tuple[str, int, dict[str, str]]:
    """server_version, server_version_num and every non-default setting."""
    with endpoint.connect() as conn:
        version = conn.execute("SHOW server_version").fetchone()
        number = conn.execute("SHOW server_version_num").fetchone()
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings "
            "WHERE source NOT IN ('default', 'override') ORDER BY name"
        ).fetchall()
    assert version is not None and number is not None
    hidden = RESERVED_SETTINGS | {"data_directory", "config_file", "hba_file", "ident_file"}
    settings = {str(name): str(value) for name, value in rows if name not in hidden}
    return str(version[0]), int(number[0]), settings


class ManagedServer:
    """A cluster pgbenchlab creates, configures, starts and stops, owned by `account`."""

    managed = True
    init_allowed = True

    def __init__(
        self,
        name: str,
        install: Installation,
        data_dir: Path,
        account: OsAccount,
        settings: dict[str, str] | None = None,
        *,
        owner_tag: str = "",
        claim: Claim | None = None,
    ) -> None:
        self.name = name
        self.install = install
        self.data_dir = data_dir
        self.account = account
        self.settings = dict(settings or {})
        self.owner_tag = owner_tag
        self.claim = claim  # records initdb's progress, so a cut-short one is made again
        self.port = 0
        self.socket_dir: Path | None = None

    @property
    def endpoint(self) -> Endpoint:
        if self.socket_dir is None:
            raise RuntimeError(f"server {self.name} is not started")
        return Endpoint(str(self.socket_dir), self.port, SUPERUSER, "postgres")

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """initdb when needed (only into an empty directory or one pgbenchlab made), then start."""
        if self._half_made():
            remove_cluster_files(self.data_dir)
            self._initdb()
        elif self._is_ours():
            if self._pg_major_on_disk() != self.install.version.major_text:
                self._stop_if_running()
                remove_cluster_files(self.data_dir)
                self._initdb()
            else:
                self._stop_if_running()
        else:
            self._initdb()
        self.start()

    def start(self) -> None:
        self.socket_dir = Path(tempfile.mkdtemp(prefix=SOCKET_PREFIX, dir="/tmp"))
        if self.account.is_switch:
            os.chown(self.socket_dir, self.account.uid, self.account.gid)
        # Recorded first, so that a kill -9 at any later moment leaves nothing unfound.
        self._write_owned(self.data_dir / SOCKET_RECORD, f"{self.socket_dir}\n")
        for _attempt in range(3):
            self.port = free_port()
            self._write_settings()
            result = self._pg_ctl("start", "-w", "-t", "120", "-l", str(self.log_path))
            if result.returncode == 0:
                self._check_settings()
                return
            if "could not bind" not in "\n".join(self.log_tail(10)):
                break
        raise ServerError(
            f"server {self.name} did not start: " + " | ".join(self.log_tail(5)),
            where=str(self.data_dir),
        )

    def stop(self) -> None:
        self._stop_if_running()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def is_alive(self) -> bool:
        """Accepting connections. (pg_ctl status alone is fooled for a moment after a crash:
        the dead postmaster lingers as a zombie until it is reaped.)"""
        if self.socket_dir is None:
            return False
        try:
            with self.endpoint.connect(timeout=5) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def facts(self) -> ServerFacts:
        version, number, settings = query_facts(self.endpoint)
        return ServerFacts(
            self.name,
            "managed",
            version,
            number,
            settings,
            dict(self.settings),
            self.install.name,
            str(self.data_dir),
        )

    def log_tail(self, lines: int = 20) -> list[str]:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def log_problems(self, lines: int = 3) -> list[str]:
        """The last PANIC, FATAL or ERROR lines of the server log: why it went down."""
        levels = ("PANIC:", "FATAL:", "ERROR:")
        found = [line for line in self.log_tail(200) if any(lv in line for lv in levels)]
        return found[-lines:]

    # -- internals ---------------------------------------------------------------------------

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(self.install.binary("pg_ctl")), "-D", str(self.data_dir), *args]
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PG_COLOR": "never"}
        # A new session keeps a terminal's Ctrl-C away from the postmaster: we stop it ourselves.
        return self.account.run(argv, env=env, cwd="/", start_new_session=True, timeout=300)

    def _half_made(self) -> bool:
        """An initdb pgbenchlab began here and never finished (a signal or a kill)."""
        return (
            self.claim is not None
            and self.claim.state == CREATING
            and self.data_dir.is_dir()
            and not (self.data_dir / MARKER).is_file()
        )

    def _is_ours(self) -> bool:
        check_data_dir(self.data_dir)
        return (self.data_dir / MARKER).is_file()

    def _pg_major_on_disk(self) -> str:
        try:
            return (self.data_dir / "PG_VERSION").read_text().strip()
        except OSError:
            return ""

    def _stop_if_running(self) -> None:
        if self._pg_ctl("status").returncode == 0:
            leftover_socket_dir = postmaster_socket_dir(self.data_dir)
            stopped = self._pg_ctl("stop", "-m", "fast", "-w", "-t", "60")
            if stopped.returncode != 0:  # e.g. its shutdown checkpoint cannot write
                self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "60")
            # A killed campaign's server: its private socket directory goes with it.
            if leftover_socket_dir and leftover_socket_dir != self.socket_dir:
                shutil.rmtree(leftover_socket_dir, ignore_errors=True)
        remove_recorded_socket_dir(self.data_dir, keep=self.socket_dir)

    def _initdb(self) -> None:
        if self.claim is not None:
            self.claim.set_state(CREATING)
        self.account.make_dir(self.data_dir)
        argv = [
            str(self.install.binary("initdb")),
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",  # no password is ever set: TCP logins are refused
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ]
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PG_COLOR": "never"}
        result = self.account.run(argv, env=env, cwd="/", timeout=600)
        if result.returncode != 0:
            raise ServerError(f"initdb failed: {result.stderr.strip()[-500:]}")
        conf = self.data_dir / "postgresql.conf"
        self._write_owned(conf, conf.read_text() + f"\ninclude_if_exists = '{SETTINGS_FILE}'\n")
        marker = {"created_by": "pgbenchlab", "server": self.name, "owner": self.owner_tag}
        self._write_owned(self.data_dir / MARKER, json.dumps(marker) + "\n")  # complete now
        if self.claim is not None:
            self.claim.set_state(READY)

    def _write_settings(self) -> None:
        assert self.socket_dir is not None
        ours = {
            "port": str(self.port),
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.socket_dir),
            "unix_socket_permissions": "0700",
        }
        merged = BASE_SETTINGS | self.settings | ours
        self._write_owned(self.data_dir / SETTINGS_FILE, _settings_text(merged))

    def _write_owned(self, path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o600)
        if self.account.is_switch:
            os.chown(path, self.account.uid, self.account.gid)

    def _check_settings(self) -> None:
        """Every setting the plan asked for was accepted by the server."""
        if not self.settings:
            return
        with self.endpoint.connect() as conn:
            rows = conn.execute(
                "SELECT name, error FROM pg_file_settings "
                "WHERE sourcefile LIKE %s AND (error IS NOT NULL OR NOT applied)",
                (f"%/{SETTINGS_FILE}",),
            ).fetchall()
        bad = {str(name): str(error) for name, error in rows if name in self.settings}
        if bad:
            self.stop()
            detail = "; ".join(
                f"{k} = {redact_setting(k, self.settings[k])!r}: {v}" for k, v in bad.items()
            )
            raise ServerError(f"server {self.name} rejected settings: {detail}")


def check_data_dir(data_dir: Path) -> None:
    """A data directory pgbenchlab may use: absent, empty, or one it created."""
    if not data_dir.exists() or (data_dir / MARKER).is_file():
        return
    if not data_dir.is_dir() or any(data_dir.iterdir()):
        raise ServerError(
            "data directory is not empty and was not created by pgbenchlab; "
            "choose an empty or new directory",
            where=str(data_dir),
        )


def postmaster_socket_dir(data_dir: Path) -> Path | None:
    """The private socket directory named in postmaster.pid, when it is one of ours."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) > 4 and Path(lines[4]).name.startswith("pgbl-"):
        return Path(lines[4])
    return None


class ExternalServer:
    """A server pgbenchlab only connects to: never started, stopped or reconfigured."""

    managed = False
    init_allowed: bool

    def __init__(self, name: str, dsn: str, *, init_allowed: bool = False) -> None:
        self.name = name
        self.init_allowed = init_allowed
        try:
            parsed = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ServerError(f"invalid connection string for server {name}: {exc}") from None
        # What libpq takes from the environment (PGPASSFILE, PGSSLMODE, …) when the plan check
        # connects becomes part of the endpoint, so pgbench connects the same way.
        params = libpq_environment() | {k: str(v) for k, v in parsed.items()}
        names = libpq_environment_names()
        if lost := sorted(k for k in params if k not in names):
            raise ServerError(
                f"server {name}: the dsn's {', '.join(lost)} cannot reach pgbench, which takes its "
                "connection from libpq's environment variables only (libpq has none for these); "
                "remove them from the dsn"
            )
        self._endpoint = Endpoint(
            host=params.pop("host", "/var/run/postgresql"),
            port=int(params.pop("port", "5432")),
            user=params.pop("user", "postgres"),
            dbname=params.pop("dbname", "postgres"),
            password=params.pop("password", "") or None,
            options=params,
        )

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def prepare(self) -> None:
        try:
            with self._endpoint.connect() as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError as exc:
            message = str(exc).strip().splitlines()[0]
            raise ServerError(f"cannot connect to external server {self.name}: {message}") from None

    def restart(self) -> None:
        self.prepare()

    def stop(self) -> None:
        """Nothing to do: pgbenchlab never manages an external server's lifecycle."""

    def is_alive(self) -> bool:
        try:
            self.prepare()
        except ServerError:
            return False
        return True

    def facts(self) -> ServerFacts:
        version, number, settings = query_facts(self._endpoint)
        return ServerFacts(self.name, "external", version, number, settings, {}, None, None)

    def log_tail(self, lines: int = 20) -> list[str]:
        return []

    def log_problems(self, lines: int = 3) -> list[str]:
        return []


def remove_cluster_files(data_dir: Path) -> None:
    """Empty a data directory, keeping the directory itself (it may be a mount point)."""
    for child in data_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def remove_recorded_socket_dir(data_dir: Path, keep: Path | None = None) -> None:
    """The private socket directory a server of this cluster last used (a killed campaign's,
    even one killed while starting its server). Called once no server runs on the cluster."""
    try:
        recorded = Path((data_dir / SOCKET_RECORD).read_text().strip())
    except OSError:
        return
    ours = recorded.parent == Path("/tmp") and recorded.name.startswith(SOCKET_PREFIX)
    if ours and recorded != keep:
        shutil.rmtree(recorded, ignore_errors=True)


def stop_leftover(data_dir: Path, timeout: float = 60) -> bool:
    """Stop a postmaster a killed campaign left running on a cluster pgbenchlab created, and
    remove its socket directory.

    Needs no installation: a fast shutdown is SIGINT to the pid in postmaster.pid.
    """
    if not (data_dir / MARKER).is_file():
        return False
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGINT)
    except (OSError, ValueError):
        remove_recorded_socket_dir(data_dir)
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            remove_recorded_socket_dir(data_dir)
            return True
        time.sleep(0.1)
    return False
