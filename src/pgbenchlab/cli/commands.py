"""The commands, in the order `pgbenchlab --help` lists them: one module each (see `cli`)."""

from __future__ import annotations

from pgbenchlab.cli import (
    bisect,
    build,
    builds,
    campaigns,
    capacity,
    clean,
    compare,
    export,
    follow,
    hosts,
    imports,
    installs,
    merge,
    new,
    profile,
    report,
    run,
    runs,
    show,
)

COMMANDS = (
    installs,
    new,
    hosts,
    build,
    builds,
    run,
    merge,
    imports,
    capacity,
    runs,
    show,
    profile,
    export,
    report,
    compare,
    bisect,
    follow,
    campaigns,
    clean,
)
