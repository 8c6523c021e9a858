"""The user's input and environment never end in a traceback: each fault below is one line
saying what to fix, with exit 2 before anything started (and nothing written), or a clean stop
with exit 1 during a campaign that keeps every committed run.

Every test runs the real command line in a process of its own (`cli_process`: forked from one
that has imported it). The root-only ones (mounts, chattr) clean up in `finally`; under CI
(root) they must run.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cli_process import run_cli
from conftest_report import write_synthetic
from pgbenchlab.campaign import RESULTS_DB, remove_clusters
from pgbenchlab.plan import MAX_RUNS
from pgbenchlab.store import Store
from support import require_installs

CLI = [sys.executable, "-m", "pgbenchlab.cli"]
# The real command line with a 2 s wait for SQLite's write lock instead of 30 s.
SHORT_LOCK_WAIT = "from pgbenchlab.store import faults; faults.BUSY_TIMEOUT_S = 2.0"
CLI_SHORT_LOCK_WAIT = [
    sys.executable,
    "-c",
    f"import sys; {SHORT_LOCK_WAIT}; from pgbenchlab.cli import main; sys.exit(main())",
]
ERROR = "pgbenchlab: error: "

PLAN = """
[campaign]
name = "{name}"
repeats = {repeats}
[defaults]
duration = "1s"
warmup = "0s"
[[server]]
name = "pg"
{server}
[matrix]
scale = [1]
clients = [1]
{extra}
"""


def plan_text(
    *, name: str = "env", repeats: int = 1, server: str = 'install = "embedded"', extra: str = ""
) -> str:
    return PLAN.format(name=name, repeats=repeats, server=server, extra=extra)


def write_plan(directory: Path, text: str) -> Path:
    path = directory / "plan.toml"
    path.write_text(text)
    return path


def cli(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=timeout)


def assert_one_line(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """Exit code, exactly one error line (the only stderr line before anything started), no
    traceback; returns the line."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith(ERROR)]
    assert len(errors) == 1, done.stderr
    if code == 2:
        assert lines == errors, "before anything started the error is the only line"
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under path with its content: to prove that nothing was written."""
    if not path.exists():
        return {}
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root: test NOT run")


@contextmanager
def read_only_mount(path: Path) -> Iterator[Path]:
    """path bind-mounted read-only onto itself (root writes there otherwise)."""
    require_root("a read-only bind mount")
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """path with the immutable attribute: not even root may add a file."""
    require_root("chattr +i")
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextmanager
def unwritable(kind: str, tmp_path: Path) -> Iterator[Path]:
    """A directory that cannot be written, or a path under which none can be made."""
    if kind == "through a file":
        yield Path("/etc/hostname/pgbenchlab")
    elif kind == "under /sys":
        yield Path("/sys/pgbenchlab")
    else:
        directory = tmp_path / "locked"
        directory.mkdir()
        with (read_only_mount if kind == "read-only mount" else immutable)(directory):
            yield directory


UNWRITABLE = ["through a file", "under /sys", "read-only mount", "immutable"]


# -- 1. a results directory that cannot be created or written -------------------------------


@pytest.mark.parametrize("kind", UNWRITABLE)
def test_unwritable_results_directory(kind: str, tmp_path: Path) -> None:
    plan_path = write_plan(tmp_path, plan_text())
    with unwritable(kind, tmp_path) as results:
        before = snapshot(results)
        done = cli("run", plan_path, "--results", results)
        after = snapshot(results)
    line = assert_one_line(done, 2, str(results))
    assert "give --results" in line
    assert after == before


# -- 2. a results.db that is garbage, truncated or another program's ------------------------


@pytest.fixture(scope="module")
def real_database(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A results database written by the real Store (36 runs with telemetry), as bytes."""
    return write_synthetic(tmp_path_factory.mktemp("real")).read_bytes()


