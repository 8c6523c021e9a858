"""Capture real pgbench output as golden files for the parser tests.

Run as root from the repository root (PostgreSQL itself runs as the OS user ``postgres``):

    .venv/bin/python tests/golden/capture.py            # every version installed (15, 16, 18)
    .venv/bin/python tests/golden/capture.py 16 18      # only these majors
    .venv/bin/python tests/golden/capture.py 13         # built from Debian's source package
    .venv/bin/python tests/golden/capture.py 17=/opt/pg17/bin   # any installation
    .venv/bin/python tests/golden/capture.py --out /tmp/check 18   # elsewhere
    .venv/bin/python tests/golden/capture.py --case exit-on-abort 18   # one case more
    .venv/bin/python tests/golden/capture.py --draft-expected

Where each major's binaries come from (installed, or built by pgbenchlab): installations.py.
For each PostgreSQL version it starts a throwaway cluster (private temporary directory, unix
socket only, ``fsync=off``), initialises the pgbench tables at scale 2 and runs every case the
version has options for with that version's own pgbench. It writes
``tests/golden/pgbench/<major>/<case>.stdout``, ``.stderr``, ``.argv`` (JSON list; the socket
directory is replaced by ``<socketdir>``) and ``.exit`` (exit status), plus ``version.txt``
(``pgbench -V``) and ``CAPTURED.md`` (version, where the binaries came from, command, date).

``--draft-expected`` only writes ``<case>.json`` files that do not exist yet, from the current
parsers. A draft is not a test oracle until someone has checked every value against the text.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from installations import Install, default_majors, find, parse_majors

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GOLDEN = HERE / "pgbench"
SCRIPTS = HERE / "scripts"
OS_USER = "postgres"
DB_USER = "bench"
SCALE = "2"


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    db: str = "bench"
    server: str | None = None  # run against another major's server (header shows both)
    min_major: int = 0  # the first major with every option used


def case(
    name: str, args: str, db: str = "bench", server: str | None = None, min_major: int = 0
) -> Case:
    return Case(name, tuple(args.split()), db, server, min_major)


RETRIES = 15  # --max-tries, --failures-detailed, --verbose-errors


CASES: tuple[Case, ...] = (
    case("tpcb-progress", "-c 2 -j 2 -T 2 -P 1"),
    case("t-mode", "-c 2 -t 50"),
    case("select-only", "-S -c 2 -j 2 -T 1"),
    case("skip-some-updates", "-N -M prepared -c 2 -T 1"),
    case("rate-limit", "-c 2 -j 2 -T 2 -R 3000 -L 1 -P 1"),
    case("latency-limit", "-c 2 -T 2 -L 1"),
    case("connect", "-C -S -c 2 -T 1"),
    case("per-statement", "-r -c 2 -T 1"),
    case("weighted-scripts", "-b select-only@2 -b tpcb-like@1 -c 2 -T 1"),
    case("weighted-scripts-per-statement", "-b select-only@2 -b tpcb-like@1 -r -P 1 -c 2 -T 2"),
    case("progress-timestamp", "-S -c 2 -T 2 -P 1 --progress-timestamp"),
    case("partitioned", "-S -s 7 -c 2 -T 1", db="part"),
    case(
        "max-tries",
        "-n -c 4 -j 2 -T 2 -P 1 -r -f serial.sql --max-tries=3 --failures-detailed",
        min_major=RETRIES,
    ),
    case(
        "everything",
        "-n -c 4 -j 2 -T 2 -P 1 -R 600 -L 20 -r --max-tries=3 --failures-detailed"
        " -f serial.sql@3 -b select-only@1",
        min_major=RETRIES,
    ),
    case("serialization-failures", "-n -c 4 -T 1 -r -f serial.sql"),
    case("max-tries-unlimited", "-n -c 4 -T 1 -f serial.sql --max-tries=0", min_major=RETRIES),
    case(
        "verbose-errors",
        "-n -c 4 -t 5 -f serial.sql --max-tries=2 --verbose-errors",
        min_major=RETRIES,
    ),
    case(
        "retries-nothing-succeeded",
        "-n -c 2 -t 1 -L 100 -f always_serial.sql --max-tries=2 --verbose-errors",
        min_major=RETRIES,
    ),
    case("client-abort", "-n -c 2 -t 5 -f divzero.sql"),
    case("client-abort-midrun", "-n -c 2 -j 2 -T 2 -P 1 -f sometimes_divzero.sql"),
    case("missing-tables", "-c 1 -t 1", db="notables"),
    case("missing-table-script", "-n -c 1 -t 5 -f missing_table.sql"),
    case("custom-script-no-tables", "-c 1 -t 5 -f select1.sql", db="notables"),
    case("random-seed", "-S -c 1 -t 20 --random-seed=42"),
    case(
        "partitioned-rate-limit-per-statement",
        "-c 4 -j 2 -T 2 -P 1 -R 1000 -L 2 -r",
        db="part",
        min_major=13,
    ),
    case("exit-on-abort", "-n -c 2 -T 2 --exit-on-abort -f divzero.sql", min_major=17),
)

# A few runs against another major's server: the 14+ header then names both versions.
CROSS_CASES: dict[str, tuple[Case, ...]] = {
    "15": (case("server-18", "-S -c 1 -t 20", server="18"),),
    "18": (case("server-15", "-S -c 1 -t 20", server="15"),),
}


def base_env() -> dict[str, str]:
    """A clean environment: no PG* variables from the caller, no colours, C messages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PG_COLOR="never", LANG="C", LC_ALL="C")
    return env


