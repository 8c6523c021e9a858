"""No secret is stored, however it is written; a passfile reaches pgbench as it reaches the plan
check; every setting the server accepts is accepted, and a bad value is refused before anything
starts, in one line naming the server, the setting, the value and what PostgreSQL allows."""

from __future__ import annotations

import json
import secrets
import tomllib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql

import test_cli
from pgbenchlab import installs, plan, report
from pgbenchlab.campaign import RESULTS_DB, run_campaign
from pgbenchlab.errors import ServerError
from pgbenchlab.redaction import (
    MASK,
    WITHHELD,
    parse_conninfo,
    redact_plan_text,
    redact_setting,
)
from pgbenchlab.report.views import run as runview
from pgbenchlab.server import PER_TRANSACTION, ExternalServer, ManagedServer, settings_problem
from pgbenchlab.store import Store
from support import QuietReporter, embedded_server, require_installs
from test_secrets import every_text

# Quotes, backslashes, a TOML escape spelled out (\u00e9) beside the real é, spaces, @, =, #,
# %, URI delimiters; a tail of letters no escaping changes and no output holds by chance.
HOSTILE = "p@ss w=rd'q\"b\\sl\\u00e9-é#%:/?&+ü;"


def hostile_password() -> str:
    return HOSTILE + "".join(secrets.choice("ghjkmnpqrstuvwxyz") for _ in range(12))


def libpq_quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def spellings(password: str) -> set[str]:
    """Every way the password could be written down in a file."""
    return {
        password,
        json.dumps(password)[1:-1],  # TOML/JSON-escaped, \u00e9 for é
        json.dumps(password, ensure_ascii=False)[1:-1],
        libpq_quoted(password)[1:-1],
        quote(password, safe=""),
        quote(password),
        password.removeprefix(HOSTILE) or password,  # a random tail shows any partial leak
    }


def dsn_forms(password: str, port: int) -> dict[str, str]:
    """The same connection as a plan may hold it: TOML value text, key=value and URI forms."""
    kv = f"host=127.0.0.1 port={port} user=bench dbname=bench password={libpq_quoted(password)}"
    uri = f"postgresql://bench:{quote(password, safe='')}@127.0.0.1:{port}/bench"
    cut = kv.index("password=") + 12  # a TOML line continuation inside the password
    assert not kv[cut].isspace()
    continued = json.dumps(kv[:cut])[1:-1] + "\\\n      " + json.dumps(kv[cut:])[1:-1]
    return {
        "kv_basic": json.dumps(kv),
        "uri_literal": f"'{uri}'",
        "kv_multiline_literal": f"'''{kv}'''",
        "kv_multiline_basic": f'"""{continued}"""',
        "uri_basic_escaped": '"' + uri.replace("%", "\\u0025") + '"',
    }


@pytest.fixture(scope="module")
def protected() -> Iterator[tuple[ManagedServer, str]]:
    """A managed server with a role that logs in over TCP with a hostile password."""
    with embedded_server("hardening") as server:
        password = hostile_password()
        with server.endpoint.connect() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE bench LOGIN PASSWORD {}").format(sql.Literal(password))
            )
            conn.execute("CREATE DATABASE bench OWNER bench")
        yield server, password


def campaign_plan(name: str, servers: str, workload: str = '["select-only"]') -> str:
    return f"""
[campaign]
name = "{name}"
[defaults]
duration = "1s"
warmup = "0s"
latency_log = "full"
{servers}
[matrix]
scale = [1]
workload = {workload}
clients = [1]
"""


def external(name: str, dsn_value: str) -> str:
    return f'[[server]]\nname = "{name}"\ndsn = {dsn_value}\ninit = true\n'


# -- the stored plan --------------------------------------------------------------------------


def assert_masked(stored: str, password: str) -> None:
    for spelling in spellings(password):
        assert spelling not in stored, f"{spelling!r} is in the stored plan"
    for server in tomllib.loads(stored)["server"]:
        if "dsn" in server:
            params = parse_conninfo(server["dsn"])
            assert params is not None and params["password"] == MASK, server


