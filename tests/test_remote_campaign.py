"""A campaign with its managed server on another host (a network namespace with its own sshd):
initdb, settings, start and stop there, the dataset made and pgbench run from this machine over
TCP, telemetry read there; results stored as for a local run, nothing left running."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ci_guard
from netns_hosts import TestHosts
from pg_builds import Pg18Build
from pgbenchlab import plan
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_of_sorted
from pgbenchlab.builds import prebuilt
from pgbenchlab.builds.cache import read_provenance
from pgbenchlab.builds.shipping import SHIPPED_DIR
from pgbenchlab.campaign import run_campaign
from pgbenchlab.campaign.layout import AUTHORITY_FILE
from pgbenchlab.cli import main
from pgbenchlab.errors import InstallError
from pgbenchlab.findings import WarningCode
from pgbenchlab.hosts import RemoteHost, SshTarget
from pgbenchlab.hosts.remote import RETRY_AFTER_S
from pgbenchlab.pgbench.logs import read_log_bytes
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.plan import RunSpec
from pgbenchlab.results import RunHost, RunResult, RunStatus
from pgbenchlab.store import Store
from support import QuietReporter, require_installs

pytestmark = pytest.mark.server


def hosts_toml(hosts: TestHosts, *names: str) -> str:
    return "".join(
        f'[[host]]\nname = "{name}"\nssh = "{hosts.ssh_target(name)}"\n'
        f'identity = "{hosts.identity}"\nknown_hosts = "{hosts.known_hosts}"\n'
        for name in names
    )


@pytest.fixture(scope="module")
def db_host(test_hosts: TestHosts) -> TestHosts:
    require_installs("15")
    test_hosts.add("db1")
    test_hosts.add("nopg", hide=("/usr/lib/postgresql",))
    test_hosts.add("stranger", trusted=False)
    test_hosts.add("lg1")
    test_hosts.add("lg2")
    return test_hosts


def one_server_plan(hosts: TestHosts, server_host: str, *, user: str | None = None) -> str:
    text = f"""
[campaign]
name = "remote"

[defaults]
duration = "2s"
warmup = "0s"

{hosts_toml(hosts, server_host)}
[[server]]
name = "pg"
host = "{server_host}"
"""
    return text if user is None else text.replace(f'"{hosts.user}@', f'"{user}@')


@pytest.mark.parametrize(
    ("server_host", "user", "expected"),
    [
        ("stranger", None, r"host stranger: the host key of .* is not in known_hosts.*ssh-keyscan"),
        ("db1", "nobody", r"host db1: nobody@.* refused the login"),
        ("nopg", None, r"no PostgreSQL server is installed on host nopg"),
    ],
)
def test_a_host_that_cannot_serve_stops_the_campaign_before_it_starts(
    db_host: TestHosts,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    server_host: str,
    user: str | None,
    expected: str,
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(one_server_plan(db_host, server_host, user=user))
    results = tmp_path / "results"
    assert main(["run", str(plan_file), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert len(err.strip().splitlines()) == 1
    assert not (results / "results.db").exists()
    assert db_host.leftovers() == []


def test_hosts_command_tells_each_host(
    db_host: TestHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        hosts_toml(db_host, "db1", "nopg", "stranger") + '[[server]]\nname = "x"\nhost = "db1"\n'
    )
    assert main(["hosts", str(plan_file), "--json"]) == 1
    found = {h["name"]: h for h in json.loads(capsys.readouterr().out)}
    assert found["db1"]["reachable"] and found["nopg"]["reachable"]
    assert [i["version"].split(".")[0] for i in found["db1"]["installs"]] == ["15"]
    assert found["nopg"]["installs"] == []
    assert found["db1"]["cpus"] >= 1 and found["db1"]["memory_bytes"] > 0
    assert "Debian" in found["db1"]["os"]
    # One machine: the same clock, within the probe's own uncertainty.
    assert abs(found["db1"]["clock_offset_s"]) <= found["db1"]["clock_uncertainty_s"] + 0.005
    assert not found["stranger"]["reachable"]
    assert "ssh-keyscan" in found["stranger"]["problem"]


def test_a_managed_server_on_another_host(db_host: TestHosts, tmp_path: Path) -> None:
    text = f"""