def damaged(kind: str, real: bytes, path: Path) -> None:
    if kind == "garbage":
        path.write_bytes(os.urandom(len(real) // 2))
    elif kind == "truncated":
        path.write_bytes(real[: len(real) // 2])
    else:  # another program's: valid SQLite, its own tables, user_version 0
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            db.execute("INSERT INTO notes (body) VALUES ('mine')")
        db.close()


DAMAGE = {
    "garbage": "is not an SQLite database",
    "truncated": "is damaged",
    "foreign": "not a pgbenchlab results database (it holds notes)",
}
READERS = {
    "run": ["run", "{plan}"],
    "runs": ["runs"],
    "campaigns": ["campaigns"],
    "report": ["report"],
    "show": ["show", "1"],
    "compare": ["compare", "--baseline", "pg15", "--candidate", "pg18"],
    "export": ["export", "--format", "json"],
}


@pytest.mark.parametrize("command", sorted(READERS))
@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_unusable_results_database(
    kind: str, command: str, real_database: bytes, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    damaged(kind, real_database, results / "results.db")
    before = snapshot(results)
    plan_path = write_plan(tmp_path, plan_text())
    args = [a.replace("{plan}", str(plan_path)) for a in READERS[command]]
    done = cli(*args, "--results", results)
    assert_one_line(done, 2, str(results / "results.db"), DAMAGE[kind], "--results")
    assert snapshot(results) == before, "the database is never written into, nothing added"


# -- 3. report -o and export -o to a path that cannot be written ----------------------------


OUTPUTS = {  # command: its arguments
    "report": ["report", "-o", "{out}"],
    "report markdown": ["report", "--format", "markdown", "-o", "{out}"],
    "report images": ["report", "--images", "{out}"],
    "export csv": ["export", "--format", "csv", "-o", "{out}"],
    "export parquet": ["export", "--format", "parquet", "-o", "{out}"],
}
TARGETS = ["missing directory", "a directory", *UNWRITABLE]
# report -o and --images create missing directories by design; --images takes a directory.
OUTPUT_CASES = [
    (command, target)
    for command in sorted(OUTPUTS)
    for target in TARGETS
    if not (command.startswith("report") and target == "missing directory")
    and not (command == "report images" and target == "a directory")
]


@contextmanager
def output_target(kind: str, tmp_path: Path) -> Iterator[Path]:
    if kind == "missing directory":
        yield tmp_path / "no-such-dir" / "out"
    elif kind == "a directory":
        directory = tmp_path / "a-directory"
        directory.mkdir()
        yield directory
    else:
        with unwritable(kind, tmp_path) as directory:
            yield directory / "out" if kind in ("read-only mount", "immutable") else directory


@pytest.fixture(scope="module")
def readable_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid results directory (36 synthetic runs) that the reading commands use."""
    results = tmp_path_factory.mktemp("readable")
    write_synthetic(results)
    return results


@pytest.mark.parametrize(("command", "target"), OUTPUT_CASES)
def test_unwritable_output(
    command: str, target: str, readable_results: Path, tmp_path: Path
) -> None:
    with output_target(target, tmp_path) as out:
        before = snapshot(tmp_path), snapshot(readable_results)
        args = [a.replace("{out}", str(out)) for a in OUTPUTS[command]]
        done = cli(*args, "--results", readable_results)
        after = snapshot(tmp_path), snapshot(readable_results)
    assert_one_line(done, 2, "cannot write", str(out), "give ")
    assert after == before, "nothing written, no temporary file left"
    assert not out.exists() or out.is_dir()


# -- 4. a plan or script file that is not UTF-8, a plan that is a directory or missing ------


LATIN1 = "-- caf\xe9 au lait\nSELECT 1;\n".encode("latin-1")


def test_unreadable_plan_or_script(tmp_path: Path) -> None:
    (tmp_path / "latin1.sql").write_bytes(LATIN1)
    script_plan = write_plan(
        tmp_path, plan_text(extra='workload = [{ script = "latin1.sql" }]')
    ).read_text()
    cases = {
        "plan not UTF-8": (
            plan_text().replace('"env"', '"caf\xe9"').encode("latin-1"),
            ["cannot read the plan file", "not UTF-8 text (byte 0xe9", "save it as UTF-8"],
        ),
        "script not UTF-8": (
            script_plan.encode(),
            ["cannot read script file", "latin1.sql", "not UTF-8 text (byte 0xe9"],
        ),
        "plan is a directory": (None, ["cannot read the plan file", "it is a directory"]),
        "plan is missing": (b"", ["cannot read the plan file", "No such file or directory"]),
    }
    for case, (content, fragments) in cases.items():
        plan_path = tmp_path / f"{case.replace(' ', '-')}.toml"
        if content is None:
            plan_path.mkdir()
        elif content:
            plan_path.write_bytes(content)
        results = tmp_path / "results"
        done = cli("run", plan_path, "--results", results, timeout=60)
        assert_one_line(done, 2, str(plan_path), *fragments)
        assert not results.exists(), case


# -- 5. a malformed dsn for an external server ------------------------------------------------


BAD_DSNS = {
    "port not a number": ("host=x port=notanumber", "port 'notanumber' is not a port number"),
    "two ports": ("host=a,b port=5432,5433", "port '5432,5433' is not a port number"),
    "garbage": ("=== garbage", "invalid connection string"),
    "unknown keyword": ("host=x colour=blue", 'invalid connection option "colour"'),
    "missing =": ("host=x port", 'missing "=" after "port"'),
    "bad URI with a password": ("postgresql://u:p%zzsecret@h/d", "invalid percent-encoded token"),
}


@pytest.mark.parametrize("case", sorted(BAD_DSNS))
def test_malformed_dsn(case: str, tmp_path: Path) -> None:
    dsn, message = BAD_DSNS[case]
    plan_path = write_plan(tmp_path, plan_text(server=f"dsn = {dsn!r}".replace("'", '"')))
    results = tmp_path / "results"
    for args in (["--dry-run"], []):  # refused when the plan is read, before anything else
        done = cli("run", plan_path, *args, "--results", results, timeout=60)
        line = assert_one_line(done, 2, "server[0].dsn", message)
        assert "secret" not in line, "libpq's quoted token may be part of a password"
    assert not results.exists()


# -- 6. a custom script that is a device, a pipe or huge --------------------------------------


def test_script_that_is_not_a_small_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.sql")
    with open(tmp_path / "huge.sql", "wb") as huge:
        huge.truncate(2 << 20)  # 2 MiB (sparse)
    cases = {
        "/dev/zero": "it is a character device",
        "/dev/urandom": "it is a character device",
        str(tmp_path / "pipe.sql"): "it is a named pipe",
        str(tmp_path / "huge.sql"): "it is larger than 1024 KiB",
    }
    for script, message in cases.items():
        plan_path = write_plan(tmp_path, plan_text(extra=f'workload = [{{ script = "{script}" }}]'))
        started = time.monotonic()
        done = cli("run", plan_path, "--results", tmp_path / "results", timeout=60)
        assert time.monotonic() - started < 30, f"{script}: must be refused without reading it"
        assert_one_line(done, 2, f"cannot read script file {script}", message)
    assert not (tmp_path / "results").exists()


# -- 7. an absurd matrix: refused with its size, before expanding it --------------------------


ABSURD = {
    "repeats": (plan_text(repeats=10**12), "1,000,000,000,000 runs (1 cells × 1,000,000,000,000"),
    "axes": (  # 1,001 scales × 1,000 rates
        plan_text(extra=f"rate = {list(range(1, 1001))}").replace(
            "scale = [1]", f"scale = {list(range(1, 1002))}"
        ),
        "1,001,000 runs (1,001,000 cells × 1 repeats)",
    ),
}


@pytest.mark.parametrize("case", sorted(ABSURD))
def test_absurd_matrix_is_refused_with_its_size(case: str, tmp_path: Path) -> None:
    text, message = ABSURD[case]
    plan_path = write_plan(tmp_path, text)
    started = time.monotonic()
    done = cli("run", plan_path, "--dry-run", timeout=120)
    assert time.monotonic() - started < 60, "counted, not expanded"
    assert_one_line(done, 2, message, f"more than the {MAX_RUNS:,}")


# -- 8. the results disk fills during a campaign ----------------------------------------------


@contextmanager
def small_tmpfs(size: str) -> Iterator[Path]:
    require_root("mounting a tmpfs")
    mount = Path(tempfile.mkdtemp(prefix="pgbl-results-", dir="/var/tmp"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def fill(directory: Path) -> Path:
    """Write a file until the file system has no room left."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


def committed_runs(results: Path) -> list[tuple[int, str]]:
    db = sqlite3.connect(results / RESULTS_DB, timeout=30)
    try:
        return [(int(r[0]), str(r[1])) for r in db.execute("SELECT id, status FROM runs")]
    finally:
        db.close()


def campaign_status(results: Path) -> str:
    db = sqlite3.connect(results / RESULTS_DB, timeout=30)
    try:
        return str(db.execute("SELECT status FROM campaigns").fetchone()[0])
    finally:
        db.close()


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], limit: float) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def has_runs(results: Path) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return (results / RESULTS_DB).exists() and len(committed_runs(results)) >= 1
        except sqlite3.Error:
            return False

    return check


@pytest.mark.server
def test_results_disk_full_stops_the_campaign_and_keeps_its_runs(tmp_path: Path) -> None:
    require_installs("embedded")
    plan_path = write_plan(tmp_path, plan_text(name="diskfull", repeats=4))
    with small_tmpfs("64m") as mount:
        results = mount / "results"
        campaign = subprocess.Popen(
            [*CLI, "run", str(plan_path), "--results", str(results), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(has_runs(results), campaign, 240)
            kept = committed_runs(results)
            fill(mount)
            _, stderr = campaign.communicate(timeout=300)
            done = subprocess.CompletedProcess(campaign.args, campaign.returncode, "", stderr)
            assert_one_line(done, 1, "the results disk is full", "every finished run is kept")
            (mount / "filler").unlink()
            stored = committed_runs(results)
            assert set(kept) <= set(stored) and len(stored) < 4
            assert campaign_status(results) in ("stopped", "running")  # "as far as possible"
            again = cli("run", plan_path, "--results", results, "-q")
            assert again.returncode == 0, again.stderr
            assert set(kept) <= set(committed_runs(results))
            assert sum(s == "ok" for _, s in committed_runs(results)) == 4
        finally:
            if campaign.poll() is None:
                campaign.kill()
                campaign.communicate()
            (mount / "filler").unlink(missing_ok=True)
            remove_clusters(results)


# -- 9. another process holds results.db's write lock past the timeout ------------------------


@contextmanager
def write_lock(database: Path) -> Iterator[None]:
    """Hold SQLite's write lock on database, as another program would."""
    db = sqlite3.connect(database, timeout=60, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


def short_wait_cli(*args: str | Path) -> list[str]:
    return [*CLI_SHORT_LOCK_WAIT, *map(str, args)]


def test_write_lock_held_before_the_campaign_starts(tmp_path: Path) -> None:
    results = tmp_path / "results"
    Store(results / RESULTS_DB).close()  # an empty results database of this version
    plan_path = write_plan(tmp_path, plan_text(name="locked"))
    with write_lock(results / RESULTS_DB):
        done = run_cli("run", plan_path, "--results", results, before=SHORT_LOCK_WAIT)
    assert_one_line(done, 2, "another process holds the write lock of", "results.db")
    assert sorted(p.name for p in results.iterdir() if p.name != "results.db.lock") == [
        "results.db"
    ]
    with Store(results / RESULTS_DB) as store:
        assert store.campaign_summaries() == ()


@pytest.mark.server
def test_write_lock_held_during_the_campaign(results_dir: Path, tmp_path: Path) -> None:
    require_installs("embedded")
    plan_path = write_plan(tmp_path, plan_text(name="locked", repeats=4))
    campaign = subprocess.Popen(
        short_wait_cli("run", plan_path, "--results", results_dir, "-q"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(has_runs(results_dir), campaign, 240)
        with write_lock(results_dir / RESULTS_DB):
            kept = committed_runs(results_dir)
            _, stderr = campaign.communicate(timeout=300)
        done = subprocess.CompletedProcess(campaign.args, campaign.returncode, "", stderr)
        assert_one_line(done, 1, "another process holds the write lock of", "run the same command")
        stored = committed_runs(results_dir)
        assert stored == kept and len(stored) < 4
    finally:
        if campaign.poll() is None:
            campaign.kill()
            campaign.communicate()
