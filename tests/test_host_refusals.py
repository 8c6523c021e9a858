"""A [[host]] pgbenchlab cannot use, for a reason in the plan's files or in the host's sshd:
one line naming the host, the file and the fix, in `pgbenchlab hosts` as in `run`, before
anything starts (real sshd in network namespaces, tests/netns_hosts.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest

from netns_hosts import TestHosts
from pgbenchlab.cli import main
from pgbenchlab.hosts import RemoteHost, SshTarget
from support import require_installs

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def hosts(test_hosts: TestHosts) -> TestHosts:
    test_hosts.add("ok")
    test_hosts.add("nosftp", sftp=False)
    test_hosts.add("rootdb", root_login=True)
    test_hosts.add("nopg", hide=("/usr/lib/postgresql",))
    return test_hosts


def host_toml(hosts: TestHosts, name: str, **changes: str) -> str:
    fields = {
        "ssh": hosts.ssh_target(name),
        "identity": str(hosts.identity),
        "known_hosts": str(hosts.known_hosts),
    } | changes
    return f'[[host]]\nname = "{name}"\n' + "".join(f'{k} = "{v}"\n' for k, v in fields.items())


def plan_text(host: str) -> str:
    return f"""
{host}
[defaults]
duration = "1s"
warmup = "0s"