[campaign]
name = "remote"

[defaults]
duration = "2s"
warmup = "0s"

{hosts_toml(db_host, "db1")}
[[server]]
name = "pg15"
host = "db1"
install = "15"
settings = {{ shared_buffers = "32MB" }}

[matrix]
clients = [1, 2]
"""
    the_plan = plan.parse(text, str(tmp_path / "remote.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, tmp_path / "results", QuietReporter())
    assert (outcome.ran, outcome.failed) == (2, 0), [(r.status, r.error) for r in outcome.results]
    assert all(r.status == RunStatus.OK and r.tps and r.tps > 0 for r in outcome.results)
    store = Store(tmp_path / "results" / "results.db")
    try:
        servers = store.server_records(outcome.campaign_id)
        run_ids = [r.id for r in store.run_records(outcome.campaign_id)]
        hosts = {store.run_hosts(run_id) for run_id in run_ids}
    finally:
        store.close()
    address = db_host.hosts["db1"].address
    assert hosts == {(RunHost("pgbench", "local"), RunHost("server", "db1", address))}
    # The cluster is in db1's own home (private to it: not on this machine).
    assert servers[0].data_dir.startswith(str(db_host.home) + "/.pgbenchlab/clusters/")
    assert not Path(servers[0].data_dir).exists()
    assert db_host.leftovers() == []


class OnFirstMeasure(QuietReporter):
    """Does `fault` `delay_s` into the first run's measurement, and `after` once that run
    ended (a host crashed or cut off while a run measures)."""

    def __init__(
        self,
        fault: Callable[[], None],
        after: Callable[[], None] = lambda: None,
        delay_s: float = 1.0,
    ) -> None:
        super().__init__()
        self.fault, self.after, self.delay_s = fault, after, delay_s
        self.armed = self.done = False

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring" and not self.armed:
            self.armed = True
            threading.Timer(self.delay_s, self.fault).start()

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        super().run_finished(spec, result)
        if self.armed and not self.done:
            self.done = True
            self.after()


def test_a_lost_server_host_fails_its_runs_and_the_next_start_recovers(
    db_host: TestHosts, tmp_path: Path
) -> None:
    text = one_server_plan(db_host, "db1").replace('duration = "2s"', 'duration = "3s"')
    the_plan = plan.parse(
        text + "[matrix]\nclients = [1, 2]\n", str(tmp_path / "p.toml"), base=tmp_path
    )
    results = tmp_path / "results"
    try:
        outcome = run_campaign(
            the_plan, results, OnFirstMeasure(lambda: db_host.kill_sshd("db1"), delay_s=0.5)
        )
        # The run measuring then keeps pgbench's figures (TCP to db1 still works; only the
        # samplers there stop); the next cannot start its server: failed, with the reason.
        last = outcome.results[-1]
        assert last.status == RunStatus.FAILED and "host db1" in (last.error or "")
        assert "connection lost" in (last.error or "")
    finally:
        db_host.start_sshd("db1")
    again = run_campaign(the_plan, results, QuietReporter())  # resumes: the failed runs again
    assert (again.ran, again.failed) == (outcome.failed, 0), [r.error for r in again.results]
    assert db_host.leftovers() == []


def test_pgbench_on_a_load_generator_host(db_host: TestHosts, tmp_path: Path) -> None:
    text = one_server_plan(db_host, "db1").replace(
        hosts_toml(db_host, "db1"), hosts_toml(db_host, "db1", "lg1")
    )
    text = text.replace("[[server]]", '[pgbench]\nhosts = ["lg1"]\n\n[[server]]')
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, tmp_path / "results", QuietReporter())
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    result = outcome.results[0]
    # pgbench's per-transaction log was reduced on lg1: percentiles from every transaction;
    # only the reduction came back (the plan keeps no whole logs).
    assert result.latency is not None and result.latency.samples > 0
    artifacts = tmp_path / "results" / "artifacts"
    assert [p.name for p in artifacts.rglob("*.reduction.json")] == ["lg1.reduction.json"]
    assert not list(artifacts.rglob("pgbench_log.*"))
    assert "pgbench-" not in " ".join(result.argv)
    store = Store(tmp_path / "results" / "results.db")
    try:
        run_id = store.run_records(outcome.campaign_id)[0].id
        hosts = {h.role: h.host for h in store.run_hosts(run_id)}
    finally:
        store.close()
    assert hosts == {"server": "db1", "pgbench": "lg1"}
    assert db_host.leftovers() == []


def test_two_load_generators_split_a_run(
    db_host: TestHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = one_server_plan(db_host, "db1").replace(
        hosts_toml(db_host, "db1"), hosts_toml(db_host, "db1", "lg1", "lg2")
    )
    text = text.replace(
        "[[server]]", '[pgbench]\nhosts = ["lg1", "lg2"]\nkeep_logs = true\n\n[[server]]'
    )
    the_plan = plan.parse(
        text + "[matrix]\nclients = [3]\n", str(tmp_path / "p.toml"), base=tmp_path
    )
    results = tmp_path / "results"
    outcome = run_campaign(the_plan, results, QuietReporter())
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    result = outcome.results[0]
    lg1, lg2 = result.generators
    assert (lg1.host, lg1.clients, lg2.host, lg2.clients) == ("lg1", 2, "lg2", 1)
    assert lg1.seed != lg2.seed
    assert not any(w.code == WarningCode.COMMITS_DISAGREE for w in result.warnings)
    # Stored TPS: the sum of the generators' own reports, as each printed it.
    artifacts = results / "artifacts"
    stdout = read_log_bytes(next(artifacts.rglob("stdout.txt.zst"))).decode()
    parts = stdout.split("# load generator ")[1:]
    reports = {p.split("\n", 1)[0]: parse_report(p.split("\n", 1)[1]) for p in parts}
    assert set(reports) == {"lg1", "lg2"}
    assert all(r.tps and r.tps > 0 for r in reports.values())
    assert result.tps == pytest.approx(sum(r.tps or 0 for r in reports.values()), rel=1e-12)
    # Merged percentiles (from each generator's log reduced on its host): the exact ones of
    # the union of both logs, kept, within the common window (each log's times on this
    # machine's clock: less its host's measured offset).
    reduced = sorted(p.name for p in artifacts.rglob("*.reduction.json"))
    assert reduced == ["lg1.reduction.json", "lg2.reduction.json"]
    kept = lines_in_window(result, artifacts)
    assert kept["lg1"] and kept["lg2"]
    union = sorted(int(fields[2]) for lines in kept.values() for fields in lines)
    assert result.latency is not None and result.latency.samples == len(union)
    assert result.latency.percentiles_ms == {
        p: percentile_of_sorted(union, p) / 1000 for p in STANDARD_PERCENTILES
    }
    store = Store(results / "results.db")
    try:
        run_id = store.run_records(outcome.campaign_id)[0].id
        assert store.run_generators(run_id) == result.generators
    finally:
        store.close()
    assert main(["show", "--results", str(results), str(run_id)]) == 0
    shown = capsys.readouterr().out
    assert "load generators (2; TPS is their sum)" in shown
    assert "warning: 2 load generators started" in shown


def lines_in_window(result: RunResult, artifacts: Path) -> dict[str, list[list[str]]]:
    """Each generator's kept log lines (their fields) of transactions that ended in the run's
    common window, each log's times on this machine's clock (less its host's offset)."""
    window = next(w for w in result.warnings if w.code == WarningCode.GENERATORS_WINDOW)
    start, end = (round(float(window.evidence[k]) * 1e6) for k in ("start", "end"))
    shift = {g.host: round(g.clock_offset_s * 1e6) for g in result.generators}
    kept: dict[str, list[list[str]]] = {g.host: [] for g in result.generators}
    for log in artifacts.rglob("pgbench_log.*"):
        host = log.name.split(".")[1]
        for line in read_log_bytes(log).decode().splitlines():
            fields = line.split()
            done = int(fields[4]) * 1_000_000 + int(fields[5]) - shift[host]
            if fields[2].isdigit() and start <= done < end:
                kept[host].append(fields)
    return kept


def test_two_servers_on_a_host_driven_from_two_load_generators(
    db_host: TestHosts, tmp_path: Path
) -> None:
    """Two instances on one machine (one per NUMA node), each member's clients split across
    two load generator hosts: four pgbench processes started together, one stored run."""
    base = one_server_plan(db_host, "db1").replace('name = "pg"', 'name = "a"')
    base = base.replace(hosts_toml(db_host, "db1"), hosts_toml(db_host, "db1", "lg1", "lg2"))
    text = f"""{base}
[[server]]
name = "b"
host = "db1"
[pgbench]
hosts = ["lg1", "lg2"]
[[server_group]]
name = "ab"
servers = ["a", "b"]
solo = false
[matrix]
scale = [1]
clients = [2]
"""
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, tmp_path / "results", QuietReporter())
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    result = outcome.results[0]
    labels = sorted((g.host, g.clients) for g in result.generators)
    assert labels == [("a@lg1", 1), ("a@lg2", 1), ("b@lg1", 1), ("b@lg2", 1)]
    a, b = result.servers
    assert (a.clients, b.clients) == (2, 2)
    assert result.tps == pytest.approx(sum(g.tps or 0 for g in result.generators), rel=1e-12)
    assert result.tps == pytest.approx((a.tps or 0) + (b.tps or 0), rel=1e-12)
    assert a.commits_unexplained is not None and abs(a.commits_unexplained) < 100
    assert a.verdict and b.verdict  # each diagnosed on its own server's telemetry, read on db1
    assert not any(w.code == WarningCode.COMMITS_DISAGREE for w in result.warnings)
    assert db_host.leftovers() == []


