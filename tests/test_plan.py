"""Plan parsing, validation and expansion (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.errors import PlanError

BASE = """
[campaign]
name = "versions"
repeats = 2
order = "interleaved"

[defaults]
duration = "30s"
warmup = "5s"

[[server]]
name = "pg15"
install = "15"
settings = { shared_buffers = "1GB" }

[[server]]
name = "pg18"
install = "18"

[matrix]
scale = [10, 100]
workload = ["select-only", "tpcb-like"]
clients = [1, 4, 16]
"""


def parse(text: str, tmp_path: Path | None = None, cpus: int = 2) -> plan.Plan:
    return plan.parse(text, "plan.toml", base=tmp_path or Path("/nonexistent"), cpu_count=cpus)


def test_expands_full_matrix_interleaved() -> None:
    p = parse(BASE)
    assert len(p.specs) == 2 * 2 * 2 * 3 * 2
    first_round = p.specs[:24]
    assert {s.repeat for s in first_round} == {1}
    assert {(s.server, s.scale, s.workload.name, s.clients) for s in first_round} == {
        (s.server, s.scale, s.workload.name, s.clients) for s in p.specs[24:]
    }
    assert [s.sequence for s in p.specs] == list(range(48))
    # Same cell, different repeat: same cell id, different run key.
    twins = [
        s
        for s in p.specs
        if (s.server, s.scale, s.workload.name, s.clients) == ("pg15", 10, "select-only", 1)
    ]
    assert len({s.cell_id for s in twins}) == 1
    assert len({s.run_key for s in twins}) == 2


def test_threads_auto_is_min_of_clients_and_cpus() -> None:
    p = parse(BASE, cpus=2)
    assert {(s.clients, s.options.threads) for s in p.specs} == {(1, 1), (4, 2), (16, 2)}


def test_sequential_keeps_repeats_together_and_random_is_seeded() -> None:
    seq = parse(BASE.replace('"interleaved"', '"sequential"'))
    assert [s.repeat for s in seq.specs[:4]] == [1, 2, 1, 2]
    rnd_a = parse(BASE.replace('"interleaved"', '"random"\nseed = 7'))
    rnd_b = parse(BASE.replace('"interleaved"', '"random"\nseed = 7'))
    rnd_c = parse(BASE.replace('"interleaved"', '"random"\nseed = 8'))
    assert [s.run_key for s in rnd_a.specs] == [s.run_key for s in rnd_b.specs]
    assert [s.run_key for s in rnd_a.specs] != [s.run_key for s in rnd_c.specs]
    # Random order still runs each repeat round completely before the next.
    assert [s.repeat for s in rnd_a.specs] == [1] * 24 + [2] * 24


def test_per_server_and_per_workload_axes_override_matrix() -> None:
    text = BASE.replace(
        'name = "pg18"\ninstall = "18"', 'name = "pg18"\ninstall = "18"\nclients = [8]'
    ).replace(
        'workload = ["select-only", "tpcb-like"]',
        'workload = ["select-only", { builtin = "tpcb-like", clients = [2], vacuum = "all" }]',
    )
    p = parse(text)
    pg18 = {(s.workload.name, s.clients) for s in p.specs if s.server == "pg18"}
    assert pg18 == {("select-only", 8), ("tpcb-like", 2)}
    tpcb = [s for s in p.specs if s.workload.name == "tpcb-like"]
    assert {s.options.vacuum for s in tpcb} == {"all"}


def test_optional_axes_and_setting_variants() -> None:
    text = BASE + 'rate = [100, 200]\nlatency_limit = "10ms"\nconnect = [false, true]\n'
    text += '[matrix.setting]\ncheckpoint_timeout = ["30s", "5min"]\n'
    p = parse(text)
    assert len(p.specs) == 48 * 2 * 2 * 2
    spec = p.specs[0]
    assert spec.options.latency_limit_ms == 10.0
    assert {s.options.rate for s in p.specs} == {100.0, 200.0}
    assert {s.server_settings for s in p.specs} == {
        (("checkpoint_timeout", "30s"),),
        (("checkpoint_timeout", "5min"),),
    }


def test_custom_script_workload(tmp_path: Path) -> None:
    (tmp_path / "mine.sql").write_text(
        "\\set aid random(1, 100000 * :scale)\nUPDATE t SET x = 1;\n"
    )
    text = BASE.replace(
        'workload = ["select-only", "tpcb-like"]',
        'workload = [{ script = "mine.sql", weight = 2 }, { name = "mix", scripts = '
        '[{ builtin = "select-only", weight = 9 }, { script = "mine.sql" }] }]',
    )
    p = parse(text, tmp_path)
    names = {s.workload.name for s in p.specs}
    assert names == {"mine", "mix"}
    mine = next(s for s in p.specs if s.workload.name == "mine")
    assert mine.workload.scripts[0].weight == 2
    assert not mine.workload.updates_branches  # it updates no pgbench_branches row
    assert str(tmp_path) in mine.workload.scripts[0].name


def test_scale_below_clients_warns_for_updating_workloads() -> None:
    p = parse(BASE)
    assert any("scale 10 with 16 clients" in w for w in p.warnings)
    assert not any("select-only" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("workload", "warned"),
    [
        ('"tpcb-like"', True),
        ('"read-write"', True),
        ('"simple-update"', False),  # updates pgbench_accounts only: no branch row shared
        ('"select-only"', False),
        ('{ script = "branches.sql" }', True),
        ('{ script = "accounts.sql" }', False),
        ('{ scripts = [{ builtin = "select-only" }, { script = "branches.sql" }] }', True),
    ],
)
def test_branch_contention_is_warned_for_workloads_that_update_branch_rows(
    workload: str, warned: bool, tmp_path: Path
) -> None:
    (tmp_path / "branches.sql").write_text(
        "\\set bid random(1, :scale)\nupdate  PGBENCH_BRANCHES set bbalance = 0 where bid = :bid;\n"
    )
    (tmp_path / "accounts.sql").write_text(
        "\\set aid random(1, 100000 * :scale)\n"
        "UPDATE pgbench_accounts SET abalance = 0 WHERE aid = :aid;\n"
        "INSERT INTO pgbench_history (aid, delta) VALUES (:aid, 0);\n"
    )
    text = f"[defaults]\nduration = 60\n[matrix]\nscale = 1\nclients = 4\nworkload = [{workload}]\n"
    p = parse(text, tmp_path)
    assert p.specs[0].workload.updates_branches is warned
    assert bool(p.warnings) is warned


# 1,200 runs, 50 of them of tpcb-like (which updates branch rows) with scale < clients.
LARGE_MATRIX = """
[defaults]
duration = "5s"
[matrix]
scale = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
workload = ["tpcb-like", "simple-update", "select-only"]
clients = [16, 32, 64, 128, 256]
[matrix.setting]
work_mem = ["1MB", "2MB", "4MB", "8MB", "16MB", "32MB", "64MB", "128MB"]
"""


def test_warnings_are_one_line_per_kind_however_large_the_matrix() -> None:
    p = parse(LARGE_MATRIX)
    assert len(p.specs) == 1200
    assert len(p.warnings) == 2  # tpcb-like (simple-update shares no branch row), short runs
    tpcb = next(w for w in p.warnings if w.startswith("tpcb-like"))
    assert "in 50 combination(s) (scale 1 with 16 clients, scale 1 with 32 clients, " in tpcb


def test_external_server_keeps_password_out_of_repr() -> None:
    text = BASE + '\n[[server]]\nname = "ext"\ndsn = "host=db1 user=u password=hunter2"\n'
    p = parse(text)
    assert "hunter2" not in repr(p.servers)


def test_cell_identity_ignores_repeat_and_order_but_not_options() -> None:
    a = parse(BASE)
    b = parse(BASE.replace('"interleaved"', '"sequential"'))
    assert {s.run_key for s in a.specs} == {s.run_key for s in b.specs}
    c = parse(BASE.replace('duration = "30s"', 'duration = "31s"'))
    assert not {s.cell_id for s in a.specs} & {s.cell_id for s in c.specs}


def test_max_tries_is_an_option_that_leaves_default_cells_alone() -> None:
    plain, explicit = parse(BASE), parse(BASE.replace("[defaults]", "[defaults]\nmax_tries = 1"))
    assert [s.cell_id for s in plain.specs] == [s.cell_id for s in explicit.specs]
    retrying = parse(BASE.replace("[defaults]", "[defaults]\nmax_tries = 0"))
    assert {s.options.max_tries for s in retrying.specs} == {0}
    assert not {s.cell_id for s in plain.specs} & {s.cell_id for s in retrying.specs}
    limited = "[defaults]\ntransactions = 10\nmax_tries = 0\n[matrix]\nlatency_limit = [50]"
    assert parse(limited).specs[0].options.max_tries == 0  # -L bounds the retries


def test_dry_run_estimate_counts_warmups() -> None:
    p = parse(BASE)
    assert p.estimated_seconds(per_run_overhead=0) == 48 * 35


BAD_PLANS = [
    ("[campain]\nname = 'x'", "campain", 'did you mean "campaign"'),
    ("[campaign]\nrepeats = 0", "campaign.repeats", "positive whole number"),
    ("[campaign]\nrepeats = 'three'", "campaign.repeats", "positive whole number"),
    ("[campaign]\norder = 'interleave'", "campaign.order", 'did you mean "interleaved"'),
    ("[campaign]\nname = 'a b'", "campaign.name", "letters"),
    ("[defaults]\nduration = '0s'", "duration", "> 0"),
    ("[defaults]\nduration = '-5s'", "duration", "whole number of seconds"),
    ("[defaults]\nduration = '1.5s'", "duration", "whole number of seconds"),
    ("[defaults]\nduration = '10s'\ntransactions = 100", "transactions", "not both"),
    ("[defaults]\nwarmup = 'soon'", "warmup", "whole number of seconds"),
    # pgbench's -L truncates to whole microseconds, and takes 0 as no limit at all
    ("[matrix]\nlatency_limit = ['0.0001ms']", "latency_limit", "whole number of microseconds"),
    ("[matrix]\nlatency_limit = [1.5e-3]", "latency_limit", "whole number of microseconds"),
    ("[defaults]\nprotocol = 'pipeline'", "protocol", "one of simple, extended, prepared"),
    ("[defaults]\nthreads = 0", "threads", "positive whole number"),
    ("[defaults]\nvacuum = 'full'", "vacuum", "one of pgbench, all, none"),
    ("[defaults]\nlatency_log = 2.0", "latency_log", "(0, 1]"),
    ("[defaults]\nreinit = 'always'", "reinit", "one of never"),
    ("[defaults]\nmax_tries = -1", "max_tries", "whole number ≥ 0"),
    ("[defaults]\nmax_tries = '3'", "max_tries", "whole number ≥ 0"),
    ("[defaults]\ntransactions = 10\nmax_tries = 0", "max_tries", "needs a duration"),
    ("[defaults]\ncheckpoint = 'yes'", "checkpoint", "true or false"),
    ("[defaults]\nduraton = '10s'", "defaults.duraton", 'did you mean "duration"'),
    ("[matrix]\nclients = [0]", "clients", "positive whole number"),
    ("[matrix]\nclients = []", "clients", "empty"),
    ("[matrix]\nscale = [-1]", "scale", "positive whole number"),
    ("[matrix]\nworkload = ['select-onyl']", "matrix.workload[0]", 'did you mean "select-only"'),
    ("[matrix]\nworkload = [{ script = 'missing.sql' }]", "script", "cannot read script file"),
    (
        "[matrix]\nworkload = [{ builtin = 'select-only', script = 'x.sql' }]",
        "workload",
        "exactly one",
    ),
    (
        "[matrix]\nworkload = [{ scripts = [{ builtin = 'select-only', weight = 0 }] }]",
        "workload",
        "must not be zero",
    ),
    ("[matrix]\nworkload = [{ builtin = 'select-only', weight = -1 }]", "weight", "≥ 0"),
    ("[matrix]\nrate = [-5]", "rate", "positive number"),
    ("[matrix]\nlatency_limit = ['fast']", "latency_limit", "latency"),
    ("[matrix]\nconnect = ['no']", "connect", "true or false"),
    ("[matrix]\nfoo = [1]", "matrix.foo", "unknown key"),
    ("[[server]]\nname = 'a'\ninstall = '15'\nport = 5432", "server[0].port", "unknown key"),
    (
        "[[server]]\nname = 'a'\ninstall = '15'\nsettings = { port = '5432' }",
        "settings.port",
        "managed by pgbenchlab",
    ),
    ("[[server]]\nname = 'a'\ndsn = 'host=x'\ninstall = '15'", "server[0]", "not both"),
    (
        "[[server]]\nname = 'a'\ndsn = 'host=x'\nsettings = { work_mem = '4MB' }",
        "settings",
        "managed servers only",
    ),
    (
        "[[server]]\nname = 'a'\ndsn = 'host=x'\nsetting = { work_mem = ['4MB'] }",
        "setting",
        "managed server",
    ),
    ("[[server]]\nname = 'a'\n[[server]]\nname = 'a'", "server[1].name", "used twice"),
    ("[[server]]\ninstall = '15'", "server[0].name", "must start with a letter or digit"),
    # Names become directories: none may be "." or ".." or hidden.
    ("[campaign]\nname = '..'", "campaign.name", "must start with a letter or digit"),
    ("[campaign]\nname = '.'", "campaign.name", "must start with a letter or digit"),
    ("[campaign]\nname = '.hidden'", "campaign.name", "must start with a letter or digit"),
    ("[[server]]\nname = '..'", "server[0].name", "must start with a letter or digit"),
    ("[[server]]\nname = 'a/b'", "server[0].name", "must start with a letter or digit"),
    # TOML reads nan and inf as numbers: none is a number a plan may hold.
    ("[matrix]\nrate = [100, nan]", "matrix.rate[1]", "finite number"),
    ("[defaults]\nrate = inf", "defaults.rate", "finite number"),
    ("[matrix]\nlatency_limit = -inf", "matrix.latency_limit", "finite number"),
    ("[defaults]\nlatency_log = nan", "defaults.latency_log", "finite number"),
    ("[matrix]\nworkload = [{ builtin = 'select-only', weight = inf }]", "weight", "finite"),
    ("[[server]]\nname = 'a'\ninit = 'yes'", "server[0].init", "true or false"),
    ("[[server]]\nname = 'a'\ndescription = 1", "server[0].description", "must be a string"),
    ("server = 'x'", "server", "[[server]]"),
    ("[matrix.setting]\nport = ['1']", "setting.port", "managed by pgbenchlab"),
    ("[pgbench]\nbinary = 'x'", "pgbench.binary", "unknown key"),
    ("not toml at all [", "plan.toml", "not valid TOML"),
]


@pytest.mark.parametrize(("text", "where", "message"), BAD_PLANS)
def test_bad_plans_name_the_key_and_the_fix(text: str, where: str, message: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse(text)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("plan.toml")
    assert where in line, line
    assert message in line, line


def test_missing_plan_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot read the plan file"):
        plan.load(tmp_path / "nope.toml")


def test_example_plans_are_valid() -> None:
    examples = Path(__file__).parent.parent / "examples"
    files = sorted(examples.glob("*.toml"))
    assert files, "examples/ has plan files"
    for file in files:
        assert plan.load(file).specs


def test_a_workload_chooses_its_own_run_length_and_errors_name_the_key_written() -> None:
    counted = (
        '[defaults]\nduration = "30s"\n[matrix]\n'
        'workload = [{ builtin = "tpcb-like", transactions = 100 }, "select-only"]\n'
    )
    p = parse(counted)
    by_name = {s.workload.name: s.options for s in p.specs}
    assert (by_name["tpcb-like"].transactions, by_name["tpcb-like"].duration_s) == (100, None)
    assert (by_name["select-only"].transactions, by_name["select-only"].duration_s) == (None, 30)
    both = '[matrix]\nworkload = [{ builtin = "tpcb-like", transactions = 100, duration = "5s" }]\n'
    with pytest.raises(PlanError, match=r"matrix\.workload\[0\]\.transactions: give"):
        parse(both)
    in_defaults = "[defaults]\nduration = 5\ntransactions = 9\n"
    with pytest.raises(PlanError, match=r"plan\.toml: defaults\.transactions: give"):
        parse(in_defaults)


def test_relative_paths_are_the_plan_directorys_wherever_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "plans"
    (here / "pg" / "bin").mkdir(parents=True)
    (here / "s.sql").write_text("SELECT 1;\n")
    (here / "p.patch").write_text("x\n")
    (here / "keys").mkdir()
    (here / "keys" / "id").write_text("a key file\n")  # the plan check wants the files to exist
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "kh").write_text("")
    (here / "plan.toml").write_text(
        '[pgbench]\ninstall = "pg/bin"\n'
        '[[host]]\nname = "h"\nssh = "h1"\nidentity = "keys/id"\nknown_hosts = "~/kh"\n'
        '[[server]]\nname = "local"\ninstall = "pg/bin"\ndata_dir = "data"\n'
        '[[server]]\nname = "there"\nhost = "h"\ninstall = "/usr/lib/postgresql/15/bin"\n'
        '[[server]]\nname = "built"\ninstall = { build = "b" }\n'
        '[build.b]\nsource = "tar:src.tar.gz"\ncompiler = "cc/gcc"\npatches = ["p.patch"]\n'
        '[matrix]\nworkload = [{ script = "s.sql" }]\n'
    )
    monkeypatch.chdir(tmp_path)  # not the plan's directory
    p = plan.load("plans/plan.toml")
    servers = {s.name: s for s in p.servers}
    assert servers["local"].install == str(here / "pg" / "bin")
    assert p.pgbench_install == str(here / "pg" / "bin")
    assert servers["local"].data_dir == str(here / "data")
    assert servers["there"].install == "/usr/lib/postgresql/15/bin"  # a path on that host
    (host,) = p.hosts
    assert (host.identity, host.known_hosts) == (str(here / "keys" / "id"), str(Path.home() / "kh"))
    (build,) = p.builds
    assert build.source == f"tar:{here / 'src.tar.gz'}"
    assert (build.compiler, build.patches) == (str(here / "cc" / "gcc"), (str(here / "p.patch"),))
    assert p.specs[0].workload.scripts[0].name == str(here / "s.sql")


def test_a_quick_plan_is_not_told_its_runs_are_short(tmp_path: Path) -> None:
    body = '[defaults]\nduration = "2s"\n[matrix]\nscale = [1]\nworkload = ["tpcb-like"]\n'
    body += "clients = [4]\n"
    told = plan.parse(body, "p.toml", base=tmp_path).warnings
    quick = plan.parse("[campaign]\nquick = true\n" + body, "p.toml", base=tmp_path).warnings
    assert any("are short" in w for w in told)
    assert not any("are short" in w for w in quick)
    assert any("scale < clients" in w for w in quick)  # only the run length is its to waive
    with pytest.raises(PlanError, match=r"campaign\.quick"):
        plan.parse('[campaign]\nquick = "yes"\n' + body, "p.toml", base=tmp_path)