[[server]]
name = "pg"
host = "{host.split('"')[1]}"
"""


def public_key(hosts: TestHosts, tmp_path: Path) -> str:
    return host_toml(hosts, "ok", identity=f"{hosts.identity}.pub")


def not_a_key(hosts: TestHosts, tmp_path: Path) -> str:
    (tmp_path / "notes.txt").write_text("not a key\n")
    return host_toml(hosts, "ok", identity=str(tmp_path / "notes.txt"))


def passphrase_key(hosts: TestHosts, tmp_path: Path) -> str:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "id_locked"
    key.write_private_key(
        path, format_name="pkcs8-pem", passphrase="test only", cipher_name="aes256-cbc"
    )
    return host_toml(hosts, "ok", identity=str(path))


def private_key_as_known_hosts(hosts: TestHosts, tmp_path: Path) -> str:
    return host_toml(hosts, "ok", known_hosts=str(hosts.identity))


def no_sftp(hosts: TestHosts, tmp_path: Path) -> str:
    return host_toml(hosts, "nosftp")


def root_login(hosts: TestHosts, tmp_path: Path) -> str:
    return host_toml(hosts, "rootdb", ssh=hosts.ssh_target("rootdb", "root"))


CASES: list[tuple[Callable[[TestHosts, Path], str], str]] = [
    (public_key, r"host ok: identity \S+\.pub is a public key: give the private key"),
    (not_a_key, r"host ok: identity \S+notes\.txt is not a private key"),
    (passphrase_key, r"host ok: identity \S+id_locked is protected by a passphrase.*ssh-add"),
    (
        private_key_as_known_hosts,
        r"host ok: known_hosts \S+id_ed25519 is not a known_hosts file: give .*ssh-keyscan",
    ),
    (no_sftp, r"host nosftp: sshd there refused SFTP .*Subsystem sftp internal-sftp"),
    (root_login, r"host rootdb: .*root.*PostgreSQL refuses to run as root.*unprivileged"),
]
IDS = [case.__name__ for case, _ in CASES]


def key_text(hosts: TestHosts) -> str:
    return hosts.identity.read_text().splitlines()[1][:24]


@pytest.mark.parametrize(("make", "expected"), CASES, ids=IDS)
def test_run_refuses_with_one_line_before_anything_starts(
    hosts: TestHosts,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[TestHosts, Path], str],
    expected: str,
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(plan_text(make(hosts, tmp_path)))
    results = tmp_path / "results"
    assert main(["run", str(plan_file), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert len(err.strip().splitlines()) == 1
    assert key_text(hosts) not in err  # no line of a key file is ever shown
    assert not (results / "results.db").exists()
    assert hosts.leftovers() == []


@pytest.mark.parametrize(("make", "expected"), CASES, ids=IDS)
def test_hosts_tells_the_same_problem(
    hosts: TestHosts,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[TestHosts, Path], str],
    expected: str,
) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(plan_text(make(hosts, tmp_path)))
    assert main(["hosts", str(plan_file)]) == 1
    out = capsys.readouterr().out
    assert re.search(expected, out), out
    assert out.startswith("cannot use: ") and len(out.strip().splitlines()) == 1
    assert main(["hosts", str(plan_file), "--json"]) == 1
    (found,) = json.loads(capsys.readouterr().out)
    assert re.search(expected, found["problem"]) and not found["usable"]
    assert found["reachable"] == (make in (no_sftp, root_login))


def test_a_root_login_may_serve_pgbench_or_an_external_server(
    hosts: TestHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Root is refused only where PostgreSQL would run as it."""
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        root_login(hosts, tmp_path)
        + '[[server]]\nname = "ext"\ndsn = "host=127.0.0.1 dbname=x"\nhost = "rootdb"\n'
    )
    assert main(["hosts", str(plan_file), "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert found["usable"] and found["problem"] is None


@pytest.mark.parametrize("field", ["identity", "known_hosts"])
def test_a_missing_file_is_a_plan_mistake_found_before_connecting(
    hosts: TestHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    plan_file = tmp_path / "plan.toml"
    missing = tmp_path / "nowhere" / "file"
    plan_file.write_text(plan_text(host_toml(hosts, "ok", **{field: str(missing)})))
    for argv in (
        ["hosts", str(plan_file)],
        ["run", str(plan_file), "--dry-run"],
        ["run", str(plan_file), "--results", str(tmp_path / "r")],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert re.search(rf"host\[0\]\.{field}: .*ok.*{missing}.* no such file", err), err
        assert "cannot reach" not in err and len(err.strip().splitlines()) == 1


def only_there(hosts: TestHosts, name: str) -> str:
    """A bin directory that exists on the host only (in its private home): symbolic links to
    its PostgreSQL 15's programs, which find their files through them."""
    host = RemoteHost(SshTarget(name, hosts.ssh_target(name), None, str(hosts.identity),
                             str(hosts.known_hosts)))  # fmt: skip
    try:
        script = "mkdir -p ~/pg/bin && ln -sf /usr/lib/postgresql/15/bin/* ~/pg/bin/ && echo ~/pg"
        return host.run(["sh", "-c", script], timeout=30).stdout.strip()
    finally:
        host.close()


@pytest.mark.parametrize(
    ("name", "install", "settings", "expected"),
    [
        # A path this machine has, the host not: refused, not taken from here.
        (
            "nopg",
            "/usr/lib/postgresql/15",
            "{}",
            r"no PostgreSQL server in /usr/lib/postgresql/15 on host nopg",
        ),
        # A path only the host has: found there, and its postgres asked there about a setting.
        ("ok", "THERE", '{ shared_bufers = "32MB" }', r'did you mean "shared_buffers"\?'),
    ],
)
def test_a_bin_path_is_resolved_and_probed_on_the_servers_host(
    hosts: TestHosts,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    install: str,
    settings: str,
    expected: str,
) -> None:
    require_installs("15")
    path = only_there(hosts, name) if install == "THERE" else install
    assert not Path(path).exists() or install != "THERE"
    text = plan_text(host_toml(hosts, name)) + f'install = "{path}"\nsettings = {settings}\n'
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(text)
    assert main(["run", str(plan_file), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert len(err.strip().splitlines()) == 1


def test_a_public_key_named_by_ssh_config_is_one_line_too(
    hosts: TestHosts,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No identity in the plan: the keys ssh would use (here ~/.ssh/config's IdentityFile,
    a public key)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(f"Host *\n  IdentityFile {hosts.identity}.pub\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    text = host_toml(hosts, "ok").replace(f'identity = "{hosts.identity}"\n', "")
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(plan_text(text))
    assert main(["run", str(plan_file), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"host ok: a key or ~/.ssh/config .* cannot be read .*identity", err), err
    assert len(err.strip().splitlines()) == 1