class LinkDownWhileMeasuring(QuietReporter):
    """Brings db1's network link down as the first run starts measuring, and up again once that
    run has finished (a network lost for a while)."""

    def __init__(self, hosts: TestHosts) -> None:
        super().__init__()
        self.hosts = hosts
        self.down_at: float | None = None
        self.down_for_s: float | None = None

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring" and self.down_at is None:
            self.down_at = time.monotonic() + 0.5
            threading.Timer(0.5, self.hosts.link_down, args=("db1",)).start()

    def run_finished(self, spec: RunSpec, result: RunResult) -> None:
        super().run_finished(spec, result)
        if self.down_at is not None and self.down_for_s is None:
            self.down_for_s = time.monotonic() - self.down_at
            self.hosts.link_up("db1")
            time.sleep(RETRY_AFTER_S)  # db1 is tried again once that long has passed


def test_a_lost_network_fails_the_run_promptly_and_the_campaign_goes_on(
    db_host: TestHosts, tmp_path: Path
) -> None:
    text = one_server_plan(db_host, "db1") + "[matrix]\nclients = [1, 2]\n"
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    reporter = LinkDownWhileMeasuring(db_host)
    try:
        outcome = run_campaign(the_plan, tmp_path / "results", reporter)
    finally:
        db_host.link_up("db1")
    lost, after = outcome.results
    # pgbench's clients aborted (tcp_user_timeout); the reason: db1 could not be reached
    assert lost.status == RunStatus.ABORTED, (lost.status, lost.error)
    assert "host db1: cannot reach" in (lost.error or ""), lost.error
    assert "was down" not in (lost.error or ""), lost.error
    # Without keepalives and tcp_user_timeout pgbench waited for the kernel's retransmissions
    # (some 15 minutes) until killed at 2 × duration + 120 s.
    assert reporter.down_for_s is not None and reporter.down_for_s < 63, reporter.down_for_s
    print(f"network down to the run's end: {reporter.down_for_s:.1f} s")
    assert after.status == RunStatus.OK, after.error
    # pgbench's dbname argument carries them (no environment variable does)
    assert "keepalives_idle=5" in after.argv[-1] and "tcp_user_timeout=10000" in after.argv[-1]
    assert db_host.leftovers() == []


