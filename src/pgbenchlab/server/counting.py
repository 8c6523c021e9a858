"""A counting server's start (`count = "instructions"`): postgres under callgrind, each
process writing its counts into the data directory's count directory when it exits."""

from __future__ import annotations

import shlex
from pathlib import PurePath

from pgbenchlab.hosts import Account, Host

COUNT_DIR = "pgbenchlab_counts"
# Each process's counts from its fork: callgrind zeroes them when the postmaster enters
# fork_process, else a child would start with everything its parent had executed.
CALLGRIND = (
    "valgrind", "--tool=callgrind", "--trace-children=yes", "--zero-before=fork_process",
    "--compress-strings=no", "--compress-pos=no", "--dump-line=no", "-q",
)  # fmt: skip


def callgrind_wrapper(postgres: PurePath, count_dir: PurePath) -> str:
    """The script pg_ctl starts instead of postgres: postgres under callgrind."""
    files = [
        f"--callgrind-out-file={count_dir}/callgrind.%p",
        f"--log-file={count_dir}/valgrind.log",
    ]
    argv = " ".join(shlex.quote(a) for a in [*CALLGRIND, *files, str(postgres)])
    return f'#!/bin/sh\nexec {argv} "$@"\n'


def counted_start(host: Host, postgres: PurePath, count_dir: PurePath, owner: Account) -> list[str]:
    """pg_ctl's -p for a counting server: a script that starts postgres under callgrind, with
    an empty directory for the counts."""
    host.remove_tree(count_dir)
    host.mkdir(count_dir, owner=owner)
    wrapper = count_dir / "postgres"
    host.write_text(wrapper, callgrind_wrapper(postgres, count_dir), mode=0o700, owner=owner)
    return ["-p", str(wrapper)]
