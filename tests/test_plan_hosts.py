"""The [[host]] tables and who names them, checked before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.errors import PlanError
from pgbenchlab.plan import HostPlan

HOSTS = """
[[host]]
name = "db1"
ssh = "bench@10.0.0.5"
port = 2222
identity = "KEY"

[[host]]
name = "lg1"
ssh = "10.0.0.6"
"""


def parse(text: str, tmp_path: Path) -> plan.Plan:
    """The plan with KEY standing for an identity file that exists."""
    (tmp_path / "lab").write_text("a key\n")
    text = text.replace('"KEY"', f'"{tmp_path / "lab"}"')
    return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_hosts_servers_and_generators(tmp_path: Path) -> None:
    text = HOSTS + '[pgbench]\nhosts = ["lg1"]\n[[server]]\nname = "pg"\nhost = "db1"\n'
    parsed = parse(text, tmp_path)
    assert parsed.hosts[0] == HostPlan("db1", "bench@10.0.0.5", 2222, str(tmp_path / "lab"), None)
    assert parsed.pgbench_hosts == ("lg1",)
    assert parsed.servers[0].host == "db1"
    assert parsed.servers[0].install == "newest"  # its host's newest, not this machine's wheel
    assert not parsed.pgbench_keep_logs  # generators bring back their logs' reductions only


def test_an_external_server_may_name_its_host(tmp_path: Path) -> None:
    text = HOSTS + '[pgbench]\nkeep_logs = true\n[[server]]\nname = "x"\ndsn = "host=db"\n'
    parsed = parse(text + 'host = "db1"\n', tmp_path)
    assert (parsed.servers[0].host, parsed.servers[0].managed) == ("db1", False)
    assert parsed.pgbench_keep_logs


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[[server]]\nname = "pg"\nhost = "db9"\n', r'server\[0\].host: names host "db9"'),
        ('[pgbench]\nhosts = ["lg9"]\n', r'pgbench.hosts: names host "lg9"'),
        (
            '[pgbench]\nhosts = ["db1", "lg1"]\n[[server]]\nname = "pg"\nhost = "db1"\n'
            "[matrix]\nclients = [1, 4]\n",
            "2 load generators but a cell has 1 client",
        ),
        ('[pgbench]\nhosts = ["lg1"]\n', r"server\[0\].host: a managed server on this machine"),
        (
            '[[server]]\nname = "pg"\nhost = "db1"\ndata_dir = "rel/data"\n',
            "must be an absolute path on host db1",
        ),
        ('[[host]]\nname = "db1"\nssh = "x@y"\n', 'host name "db1" is used twice'),
        ('[[host]]\nname = "local"\nssh = "x@y"\n', "means this machine"),
        ('[[host]]\nname = "h"\nssh = "u:secret@y"\n', "must not hold a password"),
        ('[[host]]\nname = "h"\nssh = "y"\nport = 0\n', "must be 1 to 65535"),
        ('[[host]]\nname = "h"\nssh = "y"\nuser = "u"\n', 'unknown key "user"|user'),
        ('[pgbench]\nkeep_logs = "yes"\n', "pgbench.keep_logs: must be true or false"),
        (
            '[[host]]\nname = "h"\nssh = "y"\nknown_hosts = "/no/kh"\n',
            r"host\[2\].known_hosts: host h: /no/kh: no such file",
        ),
        (
            '[[host]]\nname = "h"\nssh = "y"\nidentity = "~/no-such-key"\n',
            r"host\[2\].identity: host h: /\S+/no-such-key: no such file",
        ),
        (
            '[build.b]\nsource = "git:/nowhere#main"\n'
            '[pgbench]\nhosts = ["lg1"]\ninstall = { build = "b" }\n'
            '[[server]]\nname = "pg"\nhost = "db1"\n',
            r"pgbench.install: a build's pgbench runs on this machine only: pgbench runs on lg1",
        ),
    ],
)
def test_mistakes_are_refused(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse(HOSTS + extra, tmp_path)


def test_threads_auto_counts_each_load_generators_cpus(tmp_path: Path) -> None:
    text = HOSTS + '[[server]]\nname = "pg"\nhost = "db1"\n[matrix]\nclients = [8]\n'
    two = text.replace("[[server]]", '[pgbench]\nhosts = ["db1", "lg1"]\n[[server]]')
    (tmp_path / "p.toml").write_text(parse(two, tmp_path).text)
    # 4 clients on each: db1 (2 CPUs) runs 2 threads, lg1 (8 CPUs) 4.
    told = plan.load(tmp_path / "p.toml", generator_cpus=(2, 8))
    assert [s.options.threads for s in told.specs] == [6] and told.counts_generator_cpus
    untold = plan.load(tmp_path / "p.toml", cpu_count=2)  # this machine's count stands in
    assert [s.options.threads for s in untold.specs] == [4]
    pinned = two.replace("[pgbench]\n", '[pgbench]\ncpus = "0"\n')
    assert [s.options.threads for s in parse(pinned, tmp_path).specs] == [2]
    assert not parse(pinned, tmp_path).counts_generator_cpus
    assert not parse(text, tmp_path).counts_generator_cpus  # pgbench runs here


def test_more_threads_than_clients_are_pgbenchs_to_lower(tmp_path: Path) -> None:
    text = HOSTS + '[[server]]\nname = "pg"\nhost = "db1"\n'
    parsed = parse(text + "[defaults]\nthreads = 8\n[matrix]\nclients = [1, 4]\n", tmp_path)
    assert {(s.clients, s.options.threads) for s in parsed.specs} == {(1, 8), (4, 8)}