def test_tls_to_a_server_on_another_host_from_a_load_generator(
    db_host: TestHosts, tmp_path: Path
) -> None:
    text = one_server_plan(db_host, "db1").replace(
        hosts_toml(db_host, "db1"), hosts_toml(db_host, "db1", "lg1")
    )
    text = text.replace("[[server]]", '[pgbench]\nhosts = ["lg1"]\n\n[[server]]')
    text = text.replace('warmup = "0s"', 'warmup = "0s"\nconnection = "tls"')
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    results = tmp_path / "results"
    outcome = run_campaign(the_plan, results, QuietReporter())
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    telemetry = outcome.results[0].telemetry
    assert telemetry is not None and str(telemetry.tls_protocol).startswith("TLSv1.")
    assert telemetry.tls_cipher
    # pgbench on lg1 verified db1's address against a copy of the cluster's own authority,
    # kept with the run; the server's key never left db1.
    (authority,) = results.rglob(AUTHORITY_FILE)
    assert "BEGIN CERTIFICATE" in authority.read_text()
    assert not [p for p in results.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
    assert db_host.leftovers() == []


def installed_there(hosts: TestHosts, campaign: str, server: str, install: str) -> str:
    """A one-run plan of a server on db1 from an installation made here."""
    return f"""
[campaign]
name = "{campaign}"
[defaults]
duration = "1s"
warmup = "0s"
{hosts_toml(hosts, "db1")}
[[server]]
name = "{server}"
host = "db1"
install = {install}
settings = {{ shared_buffers = "32MB" }}
[matrix]
clients = [1]
"""


def test_prebuilt_binaries_on_another_host_are_copied_there_once(
    db_host: TestHosts, build_cache: Path, tmp_path: Path
) -> None:
    """A server on a [[host]] from binaries downloaded here: the installation copied to the host
    once (by its cache key, under pgbenchlab's directory there), run there; a second campaign
    sends nothing again."""
    try:
        local = prebuilt.ensure("12")
    except InstallError as exc:
        if ci_guard.under_ci():
            raise
        pytest.skip(f"prebuilt 12 cannot be had here ({exc}): real-server test NOT run")
    key = str(read_provenance(local.bin_dir.parent)["key"])
    text = installed_there(db_host, "shipped", "pg12", '{ binaries = "12" }')
    the_plan = plan.parse(text, str(tmp_path / "shipped.toml"), base=tmp_path)
    host = RemoteHost(
        SshTarget("db1", db_host.ssh_target("db1"), None, str(db_host.identity),
               str(db_host.known_hosts))
    )  # fmt: skip
    try:
        copy = host.state_dir() / SHIPPED_DIR / key
        for round_ in (1, 2):
            outcome = run_campaign(the_plan, tmp_path / f"results{round_}", QuietReporter())
            [result] = outcome.results
            assert result.status == RunStatus.OK, result.error
            assert result.telemetry is not None
            assert 120000 <= (result.telemetry.server_version_num or 0) < 130000
            stamp = host.run(["stat", "-c", "%Y %i", str(copy / "bin" / "postgres")]).stdout
            if round_ == 1:
                first = stamp
        assert stamp == first  # found there the second time, not sent again
        assert host.list_dir(copy.parent) == [key, f"{key}.lock"]  # no partial copy left
    finally:
        host.close()
    assert db_host.leftovers() == []


def test_a_build_made_here_runs_on_another_host(
    db_host: TestHosts, pg18_build: Pg18Build, tmp_path: Path
) -> None:
    """A server on a [[host]] from a build made here (from source): copied there, its
    programs finding their own libraries in the copy."""
    text = pg18_build.recipe + installed_there(db_host, "built-there", "pg18", '{ build = "pg18" }')
    the_plan = plan.parse(text, str(tmp_path / "built.toml"), base=tmp_path)
    outcome = run_campaign(
        the_plan, tmp_path / "results", QuietReporter(), built=[pg18_build.install]
    )
    [result] = outcome.results
    assert result.status == RunStatus.OK, result.error
    assert result.telemetry is not None
    assert 180000 <= (result.telemetry.server_version_num or 0) < 190000
    assert db_host.leftovers() == []
