"""Study templates (`pgbenchlab new`): every template is a valid plan for the machine facts
given, its sizes follow those facts, mistakes are one line and exit 2, and each --quick
variant runs end to end on this machine."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from cli_process import run_cli
from pgbenchlab import plan
from pgbenchlab.cli import build_parser
from pgbenchlab.errors import UserError
from pgbenchlab.store import Store
from pgbenchlab.studies import (
    STUDIES,
    BuildFact,
    InstallFact,
    MachineFacts,
    StudyOptions,
    gather,
    render,
)
from pgbenchlab.studies.facts import free_per_directory
from pgbenchlab.studies.sizing import BYTES_PER_SCALE, Scale, disk_needed
from support import require_installs

GIB = 1024**3
MIB = 1024**2
INSTALLS = (InstallFact("embedded-18", "18"), InstallFact("debian-15", "15"))
SMALL = MachineFacts(1, 1 * GIB, 200 * GIB, INSTALLS[:1])
LAPTOP = MachineFacts(2, 8 * GIB, 100 * GIB, INSTALLS, (BuildFact("debian:postgresql-13", "13"),))
BIG = MachineFacts(64, 512 * GIB, 20 * 1024 * GIB, INSTALLS)
TIGHT_DISK = MachineFacts(8, 32 * GIB, 40 * GIB, INSTALLS)
# Each scale alone fits its 60 GiB; the datasets of its three servers together do not.
SHARED_DISK = replace(LAPTOP, disk_free_bytes=60 * GIB)
MACHINES = {
    "small": SMALL,
    "laptop": LAPTOP,
    "big": BIG,
    "tight-disk": TIGHT_DISK,
    "shared-disk": SHARED_DISK,
}


def git_repo(path: Path) -> Path:
    """A one-commit repository (branch master) whose tree looks like PostgreSQL's."""
    if not path.exists():
        path.mkdir()
        (path / "configure").write_text("PACKAGE_VERSION='17.2'\n")
        git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
        for step in (["init", "-q", "-b", "master"], ["add", "."], ["commit", "-qm", "tree"]):
            subprocess.run([*git, *step], check=True)
    return path


def options(study: str, tmp_path: Path, *, quick: bool = False) -> StudyOptions:
    if study != "patch":
        return StudyOptions(quick=quick)
    patch = tmp_path / "0001-fix.patch"
    patch.write_text("--- a/x\n+++ b/x\n")
    source = f"git:{git_repo(tmp_path / 'postgresql')}"
    return StudyOptions(quick=quick, source=source, base="master", patches=(patch,))


def parsed(text: str, tmp_path: Path, cpus: int) -> plan.Plan:
    return plan.parse(text, "study.toml", base=tmp_path, cpu_count=cpus)


@pytest.mark.parametrize("machine", sorted(MACHINES))
@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_template_is_a_valid_commented_plan_stating_its_time(
    study: str, quick: bool, machine: str, tmp_path: Path
) -> None:
    facts = MACHINES[machine]
    text = render(study, facts, options(study, tmp_path, quick=quick))
    the_plan = parsed(text, tmp_path, facts.cpus)
    assert the_plan.specs
    assert text.startswith(f"# pgbenchlab study {study}")
    estimate = re.search(r"# Estimated time: .* for (\d+) runs", text)
    assert estimate and int(estimate[1]) == len(the_plan.specs)
    assert "PENDING" not in text  # every key a study wants exists now
    if quick:
        assert all(s.options.duration_s == 2 for s in the_plan.specs)
        # scale 1, or as many branch rows as clients for a workload that updates them
        least = max((s.clients for s in the_plan.specs if s.workload.updates_branches), default=1)
        assert {s.scale for s in the_plan.specs} == {least}
        assert the_plan.estimated_seconds() < 60
        assert the_plan.repeats == 1 and the_plan.auto is None
        assert not any(s.profiled for s in the_plan.specs)  # runs where perf cannot
    else:
        assert all((s.options.duration_s or 0) >= 60 for s in the_plan.specs)
        assert the_plan.auto is not None and 'repeats "auto": later rounds' in text
        profiled = any(s.profiled for s in the_plan.specs)
        assert profiled == (study in ("scalability", "patch"))


