"""Capture real pgbench log files (``-l``) as golden files for the log-analysis tests.

Run as root from the repository root (the servers run as the OS user ``postgres``):

    .venv/bin/python tests/golden/logs/capture_logs.py          # every version installed
    .venv/bin/python tests/golden/logs/capture_logs.py 15 18    # only these majors
    .venv/bin/python tests/golden/logs/capture_logs.py 13 17=/opt/pg17/bin  # built, or given

Where each major's binaries come from (installed, or built by pgbenchlab):
``tests/golden/installations.py``.

For each major it starts a throwaway cluster of that version (private temporary directory, unix
socket only, ``fsync=off``, a short ``deadlock_timeout``), initialises pgbench tables at scale 2
and runs every case with that version's pgbench. Each case's files land in
``tests/golden/logs/<major>/<case>/`` (the thread files as pgbench named them) and the cases'
arguments and the flags the analysis needs go to ``tests/golden/logs/<major>/cases.json``, and
what made them (version, binaries, command, date) to ``CAPTURED.md`` beside it.
Runs are short so that each file has a few hundred lines at most.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from installations import Install, default_majors, find, parse_majors  # noqa: E402

OS_USER = "postgres"
DB_USER = "bench"

# Contention on two rows: repeatable-read updates fail with serialization errors, and updates
# in opposite orders deadlock.
SCRIPTS = {
    "serial.sql": """\\set bid random(1, 2)
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = :bid;
SELECT pg_sleep(0.001);
END;
""",
    "deadlock.sql": """\\set a random(1, 2)
\\set b 3 - :a
BEGIN;
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = :a;
SELECT pg_sleep(0.002);
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = :b;
END;
""",
}


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    rate_limited: bool = False  # -R: a schedule-lag column
    retries: bool = False  # --max-tries other than 1 (15+): a retries column
    sampling_rate: float = 1.0
    aggregate: bool = False
    min_major: int = 0


def case(args: str, **flags: bool | float | int) -> Case:
    return Case(tuple(args.split()), **flags)  # type: ignore[arg-type]


SERIAL = "-n -f serial.sql"
BOTH = "-n -f serial.sql@1 -f deadlock.sql@1"
CASES: dict[str, Case] = {
    "plain": case("-S -c 4 -j 2 -t 60"),
    "tpcb": case("-c 3 -j 2 -t 40"),
    "rate-limit": case("-S -c 4 -j 2 -T 1 -R 400 -L 0.1", rate_limited=True),
    "sampling": case("-S -c 2 -j 2 -T 1 --sampling-rate=0.01", sampling_rate=0.01),
    "failures": case(f"{SERIAL} -c 6 -j 2 -t 30 --max-tries=2", retries=True, min_major=15),
    "failures-detailed": case(
        f"{BOTH} -c 6 -j 2 -t 30 --max-tries=2 --failures-detailed", retries=True, min_major=15
    ),
    "rate-retries": case(
        f"{SERIAL} -c 4 -j 2 -T 1 -R 300 -L 5 --max-tries=3",
        rate_limited=True,
        retries=True,
        min_major=15,
    ),
    "aggregate": case("-S -c 4 -j 2 -T 3 --aggregate-interval=1", aggregate=True),
    "aggregate-rate": case(
        "-S -c 4 -j 2 -T 3 -R 2000 -L 0.1 --aggregate-interval=1",
        rate_limited=True,
        aggregate=True,
    ),
    "aggregate-failures": case(
        f"{SERIAL} -c 4 -j 2 -T 3 --max-tries=3 --failures-detailed --aggregate-interval=1",
        retries=True,
        aggregate=True,
        min_major=15,
    ),
}


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PG_COLOR="never", LANG="C", LC_ALL="C")
    return env


def as_postgres(argv: Sequence[str], cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, env=clean_env(), user=OS_USER, check=True, capture_output=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class Server:
    bindir: Path
    socketdir: Path
    port: int

    def pgbench(self, args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bindir / "pgbench"), "-h", str(self.socketdir), "-p", str(self.port)]
        argv += ["-U", DB_USER, *args, "postgres"]
        return subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True)


@contextmanager
def server(bindir: Path) -> Iterator[Server]:
    """A throwaway cluster in a private directory owned by the postgres OS user."""
    account = pwd.getpwnam(OS_USER)
    root = Path(tempfile.mkdtemp(prefix="pgbl-logs-"))
    os.chown(root, account.pw_uid, account.pw_gid)
    data, sock, port = root / "data", root / "sock", free_port()
    try:
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust"]
        as_postgres([*initdb, "-E", "UTF8", "--locale=C", "--no-sync"], root)
        as_postgres(["mkdir", str(sock)], root)
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{sock}'",
            "port": str(port),
            "fsync": "off",
            "deadlock_timeout": "'10ms'",
        }
        with (data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        pg_ctl = str(bindir / "pg_ctl")
        as_postgres([pg_ctl, "-D", str(data), "-l", str(root / "log"), "-w", "start"], root)
        try:
            yield Server(bindir, sock, port)
        finally:
            as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def capture_major(install: Install, work: Path) -> None:
    major = install.major
    out = HERE / major
    with server(install.bindir) as pg:
        init = pg.pgbench(["-i", "-s", "2", "-q"], work)
        if init.returncode != 0:
            raise RuntimeError(f"pgbench -i failed for {major}: {init.stderr}")
        index: dict[str, object] = {}
        for name, case in CASES.items():
            if int(major) < case.min_major:
                continue
            args = case.args
            target = out / name
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            done = pg.pgbench([*args, "-l", f"--log-prefix={target}/pgbench_log"], work)
            if done.returncode != 0:
                raise RuntimeError(f"{major} {name}: exit {done.returncode}: {done.stderr}")
            index[name] = asdict(case) | {"args": " ".join(args)}
            lines = sum(len(f.read_bytes().splitlines()) for f in target.iterdir())
            print(f"{major} {name}: {lines} lines", file=sys.stderr)
    index["version"] = install.pgbench_version()
    (out / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    command = " ".join(["tests/golden/logs/capture_logs.py", *sys.argv[1:]])
    (out / "CAPTURED.md").write_text(
        f"# Real pgbench {major} log files\n\n"
        f"- pgbench: `{index['version']}`\n"
        f"- binaries: {install.origin}\n"
        f"- command: `.venv/bin/python {command}` (as root; the server runs as `{OS_USER}`)\n"
        f"- captured: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, throwaway "
        "cluster of the same major, scale 2, fsync off\n"
    )


def main() -> None:
    chosen = parse_majors(sys.argv[1:]) if sys.argv[1:] else dict.fromkeys(default_majors())
    installs = [find(major, bindir) for major, bindir in chosen.items()]
    with tempfile.TemporaryDirectory(prefix="pgbl-logs-work-") as tmp:
        work = Path(tmp)
        for name, text in SCRIPTS.items():
            (work / name).write_text(text)
        for install in installs:
            capture_major(install, work)


if __name__ == "__main__":
    main()
