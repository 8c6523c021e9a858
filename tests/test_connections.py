"""Connection kinds without a server: the plan's connection axis, external servers held to
their dsn, the TLS material a cluster gets, and the connection-cost arithmetic."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from psycopg.conninfo import conninfo_to_dict

from conftest_report import write_synthetic
from pgbenchlab import dataset, installs, plan
from pgbenchlab.analysis.connection_cost import connection_costs, ms_per_transaction
from pgbenchlab.cli import main
from pgbenchlab.errors import PlanError
from pgbenchlab.plan.servers import dsn_connection
from pgbenchlab.report.views.compare import JSON_VERSION
from pgbenchlab.report.views.connection_cost import CostGroup, cost_json
from pgbenchlab.server import LOST_NETWORK_OPTIONS, Endpoint, tls
from pgbenchlab.store import Store

MANAGED = """
[campaign]
name = "kinds"
[matrix]
clients = [1]
{axis}
[[server]]
name = "pg"
install = "embedded"
"""


def parsed(text: str, tmp_path: Path) -> plan.Plan:
    return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_the_connection_axis_makes_one_cell_per_kind(tmp_path: Path) -> None:
    kinds = parsed(MANAGED.format(axis='connection = ["socket", "tcp", "tls"]'), tmp_path)
    assert [s.options.connection for s in kinds.specs] == ["socket", "tcp", "tls"]
    assert len({s.cell_id for s in kinds.specs}) == 3
    assert [s.label.split(" prepared")[1].split(" #")[0] for s in kinds.specs] == [
        "",
        " tcp",
        " tls",
    ]
    # The socket is the default: a plan written before the axis keeps its cell ids.
    before = parsed(MANAGED.format(axis=""), tmp_path)
    assert before.specs[0].cell_id == kinds.specs[0].cell_id
    assert before.uses_connection("socket") and not before.uses_connection("tls")


def test_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"must be one of socket, tcp, tls, pgbouncer; got 'ssl'"):
        parsed(MANAGED.format(axis='connection = ["ssl"]'), tmp_path)


@pytest.mark.parametrize(
    ("dsn", "kind"),
    [
        ("dbname=bench", "socket"),
        ("host=/var/run/postgresql dbname=bench", "socket"),
        ("host=db1 dbname=bench", "tcp"),
        ("host=db1 sslmode=disable", "tcp"),
        ("host=db1 sslmode=require", "tls"),
        ("postgresql://bench@db1/bench?sslmode=verify-full", "tls"),
    ],
)
def test_a_dsn_says_how_it_connects(dsn: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PGHOST", "PGHOSTADDR", "PGSSLMODE"):
        monkeypatch.delenv(name, raising=False)
    assert dsn_connection(dsn) == kind


EXTERNAL = """
[[server]]
name = "ext"
dsn = "{dsn}"
{axis}
[matrix]
clients = [1]
"""


def test_an_external_server_connects_as_its_dsn_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGSSLMODE", raising=False)
    dsn = "host=db1 dbname=bench sslmode=verify-full sslrootcert=/etc/ca.crt"
    found = parsed(EXTERNAL.format(dsn=dsn, axis=""), tmp_path)
    assert [s.options.connection for s in found.specs] == ["tls"]
    with pytest.raises(
        PlanError, match=r'"tcp" cannot be had from its dsn, which connects over tls'
    ):
        parsed(EXTERNAL.format(dsn=dsn, axis='connection = ["tls", "tcp"]'), tmp_path)
    plain = EXTERNAL.format(dsn="host=db1 dbname=bench", axis='connection = "tls"')
    with pytest.raises(PlanError, match=r"tls needs .* sslmode = require") as caught:
        parsed(plain, tmp_path)
    assert "\n" not in str(caught.value)


def test_the_ssl_settings_are_pgbenchlabs(tmp_path: Path) -> None:
    text = MANAGED.format(axis="") + 'settings = { ssl_cert_file = "/etc/x.crt" }\n'
    with pytest.raises(PlanError, match="is managed by pgbenchlab"):
        parsed(text, tmp_path)


def test_the_server_certificate_names_the_address_and_its_authority_signed_it() -> None:
    made = tls.make_material("127.0.0.1", "pg15")
    assert tls.covers(made.server_cert, "127.0.0.1")
    assert not tls.covers(made.server_cert, "10.0.0.7")
    assert not tls.covers("not a certificate", "127.0.0.1")
    assert "PRIVATE KEY" in made.server_key and made.server_key not in repr(made)
    ca = x509.load_pem_x509_certificate(made.ca_cert.encode())
    cert = x509.load_pem_x509_certificate(made.server_cert.encode())
    cert.verify_directly_issued_by(ca)
    key = serialization.load_pem_private_key(made.server_key.encode(), None)
    assert key.public_key() == cert.public_key()
    assert tls.covers(tls.make_material("db1.example", "x").server_cert, "db1.example")


def test_pgbench_gets_the_lost_network_options_in_its_dbname_argument() -> None:
    plain = Endpoint("10.0.0.5", 5432, "u", "bench", {"sslmode": "disable"})
    assert plain.client_dbname((15,)) == "bench"
    remote = Endpoint("10.0.0.5", 5432, "u", "bench", LOST_NETWORK_OPTIONS | {"sslmode": "disable"})
    assert (
        conninfo_to_dict(remote.client_dbname((15,))) == {"dbname": "bench"} | LOST_NETWORK_OPTIONS
    )
    # libpq before 12 refuses tcp_user_timeout: its keepalives alone
    assert "tcp_user_timeout" not in remote.client_dbname((11,))
    assert "keepalives_idle=5" in remote.client_dbname((9, 6))
    assert remote.libpq_env() == plain.libpq_env()  # no environment variable carries them
    # and its -i, which loads a dataset (its libpq's version asked of the pgbench itself)
    pgbench = installs.newest_pgbench(installs.discover()).binary("pgbench")
    assert conninfo_to_dict(dataset.init_dbname(remote, pgbench)) == conninfo_to_dict(
        remote.client_dbname((15,))
    )
    assert dataset.init_dbname(plain, pgbench) == "bench"


def test_connection_costs_are_differences_of_means_with_welch_intervals() -> None:
    times = {
        ("tcp", False): [0.10, 0.12, 0.11],
        ("tcp", True): [9.0, 10.0, 11.0],
        ("tls", False): [0.2, 0.2, 0.3],
        ("tls", True): [15.0, 16.0, 17.0],
        ("socket", True): [4.0],  # no persistent socket runs: no socket cost
    }
    found = {c.what: c for c in connection_costs(times, 0.95)}
    assert list(found) == [
        "a new connection per transaction over TCP",
        "a new connection per transaction over TLS",
        "TLS on top of a new TCP connection",
    ]
    tcp = found["a new connection per transaction over TCP"]
    assert tcp.estimate_ms == pytest.approx(10.0 - 0.11)
    assert tcp.ci_low_ms is not None and tcp.ci_high_ms is not None
    assert tcp.ci_low_ms < tcp.estimate_ms < tcp.ci_high_ms and tcp.runs == (3, 3)
    assert found["TLS on top of a new TCP connection"].estimate_ms == pytest.approx(6.0)
    assert [(c.cost_of, c.over) for c in found.values()] == [
        ("new_connection", "tcp"),
        ("new_connection", "tls"),
        ("tls", "tcp"),
    ]
    group = CostGroup("clients=2", "pg", tuple(found.values()))
    as_json = cost_json(group, tcp, 0.95)
    assert as_json == {
        "server": "pg",
        "cell": "clients=2",
        "cost_of": "new_connection",
        "over": "tcp",
        "what": "a new connection per transaction over TCP",
        "estimate_ms": tcp.estimate_ms,
        "ci_low_ms": tcp.ci_low_ms,
        "ci_high_ms": tcp.ci_high_ms,
        "confidence": 0.95,
        "runs_without": 3,
        "runs_with": 3,
    }
    one = connection_costs({("tcp", False): [1.0], ("tcp", True): [5.0]}, 0.95)
    assert one[0].ci_low_ms is None and one[0].estimate_ms == 4.0
    assert ms_per_transaction(2, 200.0) == 10.0 and ms_per_transaction(2, None) is None


def test_runs_stored_before_the_connection_columns_used_the_socket(tmp_path: Path) -> None:
    golden = Path(__file__).parent / "golden" / "results" / "before-redesign.db"
    shutil.copy(golden, tmp_path / "results.db")
    with Store(tmp_path / "results.db") as store:  # migrates it
        rows = store.db.execute("SELECT connection, tls_protocol FROM runs").fetchall()
    assert rows and {tuple(r) for r in rows} == {("socket", None)}


def test_compare_json_is_versioned_and_lists_no_cost_where_none_was_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_synthetic(tmp_path)  # no connect or connection axis
    argv = ["compare", "--results", str(tmp_path), "--baseline", "pg15", "--candidate", "pg18"]
    assert main([*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["schema_version"] == JSON_VERSION and shown["changes"]
    assert shown["connection_costs"] == []