def as_postgres(argv: Sequence[str], cwd: Path) -> None:
    """Run a server-side command as the unprivileged OS user (PostgreSQL refuses root)."""
    subprocess.run(argv, cwd=cwd, env=base_env(), user=OS_USER, check=True, capture_output=True)


@dataclass(frozen=True)
class Cluster:
    major: str
    bindir: Path
    socketdir: Path
    port: int

    def pgbench(self, args: Sequence[str], db: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bindir / "pgbench"), "-h", str(self.socketdir), "-p", str(self.port)]
        argv += ["-U", DB_USER, *args, db]
        return subprocess.run(argv, cwd=cwd, env=base_env(), capture_output=True, text=True)


@contextmanager
def cluster(major: str, bindir: Path, port: int) -> Iterator[Cluster]:
    """Start a throwaway cluster in a private directory owned by the postgres OS user."""
    account = pwd.getpwnam(OS_USER)
    root = Path(tempfile.mkdtemp(prefix=f"pgbl-capture-{major}-"))
    os.chown(root, account.pw_uid, account.pw_gid)
    data, sock = root / "data", root / "sock"
    try:
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust"]
        as_postgres([*initdb, "-E", "UTF8", "--locale=C", "--no-sync"], cwd=root)
        sock.mkdir()
        os.chown(sock, account.pw_uid, account.pw_gid)
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = ''\nunix_socket_directories = '{sock}'\n")
            conf.write(f"port = {port}\nfsync = off\n")
        pg_ctl = str(bindir / "pg_ctl")
        as_postgres([pg_ctl, "-D", str(data), "-l", str(root / "server.log"), "-w", "start"], root)
        try:
            yield Cluster(major, bindir, sock, port)
        finally:
            as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def prepare(c: Cluster, work: Path) -> None:
    """Databases used by the cases: pgbench tables, partitioned tables, and no tables."""
    psql = [str(c.bindir / "psql"), "-h", str(c.socketdir), "-p", str(c.port), "-U", DB_USER]
    for db in ("bench", "part", "notables"):
        create = [*psql, "-q", "-c", f"CREATE DATABASE {db}", "postgres"]
        subprocess.run(create, check=True, env=base_env(), capture_output=True)
    for db, extra in (("bench", ()), ("part", ("--partitions=2",))):
        done = c.pgbench(["-i", "-s", SCALE, "-q", *extra], db, work)
        if done.returncode != 0:
            raise RuntimeError(f"pgbench -i failed on {c.major}: {done.stderr}")


