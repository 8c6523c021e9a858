"""An external server whose plan names the host it runs on (a network namespace with its own
sshd): its /proc telemetry and its server log read there through the same capture as a managed
server's; what cannot be read (a log the SSH account may not read, settings hidden from the
server's role) is told, never a failure."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import psycopg
import pytest
from psycopg import sql

from netns_hosts import TestHosts
from pgbenchlab import installs, plan
from pgbenchlab.campaign import run_campaign
from pgbenchlab.cli import main
from pgbenchlab.findings import WarningCode
from pgbenchlab.hosts import RemoteHost, SshTarget
from pgbenchlab.plan import RunSpec
from pgbenchlab.server import Endpoint
from pgbenchlab.telemetry.external import locate
from support import QuietReporter, require_installs

pytestmark = pytest.mark.server
PGBADGER_PREFIX = "%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h "


class ExternalServer:
    """A PostgreSQL started by hand on a test host, as its own admins would: logging collector
    on, TCP from the bridge with trust (a test network), its superuser the SSH account."""

    def __init__(self, hosts: TestHosts, name: str) -> None:
        self.hosts, self.address = hosts, hosts.hosts[name].address
        self.host = RemoteHost(
            SshTarget(
                name, hosts.ssh_target(name), None, str(hosts.identity), str(hosts.known_hosts)
            )
        )
        install = next(i for i in installs.discover_on(self.host) if i.has_server)
        self.pg_ctl = str(install.binary("pg_ctl"))
        self.data = self.host.make_temp_dir("external-", PurePosixPath("/tmp")) / "data"
        self.port = 5433
        initdb = [str(install.binary("initdb")), "-D", str(self.data), "-A", "trust", "-N"]
        self._run(*initdb, "-E", "SQL_ASCII", "--locale=C")  # an old server's, found in the wild
        hba = self.data / "pg_hba.conf"
        subnet = hosts.subnet + ".0/24"
        self.host.write_text(hba, self.host.read_text(hba) + f"host all all {subnet} trust\n")
        options = f"-c listen_addresses={self.address} -c port={self.port} -c fsync=off"
        options += " -c logging_collector=on -c log_timezone=UTC -c unix_socket_directories=/tmp"
        started = str(self.data.parent / "startup.log")  # its output: not the SSH channel's
        self._run(self.pg_ctl, "start", "-w", "-D", str(self.data), "-l", started, "-o", options)

    def _run(self, *argv: str) -> None:
        done = self.host.run(list(argv), timeout=120)
        assert done.returncode == 0, done.stderr

    @property
    def dsn(self) -> str:
        return f"host={self.address} port={self.port} user={self.hosts.user} dbname=postgres"

    def endpoint(self, user: str | None = None) -> Endpoint:
        return Endpoint(self.address, self.port, user or self.hosts.user, "postgres")

    def stop(self) -> None:
        self.host.run([self.pg_ctl, "stop", "-m", "immediate", "-D", str(self.data)], timeout=60)
        self.host.remove_tree(self.data.parent)
        self.host.close()


@pytest.fixture(scope="module")
def external(test_hosts: TestHosts) -> Iterator[ExternalServer]:
    require_installs("15")
    test_hosts.add("db1")
    server = ExternalServer(test_hosts, "db1")
    try:
        yield server
    finally:
        server.stop()


def plan_text(server: ExternalServer, host_line: str) -> str:
    hosts = server.hosts
    return f"""
[campaign]
name = "external"

[defaults]
duration = "2s"
warmup = "0s"

[[host]]
name = "db1"
ssh = "{hosts.ssh_target("db1")}"
identity = "{hosts.identity}"
known_hosts = "{hosts.known_hosts}"