def test_every_spelling_of_a_password_is_masked_in_the_stored_plan() -> None:
    password = hostile_password()
    forms = dsn_forms(password, 5432)
    servers = "".join(external(name, value) for name, value in forms.items())
    text = f"# written down here too: {password}\n" + campaign_plan("p", servers)
    for server in tomllib.loads(text)["server"]:  # every form holds the very password
        assert parse_conninfo(server["dsn"]) == parse_conninfo(
            tomllib.loads(text)["server"][0]["dsn"]
        )
    stored = redact_plan_text(text)
    assert stored != WITHHELD
    assert_masked(stored, password)
    assert "# written down here too: ********" in stored


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\x00"),
        min_size=6,
        max_size=30,
    )
)
@example("passwo")  # part of the keyword "password": masking it once broke the string
@example("host=h")  # a connection string's own text
def test_any_password_is_masked_or_the_plan_withheld(password: str) -> None:
    kv = f"host=h user=u password={libpq_quoted(password)}"
    uri = f"postgresql://u:{quote(password, safe='')}@h/db"
    servers = external("a", json.dumps(kv, ensure_ascii=False)) + external("b", f"'{uri}'")
    text = f"# {password}\n" + campaign_plan("p", servers)
    stored = redact_plan_text(text)
    if stored != WITHHELD:
        assert_masked(stored, password)


def test_connection_string_settings_are_masked_and_others_kept() -> None:
    assert redact_setting("primary_conninfo", "host=a password='x y'") == (
        "host=a password=********"
    )
    assert redact_setting("primary_conninfo", "postgresql://u:s%40cret@h/db") == (
        "user=u password=******** dbname=db host=h"
    )
    assert redact_setting("primary_conninfo", "not a connection string") == MASK
    assert redact_setting("myext.target", "host=a sslpassword=k") == "host=a sslpassword=********"
    for name, value in [("shared_buffers", "64MB"), ("primary_conninfo", "host=a"), ("x", "a=b")]:
        assert redact_setting(name, value) == value


# -- the connection pgbench makes --------------------------------------------------------------


def test_libpq_environment_reaches_pgbench_as_it_reaches_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGPASSFILE", "/some/passfile")
    monkeypatch.setenv("PGSSLMODE", "disable")
    env = ExternalServer("x", "host=h sslcert=/c.crt sslmode=prefer").endpoint.libpq_env()
    assert env["PGPASSFILE"] == "/some/passfile"
    assert env["PGSSLCERT"] == "/c.crt"
    assert env["PGSSLMODE"] == "prefer"  # the dsn wins over the environment, as in libpq


def test_dsn_options_pgbench_cannot_receive_are_refused() -> None:
    with pytest.raises(ServerError, match="keepalives, sslpassword cannot reach pgbench") as caught:
        ExternalServer("x", "host=h keepalives=1 sslpassword=hunter2")
    assert "hunter2" not in str(caught.value)


@pytest.mark.server
@pytest.mark.parametrize("given_as", ["PGPASSFILE", "passfile="])
def test_a_passfile_reaches_pgbench(
    given_as: str,
    protected: tuple[ManagedServer, str],
    tmp_path: Path,
    results_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, password = protected
    passfile = tmp_path / "passfile"
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    passfile.write_text(f"127.0.0.1:{server.port}:bench:bench:{escaped}\n")
    passfile.chmod(0o600)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pgpass to fall back on
    dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=bench"
    if given_as == "PGPASSFILE":
        monkeypatch.setenv("PGPASSFILE", str(passfile))
    else:
        dsn += f" passfile={passfile}"
    text = campaign_plan(f"passfile-{given_as[:6]}", external("ext", json.dumps(dsn)))
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert [r.status for r in outcome.results] == ["ok"], outcome.results[0].error


# -- nothing written holds the password --------------------------------------------------------


@pytest.mark.server
def test_hostile_passwords_are_in_no_file_and_shown_nowhere(
    protected: tuple[ManagedServer, str], tmp_path: Path, results_dir: Path
) -> None:
    server, password = protected
    forms = dsn_forms(password, server.port)
    servers = "".join(external(name, value) for name, value in forms.items())
    servers += f"""[[server]]
name = "managed"
install = "embedded"
settings = {{ primary_conninfo = {forms["kv_basic"]}, application_name = "hardening" }}
setting = {{ "myext.conninfo" = [{forms["uri_basic_escaped"]}] }}
"""
    workload = f'[{{ builtin = "select-only", define = {{ target = {forms["kv_basic"]} }} }}]'
    text = f"# the password: {password}\n" + campaign_plan("hostile", servers, workload)
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, results_dir, QuietReporter())
    assert [r.status for r in outcome.results] == ["ok"] * 6, [r.error for r in outcome.results]
    database = results_dir / RESULTS_DB
    report.write_report(database, campaign="hostile")
    with Store(database) as store:
        shown = [runview.run_detail(store, r.id) for r in store.run_records(outcome.campaign_id)]
        servers = store.server_records(outcome.campaign_id)
        managed = [r for r in servers if r.name == "managed"]
        hostile = store.find_campaign("hostile")
        assert hostile is not None
        stored_plan = hostile.plan_text
    written = {path: data for path, data in every_text(results_dir)}
    assert results_dir / "report.html" in written and database in written
    for spelling in spellings(password):
        for path, data in written.items():
            assert spelling.encode() not in data, f"{spelling!r} is in {path}"
        assert spelling not in json.dumps(shown, ensure_ascii=False), "shown by `show`"
    assert_masked(stored_plan, password)
    # Masked, not dropped: the settings still say what they were.
    [record] = managed
    effective = record.settings
    assert effective["primary_conninfo"].endswith("password=********")
    assert record.requested["primary_conninfo"] == effective["primary_conninfo"]
    assert record.variant == {
        "myext.conninfo": "user=bench password=******** dbname=bench host=127.0.0.1 "
        f"port={server.port}"
    }
    assert any(
        a.startswith("target=") and a.endswith("password=********") for a in shown[0]["argv"]
    )


