"""A custom script checked by the pgbench that will run it, before any server exists.

pgbench parses every script file before it connects: pointed at a socket directory where no
server listens, it either stops at the script (a syntax error in a meta-command, an unknown
command, a bad weight) or goes on to the connection, which fails. Only the first tells the
user something; SQL is not parsed by pgbench and is judged by the server when the run starts
(`run --check` tries each script on a throwaway dataset: `campaign.script_trial`, whose
failures name the line pgbench stopped at, from the script's commands as pgbench counts them).
"""

from __future__ import annotations

import re
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


# -- a script's commands, as pgbench counts them ------------------------------------------------

# A dollar quote's delimiter ($$, $body$); $1 (a parameter) is none.
_DOLLAR_QUOTE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
# Meta-commands that end the SQL before them and are no command of their own.
_RESULT_COMMANDS = ("gset", "aset")
# pgbench's words when a client stops at a command: "client 0 script 0 aborted in command 1
# query 0: ERROR: …" (13 on), "client 0 aborted in command 1 (SQL) of script 0; ERROR: …".
_ABORTED = re.compile(r"aborted in command (\d+)\b[^:;\n]*[:;]\s*(.*)")


def command_lines(text: str) -> list[int]:
    """The line (from 1) each command of a pgbench script starts on, in pgbench's order (its
    messages count commands from 0): a meta-command is a backslash and the rest of its line
    (continued by a backslash at the end); SQL runs to a semicolon outside quotes and comments,
    or to a backslash command (\\gset and \\aset end it and are no command of their own)."""
    starts: list[int] = []
    sql: int | None = None  # the line the SQL being read started on
    index, line = 0, 1
    while index < len(text):
        char = text[index]
        if char == "\n":
            line += 1
        if char.isspace():
            index += 1
        elif text.startswith("--", index):
            index = _end_of_line(text, index)
        elif text.startswith("/*", index):
            index, line = _past(text, index, "*/", line)
        elif text.startswith("\\;", index):  # a semicolon inside one SQL command
            index += 2
        elif char == "\\":
            word = re.match(r"\\(\w*)", text[index:])
            if sql is not None:
                starts.append(sql)
                sql = None
            if not word or word[1].lower() not in _RESULT_COMMANDS:
                starts.append(line)
            index, line = _end_of_meta(text, index, line)
        elif char == ";":
            if sql is not None:
                starts.append(sql)
                sql = None
            index += 1
        else:
            sql = line if sql is None else sql
            index, line = _past_token(text, index, line)
    if sql is not None:
        starts.append(sql)
    return starts


def aborted_at(text: str, stderr: str) -> str | None:
    """Where and why pgbench stopped running the script ("line 3: ERROR: column …"), from its
    stderr; None when no client stopped at a command."""
    found = _ABORTED.search(stderr)
    if found is None:
        return None
    command, said = int(found[1]), " ".join(found[2].split())
    lines = command_lines(text)
    where = f"line {lines[command]}" if command < len(lines) else f"command {command + 1}"
    return f"{where}: {said}"


def _end_of_line(text: str, index: int) -> int:
    found = text.find("\n", index)
    return len(text) if found < 0 else found


def _end_of_meta(text: str, index: int, line: int) -> tuple[int, int]:
    """Past a meta-command: its line, and the next while a line ends with a backslash."""
    end = _end_of_line(text, index)
    while end < len(text) and text[end - 1] == "\\":
        line += 1
        end = _end_of_line(text, end + 1)
    return end, line


def _past(text: str, index: int, closing: str, line: int) -> tuple[int, int]:
    """Past the quote or comment opened at index, which closing ends (the lines counted)."""
    found = text.find(closing, index + 1 if closing in "'\"" else index + 2)
    end = len(text) if found < 0 else found + len(closing)
    return end, line + text.count("\n", index, end)


def _past_token(text: str, index: int, line: int) -> tuple[int, int]:
    """Past one piece of SQL: a quoted string or identifier, a dollar-quoted body, a char."""
    if text[index] in "'\"":
        return _past(text, index, text[index], line)
    quote = _DOLLAR_QUOTE.match(text, index)
    if quote is not None:
        found = text.find(quote[0], quote.end())
        end = len(text) if found < 0 else found + len(quote[0])
        return end, line + text.count("\n", index, end)
    return index + 1, line