[[server]]
name = "ext"
dsn = "{server.dsn}"
init = true
{host_line}
"""


class CheckpointAndRotationWhileMeasuring(QuietReporter):
    """Half a second into the measured run: a CHECKPOINT, then the server switches to a new log
    file (pg_rotate_logfile()), then an error: events in both files of the server's log."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.files: list[str] = []  # the log file before the switch and after it

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring":
            threading.Timer(0.5, self._checkpoint_and_rotate).start()

    def _checkpoint_and_rotate(self) -> None:
        with self.endpoint.connect(autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            self.files.append(str(_one(conn, "SELECT pg_current_logfile()")))
            conn.execute("SELECT pg_rotate_logfile()")
            for _ in range(100):  # the logger switches files when it next wakes up
                current = str(_one(conn, "SELECT pg_current_logfile()"))
                if current != self.files[0]:
                    break
                time.sleep(0.01)
            self.files.append(current)
            with contextlib.suppress(psycopg.errors.DivisionByZero):
                conn.execute("SELECT 1 / 0")


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    return None if row is None else row[0]


@contextlib.contextmanager
def logging_as_a_dba_would(endpoint: Endpoint) -> Iterator[None]:
    """pgBadger's log_line_prefix and New York time, for as long as the block lasts."""
    settings = {"log_line_prefix": PGBADGER_PREFIX, "log_timezone": "America/New_York"}
    with endpoint.connect(autocommit=True) as conn:
        for name, value in settings.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)  # the logger and the server's own processes have read them
    try:
        yield
    finally:
        with endpoint.connect(autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET ALL")
            conn.execute("SELECT pg_reload_conf()")


def test_an_external_server_on_a_named_host_has_its_telemetry_read_there(
    external: ExternalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its log written with pgBadger's prefix in New York time, and switched to a new file
    during the run: the events of both files, on the run's time axis."""
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(plan_text(external, 'host = "db1"'))
    assert main(["hosts", str(plan_file), "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert found["roles"] == ["server ext (external)"]
    reporter = CheckpointAndRotationWhileMeasuring(external.endpoint())
    with logging_as_a_dba_would(external.endpoint()):
        outcome = run_campaign(plan.load(plan_file), tmp_path / "results", reporter)
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    telemetry = outcome.results[0].telemetry
    assert telemetry is not None
    assert WarningCode.SERVER_LOG_UNREAD not in {w.code for w in outcome.results[0].warnings}
    sources = {s.source: s for s in telemetry.sources}
    assert sources["server_log"].available, sources["server_log"].note
    assert sources["processes"].available, sources["processes"].note  # its postmaster's CPU
    assert sources["cpu"].available and sources["memory"].available
    before, after = reporter.files
    assert before != after, "the server did not switch log files"
    kinds = {e.kind for e in telemetry.events}
    assert {"checkpoint_start", "checkpoint_end", "error"} <= kinds, telemetry.events
    (error,) = [e for e in telemetry.events if e.kind == "error"]  # written to the new file
    assert error.summary == "ERROR: division by zero" and error.detail["statement"]
    assert all(-1 < e.t < 4 for e in telemetry.events), telemetry.events  # New York: -5 h
    server_cpu = {t.metric: t.value for t in telemetry.totals if t.source == "processes"}
    assert server_cpu.get("server_cpu_s", 0) > 0, server_cpu


def test_what_cannot_be_read_is_told_and_the_rest_goes_on(external: ExternalServer) -> None:
    place = locate(external.endpoint(), external.host)
    assert place.log is not None and place.postmaster_pid is not None
    # a log the SSH account may not read
    external.host.run(["chmod", "000", str(place.log.path)], timeout=30)
    try:
        unreadable = locate(external.endpoint(), external.host)
    finally:
        external.host.run(["chmod", "600", str(place.log.path)], timeout=30)
    assert unreadable.log is None and unreadable.postmaster_pid == place.postmaster_pid
    assert "cannot read the server's log" in str(unreadable.log_problem)
    # a role that may not see the log settings
    with external.endpoint().connect() as conn:
        conn.execute("DROP ROLE IF EXISTS watcher")
        conn.execute("CREATE ROLE watcher LOGIN")
    hidden = locate(external.endpoint("watcher"), external.host)
    assert hidden.log is None and hidden.data_dir is None
    assert "pg_read_all_settings" in str(hidden.log_problem)
    assert hidden.postmaster_pid == place.postmaster_pid  # its processes are still found
    # a server that cannot be asked
    gone = locate(Endpoint(external.address, 1, "x", "postgres"), external.host)
    assert gone.log is None and "cannot ask the server" in str(gone.log_problem)


def test_a_server_logging_only_csv_has_its_csv_file_read(external: ExternalServer) -> None:
    with external.endpoint().connect(autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_destination = 'csvlog'")
        conn.execute("SELECT pg_reload_conf()")
    try:
        time.sleep(0.5)  # the logger has opened its CSV file
        place = locate(external.endpoint(), external.host)
    finally:
        with external.endpoint().connect(autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET ALL")
            conn.execute("SELECT pg_reload_conf()")
    assert place.log_problem is None and place.log is not None
    assert place.log.path.suffix == ".csv" and place.log.fmt.destination == "csvlog"
