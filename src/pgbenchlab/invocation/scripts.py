"""A custom script checked by the pgbench that will run it, before any server exists.

pgbench parses every script file before it connects: pointed at a socket directory where no
server listens, it either stops at the script (a syntax error in a meta-command, an unknown
command, a bad weight) or goes on to the connection, which fails. Only the first tells the
user something; SQL is not parsed by pgbench and is judged by the server when the run starts.
"""

from __future__ import annotations

from pathlib import Path, PurePath

from pgbenchlab.errors import PlanError
from pgbenchlab.hosts import Host

CHECK_TIMEOUT_S = 30


def check_script(host: Host, pgbench: Path, name: str, text: str) -> None:
    """PlanError with pgbench's words when it cannot parse the script (name: its file in the
    plan), run on host as the campaign runs it."""
    scratch = host.make_temp_dir("script-check-", host.own_dir() or PurePath("/tmp"))
    try:
        script = scratch / "script.sql"
        host.write_text(script, text)
        argv = [str(pgbench), "-n", "-t", "1", "-f", str(script)]
        argv += ["-h", str(scratch), "-p", "1", "-U", "pgbenchlab", "pgbenchlab"]
        finished = host.run(argv, env={"PGCONNECT_TIMEOUT": "1"}, timeout=CHECK_TIMEOUT_S)
    finally:
        host.remove_tree(scratch)
    said = parse_problem(finished.stderr).replace(f"{script}:", "line ")
    if finished.returncode != 0 and said:
        raise PlanError(f"script {name}: pgbench cannot parse it: {said}")


def parse_problem(stderr: str) -> str:
    """What pgbench said before it tried to connect (nothing: it parsed every script), on one
    line."""
    before: list[str] = []
    for line in stderr.splitlines():
        if "connect" in line.lower():  # every major words its connection failure with it
            break
        before.append(line.strip())
    text = " ".join(line for line in before if line)
    return text.replace("pgbench: error: ", "").replace("pgbench: ", "")