def record(out: Path, case: Case, c: Cluster, done: subprocess.CompletedProcess[str]) -> None:
    """Write one case's files, with the private socket path made neutral."""
    argv = ["pgbench" if a == done.args[0] else a for a in done.args]
    argv = [a.replace(str(c.socketdir), "<socketdir>") for a in argv]
    scrub = str(c.socketdir)
    (out / f"{case.name}.stdout").write_text(done.stdout.replace(scrub, "<socketdir>"))
    (out / f"{case.name}.stderr").write_text(done.stderr.replace(scrub, "<socketdir>"))
    (out / f"{case.name}.argv").write_text(json.dumps(argv) + "\n")
    (out / f"{case.name}.exit").write_text(f"{done.returncode}\n")


def capture(installs: dict[str, Install], golden: Path, only: Sequence[str] = ()) -> None:
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="pgbl-work-") as tmp:
        work = Path(tmp)
        for script in SCRIPTS.glob("*.sql"):
            shutil.copy(script, work / script.name)
        servers = {cc.server for m in installs for cc in CROSS_CASES.get(m, ()) if cc.server}
        every = installs | {m: find(m) for m in servers - set(installs)}
        clusters: dict[str, Cluster] = {}
        for i, major in enumerate(sorted(every, key=int)):
            clusters[major] = stack.enter_context(cluster(major, every[major].bindir, 5490 + i))
            prepare(clusters[major], work)
        for major, install in installs.items():
            client = clusters[major]
            out = golden / major
            out.mkdir(parents=True, exist_ok=True)
            (out / "version.txt").write_text(install.pgbench_version() + "\n")
            for case in CASES + CROSS_CASES.get(major, ()):
                if int(major) < case.min_major or (only and case.name not in only):
                    continue
                server = clusters[case.server] if case.server else client
                target = Cluster(major, client.bindir, server.socketdir, server.port)
                done = target.pgbench(case.args, case.db, work)
                record(out, case, target, done)
                print(f"{major} {case.name}: exit {done.returncode}", file=sys.stderr)
            if not only:
                write_header(out, install)


def write_header(out: Path, install: Install) -> None:
    """CAPTURED.md: what made these files, so a reader can tell real captures from guesses."""
    command = " ".join(["tests/golden/capture.py", *sys.argv[1:]])
    (out / "CAPTURED.md").write_text(
        f"# Real pgbench {install.major} captures\n\n"
        f"- pgbench: `{install.pgbench_version()}`\n"
        f"- binaries: {install.origin}\n"
        f"- command: `.venv/bin/python {command}` (as root; servers run as `{OS_USER}`)\n"
        f"- captured: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, throwaway "
        f"cluster of the same major, scale {SCALE}, fsync off\n"
    )


def draft_expected() -> None:
    """Write missing <case>.json drafts from the current parsers (to be checked by eye)."""
    sys.path.insert(0, str(REPO / "src"))
    from pgbenchlab.errors import PgbenchParseError
    from pgbenchlab.pgbench.progress import parse_stderr
    from pgbenchlab.pgbench.report import parse_report

    for stdout in sorted(GOLDEN.glob("*/*.stdout")):
        target = stdout.with_suffix(".json")
        if target.exists():
            continue
        expected: dict[str, object] = {}
        try:
            expected["report"] = asdict(parse_report(stdout.read_text()))
        except PgbenchParseError as error:
            expected["report"] = None
            expected["report_error"] = str(error)
        stderr = parse_stderr(stdout.with_suffix(".stderr").read_text())
        expected["stderr"] = asdict(stderr) | {"errors": stderr.errors, "warnings": stderr.warnings}
        target.write_text(json.dumps(expected, indent=2) + "\n")
        print(f"draft: {target.relative_to(REPO)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "majors", nargs="*", help="majors to capture, MAJOR or MAJOR=BINDIR (default: installed)"
    )
    parser.add_argument("--case", action="append", default=[], help="capture only this case")
    parser.add_argument("--draft-expected", action="store_true", help="write missing .json")
    parser.add_argument("--out", type=Path, default=GOLDEN, help="golden directory to write")
    args = parser.parse_args()
    if args.draft_expected:
        draft_expected()
        return
    chosen = parse_majors(args.majors) if args.majors else dict.fromkeys(default_majors())
    capture({m: find(m, bindir) for m, bindir in chosen.items()}, args.out, args.case)


if __name__ == "__main__":
    main()