# -- settings ------------------------------------------------------------------------------------


@pytest.mark.server
def test_every_setting_a_configuration_file_may_set_is_accepted(
    protected: tuple[ManagedServer, str],
) -> None:
    """Each setting of pg_settings that a server's configuration can set, at its reset value,
    passes the check; `postgres --describe-config` omits some 50 of them."""
    server, _ = protected
    with server.endpoint.connect() as conn:
        rows = conn.execute(
            "SELECT name, reset_val FROM pg_settings "
            "WHERE context <> 'internal' AND reset_val IS NOT NULL AND name NOT IN "
            "('data_directory', 'config_file', 'hba_file', 'ident_file')"
        ).fetchall()
    described = installs.describe_settings(server.install)
    undescribed = [name for name, _ in rows if name not in described]
    assert {"application_name", "jit_expressions"} <= set(undescribed)
    refused = {
        name: problem
        for name, value in rows
        if (problem := settings_problem(server.install, {name: value})) is not None
    }
    assert set(refused) == PER_TRANSACTION, refused
    assert (
        settings_problem(server.install, {"foo.bar": "anything", "jit_expressions": "off"}) is None
    )


BAD_SETTINGS = {
    "not a size": (
        'settings = { shared_buffers = "lots" }',
        "setting shared_buffers = 'lots': invalid value",
        "allows 16 8kB .. 1073741823 8kB",
    ),
    "below its minimum": (
        "settings = { max_connections = -5 }",
        "setting max_connections = '-5': -5 is outside the valid range",
        "(1 .. 262143)",
    ),
    "not one of its values": (
        'settings = { wal_level = "nope" }',
        "setting wal_level = 'nope': invalid value",
        "Available values: minimal, replica, logical",
    ),
    "a time out of range": (
        'settings = { checkpoint_timeout = "1s" }',
        "setting checkpoint_timeout = '1s': 1 s is outside the valid range",
        "(30 s .. 86400 s)",
    ),
    "a bad value on a setting axis": (
        'setting = { work_mem = ["4MB", "2kB"] }',
        "setting work_mem = '2kB': 2 kB is outside the valid range",
        "(64 kB .. 2147483647 kB)",
    ),
    "a setting of one transaction": (
        'settings = { transaction_isolation = "serializable" }',
        "setting transaction_isolation = 'serializable'",
        "set default_transaction_isolation",
    ),
}


@pytest.mark.server
@pytest.mark.parametrize("case", sorted(BAD_SETTINGS))
def test_a_bad_setting_is_refused_before_anything_starts(case: str, tmp_path: Path) -> None:
    require_installs("embedded")
    setting, refusal, allowed = BAD_SETTINGS[case]
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(test_cli.PLAN.format(server=f'install = "embedded"\n{setting}'))
    results = tmp_path / "results"
    done = test_cli.cli("run", plan_path, "--results", results)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"pgbenchlab: error: {plan_path}: server pg: "), line
    assert refusal in line and allowed in line, line
    assert not results.exists(), "nothing may be written for a plan that cannot run"