def settings_of(text: str) -> dict[str, object]:
    return dict(tomllib.loads(text)["server"][0]["settings"])


def size(setting: object) -> int:
    number, unit = re.fullmatch(r"(\d+)(MB|GB)", str(setting)).groups()  # type: ignore[union-attr]
    return int(number) * (GIB if unit == "GB" else MIB)


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_archaeology_sizes_follow_memory_cpus_and_disk(machine: str, tmp_path: Path) -> None:
    facts = MACHINES[machine]
    text = render("archaeology", facts, StudyOptions())
    data = tomllib.loads(text)
    shared_buffers = size(settings_of(text)["shared_buffers"])
    assert shared_buffers == min(16 * GIB, max(128 * MIB, facts.memory_bytes // 4))
    scales = data["matrix"]["scale"]
    in_ram = re.search(r"scale (\d+): .*, in RAM", text)
    assert in_ram
    small, medium = scales[0] * BYTES_PER_SCALE, int(in_ram[1]) * BYTES_PER_SCALE
    assert small <= shared_buffers < 2 * small + 2 * BYTES_PER_SCALE  # fits, and fills it
    assert small < medium <= facts.memory_bytes / 2
    beyond = re.search(r"scale (\d+): .*, beyond RAM", text)
    assert beyond and int(beyond[1]) * BYTES_PER_SCALE >= 2 * facts.memory_bytes - BYTES_PER_SCALE
    if machine in ("tight-disk", "shared-disk"):  # beyond RAM does not fit: warned, left out
        assert re.search(r"WARNING: scale \d+ \(beyond RAM\) needs .* free: left out", text)
        # 40 GiB free: the datasets in RAM of both servers (2 × 24 GiB with room) left out too
        assert len(scales) == (1 if machine == "tight-disk" else 2)
    else:
        assert "WARNING" not in text and len(scales) == 3
    clients = data["matrix"]["clients"]
    assert clients[0] == 1 and clients[-1] == 8 * facts.cpus
    the_plan = parsed(text, tmp_path, facts.cpus)
    assert all(s.options.threads == min(s.clients, facts.cpus) for s in the_plan.specs)
    servers = [s.name for s in the_plan.servers]
    majors = [i.major for i in facts.installs] + [b.major for b in facts.builds]
    oldest_first = sorted(majors, key=lambda m: tuple(int(p) for p in m.split(".")))
    assert servers == [f"pg{m}" for m in oldest_first]
    assert the_plan.pgbench_install == "newest"


def test_runs_span_checkpoints_and_connections_fit_the_ladder(tmp_path: Path) -> None:
    for study in ("archaeology", "latency", "tuning", "patch"):
        text = render(study, BIG, options(study, tmp_path))
        timeout = int(str(settings_of(text)["checkpoint_timeout"]).removesuffix("s"))
        the_plan = parsed(text, tmp_path, BIG.cpus)
        assert min(s.options.duration_s or 0 for s in the_plan.specs) >= 3 * timeout
    text = render("scalability", BIG, StudyOptions())
    clients = tomllib.loads(text)["matrix"]["clients"]
    assert clients[-1] == 8 * BIG.cpus >= 256
    assert int(str(settings_of(text)["max_connections"])) > clients[-1]


def test_platform_and_tuning_put_data_directories_on_the_storage_given(tmp_path: Path) -> None:
    dirs = (tmp_path / "ssd", tmp_path / "nvme")
    platform = tomllib.loads(render("platform", LAPTOP, StudyOptions(data_dirs=dirs)))
    assert [s.get("data_dir") for s in platform["server"]] == [str(d) for d in dirs]
    assert platform["matrix"]["clients"] == [1, 8]  # 1, 10, 20 … capped at 4 × CPUs
    assert tomllib.loads(render("platform", BIG, StudyOptions()))["matrix"]["clients"] == [
        1, *range(10, 251, 10), 256,
    ]  # fmt: skip
    tuning = tomllib.loads(render("tuning", LAPTOP, StudyOptions(data_dirs=dirs[:1])))
    assert [s["name"] for s in tuning["server"]] == [
        "baseline", "spread-checkpoints", "filesystem1",
    ]  # fmt: skip


def test_each_tuning_test_set_says_what_changed_in_the_plan(tmp_path: Path) -> None:
    given = StudyOptions(data_dirs=(tmp_path / "xfs",))
    servers = parsed(render("tuning", LAPTOP, given), tmp_path, LAPTOP.cpus).servers
    said = {s.name: s.description for s in servers}
    assert said == {
        "baseline": "the settings every other set starts from",
        "spread-checkpoints": "a setting: checkpoint_timeout 60s → 5min and "
        "checkpoint_completion_target 0.9: checkpoints five times rarer, spread over 90 % of "
        "the interval (fewer full-page writes, smoother I/O)",
        "filesystem1": f"a file system: the data directory on {tmp_path / 'xfs'}",
    }


def test_scalability_pins_pgbench_apart_from_the_server_from_4_cpus(tmp_path: Path) -> None:
    big = parsed(render("scalability", BIG, StudyOptions()), tmp_path, BIG.cpus)
    assert (big.servers[0].cpus, big.pgbench_cpus) == ("0-47", "48-63")
    tight = parsed(render("scalability", TIGHT_DISK, StudyOptions()), tmp_path, 8)
    assert (tight.servers[0].cpus, tight.pgbench_cpus) == ("0-5", "6-7")
    text = render("scalability", LAPTOP, StudyOptions())
    laptop = parsed(text, tmp_path, LAPTOP.cpus)
    assert (laptop.servers[0].cpus, laptop.pgbench_cpus) == (None, None)
    assert "# Not pinned: below 4 CPUs" in text


def connecting(the_plan: plan.Plan) -> set[tuple[str, bool]]:
    specs = [s for s in the_plan.specs if s.workload.name == "connecting"]
    assert all(s.options.rate is None for s in specs)  # at full speed: costs are measured
    return {(s.options.connection, s.options.connect) for s in specs}


def test_latency_connects_over_tls_where_an_installation_can(tmp_path: Path) -> None:
    text = render("latency", LAPTOP, StudyOptions())
    without = parsed(text, tmp_path, LAPTOP.cpus)
    assert connecting(without) == {(k, c) for k in ("socket", "tcp") for c in (False, True)}
    assert '# no "tls": no installation here (embedded-18, debian-15) has a server' in text
    with_tls = replace(LAPTOP, installs=(INSTALLS[0], replace(INSTALLS[1], tls=True)))
    for quick in (False, True):
        text = render("latency", with_tls, StudyOptions(quick=quick))
        the_plan = parsed(text, tmp_path, LAPTOP.cpus)
        kinds = ("socket", "tcp", "tls")
        assert connecting(the_plan) == {(k, c) for k in kinds for c in (False, True)}
        assert the_plan.servers[0].install == "debian-15"  # the newest that can
        assert "# the newest with TLS (embedded-18: none)" in text and 'no "tls"' not in text
        rated = [s for s in the_plan.specs if s.workload.name == "at-rates"]
        assert rated and all(s.options.rate and s.options.latency_limit_ms for s in rated)
        assert {s.options.connection for s in rated} == {"socket"}
    platform = parsed(render("platform", LAPTOP, StudyOptions(quick=True)), tmp_path, 2)
    assert {s.options.connection for s in platform.specs} == {"tcp"}


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_tuning_sets_the_dirty_background_tunable_only_as_root(quick: bool, tmp_path: Path) -> None:
    given = StudyOptions(quick=quick)
    as_root = parsed(render("tuning", replace(LAPTOP, root=True), given), tmp_path, 2)
    assert as_root.sysctl_names == ("vm.dirty_background_bytes",)
    assert {dict(s.sysctl)["vm.dirty_background_bytes"] for s in as_root.specs} == {
        "0", "67108864",
    }  # fmt: skip
    text = render("tuning", LAPTOP, given)
    assert parsed(text, tmp_path, 2).sysctl_names == ()
    assert "# Kernel tunables need root" in text
    assert '# "vm.dirty_background_bytes" = [0, 67108864]' in text


def test_patch_has_a_base_build_and_one_build_per_patch(tmp_path: Path) -> None:
    patches = []
    for name in ("0001-faster-sort.patch", "0002 other.diff"):
        (tmp_path / name).write_text("x\n")
        patches.append(tmp_path / name)
    source = f"git:{git_repo(tmp_path / 'pg')}"
    given = StudyOptions(source=source, base="master", patches=tuple(patches))
    the_plan = parsed(render("patch", LAPTOP, given), tmp_path, LAPTOP.cpus)
    builds = {b.name: b for b in the_plan.builds}
    assert builds["base"].ref == "master" and not builds["base"].patches
    assert builds["0001-faster-sort"].patches == (str(patches[0]),)
    assert builds["0002-other"].patches == (str(patches[1]),)
    assert [s.name for s in the_plan.servers] == ["base", "0001-faster-sort", "0002-other"]
    assert {s.workload.name for s in the_plan.specs} == {"select-only", "tpcb-like"}


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_archaeology_plans_every_major_asked_for(quick: bool, tmp_path: Path) -> None:
    """Installed majors by name, a cached build by its source, any other as prebuilt binaries;
    oldest first, every one even in a quick study; what is left out said in comments."""
    asked = ("18", "9.6", "13", "10", "15", "12")
    text = render("archaeology", LAPTOP, StudyOptions(quick=quick, majors=asked))
    the_plan = parsed(text, tmp_path, LAPTOP.cpus)
    servers = {s.name: s for s in the_plan.servers}
    assert list(servers) == ["pg9.6", "pg10", "pg12", "pg13", "pg15", "pg18"]
    installs = {s["name"]: s["install"] for s in tomllib.loads(text)["server"]}
    assert installs["pg18"] == "embedded-18" and installs["pg15"] == "debian-15"
    assert installs["pg13"] == {"build": "pg13"}  # the cached build, not a download
    assert [installs[n] for n in ("pg9.6", "pg10", "pg12")] == [
        {"binaries": "9.6"},
        {"binaries": "10"},
        {"binaries": "12"},
    ]
    assert "Left out, and why: majors before 9.6" in text
    if not quick:
        assert tomllib.loads(text)["matrix"]["clients"][-1] == 8 * LAPTOP.cpus


def test_new_archaeology_takes_majors_on_the_command_line(tmp_path: Path) -> None:
    done = run_cli("new", "archaeology", "--quick", "--majors", "9.6, 11,13", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = [s["name"] for s in tomllib.loads(done.stdout)["server"]]
    assert names == ["pg9.6", "pg11", "pg13"]


@pytest.mark.parametrize(
    ("study", "given", "message"),
    [
        ("nonsense", StudyOptions(), "unknown study 'nonsense'; choose one of: archaeology"),
        ("patch", StudyOptions(), "new patch needs --source"),
        ("patch", StudyOptions(source="/src", patches=(Path("x"),)), "give a git checkout"),
        ("patch", StudyOptions(source="git:/s", patches=(Path("/no/such"),)), "no such file"),
        ("latency", StudyOptions(base="master"), "belong to `new patch`"),
        ("archaeology", StudyOptions(data_dirs=(Path("/x"),)), "--data-dir belongs"),
        ("latency", StudyOptions(majors=("13",)), "--majors belongs to `new archaeology`"),
        ("archaeology", StudyOptions(majors=("9.5",)), "--majors 9.5: not a major"),
        ("archaeology", StudyOptions(majors=("13", "13")), "--majors: 13 given twice"),
    ],
)
def test_mistakes_are_user_errors(study: str, given: StudyOptions, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        render(study, LAPTOP, given)


def test_cli_mistake_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_cli("new", "nonsense", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "pgbenchlab: error: unknown study 'nonsense'; choose one of: archaeology, latency, "
        "platform, tuning, scalability, patch"
    ]


RUN_APART = {"patch", "latency"}


@pytest.mark.server
@pytest.mark.alone  # as root, the tuning study sets a kernel tunable (beside the tunables tests)
def test_each_quick_study_runs_end_to_end_on_this_machine(
    tmp_path: Path, results_dir: Path
) -> None:
    """`new STUDY --quick` for this machine, then `run`: every run ok (the patch study builds
    PostgreSQL twice, minutes: its plan is checked above instead; latency runs below)."""
    results = results_dir  # its clusters removed afterwards
    started = time.monotonic()
    for study in sorted(set(STUDIES) - RUN_APART):
        made = run_cli("new", study, "--quick", "--results", results, cwd=tmp_path)
        assert made.returncode == 0, made.stderr
        plan_file = tmp_path / f"{study}.toml"
        plan_file.write_text(made.stdout)
        done = run_cli("run", plan_file, "--results", results, "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 300
    with Store.existing(results / "results.db") as store:
        campaigns = {s.campaign.name: s.campaign.id for s in store.campaign_summaries()}
        assert sorted(campaigns) == sorted(f"{s}-quick" for s in STUDIES if s not in RUN_APART)
        for campaign_id in campaigns.values():
            runs = store.run_records(campaign_id)
            assert runs and {r.status for r in runs} == {"ok"}
    for form in ("markdown", "html"):  # the test sets' descriptions, in the plan's words
        shown = tmp_path / f"tuning.{form}"
        report = ["report", "--results", results, "--campaign", "tuning-quick", "-o", shown]
        assert run_cli(*report, "--format", form, cwd=tmp_path).returncode == 0
        assert "the settings every other set starts from" in shown.read_text()
    markdown = (tmp_path / "tuning.markdown").read_text()
    assert "  - spread-checkpoints: a setting: checkpoint\\_timeout 30s → 150s" in markdown
    assert '<th scope="row">what it is</th>' in (tmp_path / "tuning.html").read_text()


@pytest.mark.server
def test_quick_latency_connects_over_tls_here_and_reports_its_cost(
    tmp_path: Path, results_dir: Path
) -> None:
    """This machine's Debian 15 serves TLS: the quick latency plan runs -C over the socket,
    TCP and TLS, and its report gives what TLS costs on top of a new TCP connection."""
    require_installs("15")
    results = results_dir  # its clusters removed afterwards
    started = time.monotonic()
    made = run_cli("new", "latency", "--quick", "--results", results, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert 'connection = ["socket", "tcp", "tls"]' in made.stdout
    (tmp_path / "latency.toml").write_text(made.stdout)
    done = run_cli("run", tmp_path / "latency.toml", "--results", results, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = ["report", "--results", results, "--format", "markdown", "-o", tmp_path / "l.md"]
    assert run_cli(*report, cwd=tmp_path).returncode == 0
    assert time.monotonic() - started < 120
    with Store.existing(results / "results.db") as store:
        (listed,) = store.campaign_summaries()
        runs = store.run_records(listed.campaign.id)
    assert {r.status for r in runs} == {"ok"}
    over_tls = [r for r in runs if r["connection"] == "tls"]
    assert len(over_tls) == 2 and all(str(r["tls_protocol"]).startswith("TLSv1.") for r in over_tls)
    markdown = (tmp_path / "l.md").read_text()
    assert "### Connection cost per transaction" in markdown
    (tls_row,) = [line for line in markdown.splitlines() if "TLS on top of a new TCP" in line]
    assert "connecting" in tls_row


def test_new_options_from_the_command_line() -> None:
    argv = "new patch --quick --source git:/pg --base master --patch a.patch --patch b.patch"
    args = build_parser().parse_args(argv.split())
    built = args.options_from(args)
    assert built.study == "patch"
    assert built.study_options == StudyOptions(
        quick=True,
        source="git:/pg",
        base="master",
        patches=(Path("a.patch"), Path("b.patch")),
    )


def datasets_bytes(the_plan: plan.Plan) -> int:
    """The disk the plan's datasets need at once: every scale on every server."""
    held = {(s.server, s.scale) for s in the_plan.specs}
    return sum(disk_needed(Scale(scale, "")) for _, scale in held)


@pytest.mark.parametrize("machine", sorted(MACHINES))
@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_dataset_of_a_study_fits_the_free_disk_at_once(
    study: str, machine: str, tmp_path: Path
) -> None:
    facts = MACHINES[machine]
    the_plan = parsed(render(study, facts, options(study, tmp_path)), tmp_path, facts.cpus)
    assert datasets_bytes(the_plan) <= facts.disk_free_bytes


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
@pytest.mark.parametrize("study", sorted(STUDIES))
def test_no_template_warns_about_itself_on_this_machine(
    study: str, quick: bool, tmp_path: Path
) -> None:
    """The plan check's warnings point at mistakes; a template makes none (a quick study says
    it is quick, so its 2 s runs are no mistake)."""
    facts = gather([tmp_path])
    the_plan = parsed(
        render(study, facts, options(study, tmp_path, quick=quick)), tmp_path, facts.cpus
    )
    assert the_plan.quick == quick
    assert the_plan.warnings == ()


def test_the_dirty_background_comment_says_what_0_means() -> None:
    for facts in (LAPTOP, replace(LAPTOP, root=True)):
        text = render("tuning", facts, StudyOptions())
        assert "first dirty page" not in text
        assert "0: the kernel uses vm.dirty_background_ratio instead" in text


def test_data_directories_are_directories_given_once(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(UserError, match=f"--data-dir {a_file}: not a directory"):
        render("platform", LAPTOP, StudyOptions(data_dirs=(a_file,)))
    twice = (tmp_path / "ssd", tmp_path / "x" / ".." / "ssd")
    with pytest.raises(UserError, match=r"--data-dir .*ssd: given twice"):
        render("tuning", LAPTOP, StudyOptions(data_dirs=twice))
    done = run_cli("new", "platform", "--data-dir", a_file, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and "not a directory" in done.stderr


def test_patch_refuses_a_missing_source_or_ref_and_writes_paths_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path / "pg")
    (tmp_path / "fix.patch").write_text("x\n")
    monkeypatch.chdir(tmp_path)  # command-line paths are relative to the working directory
    given = StudyOptions(source="git:pg", base="master", patches=(Path("fix.patch"),))
    the_plan = parsed(render("patch", LAPTOP, given), tmp_path / "elsewhere", LAPTOP.cpus)
    base = next(b for b in the_plan.builds if b.name == "base")
    assert base.source == f"git:{tmp_path / 'pg'}"
    assert next(b for b in the_plan.builds if b.name == "fix").patches == (
        str(tmp_path / "fix.patch"),
    )
    for source, ref, message in (
        ("git:no-such-repo", "master", "does not exist"),
        ("git:pg", "no-such-branch", 'ref "no-such-branch" is not a commit'),
    ):
        wrong = replace(given, source=source, base=ref)
        with pytest.raises(UserError, match=message):
            render("patch", LAPTOP, wrong)
    argv = ("new", "patch", "--source", "git:pg", "--base", "nope", "--patch", "fix.patch")
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and "nope" in done.stderr


def test_free_disk_is_counted_for_every_data_directory(tmp_path: Path) -> None:
    """Several --data-dir: each needs the datasets; those on one file system share its free
    space, and the least any one can count on is what a template plans with."""
    here = shutil.disk_usage(tmp_path).free
    alone = free_per_directory([tmp_path / "a"])  # not made yet: its nearest parent counts
    assert abs(alone - here) <= here * 0.01
    shared = free_per_directory([tmp_path / "a", tmp_path / "b"])
    assert abs(shared - here / 2) <= here * 0.01
    memory = Path("/dev/shm")  # another file system (tmpfs), in CI as here
    assert memory.stat().st_dev != tmp_path.stat().st_dev
    apart = free_per_directory([tmp_path / "a", memory])
    least = min(here, shutil.disk_usage(memory).free)
    assert abs(apart - least) <= least * 0.01
