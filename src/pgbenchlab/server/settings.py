"""What a plan may set on a managed server, and whether its PostgreSQL would accept it."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import PurePath, PurePosixPath

from pgbenchlab import installs
from pgbenchlab.hosts import LOCAL_HOST, Finished, Host
from pgbenchlab.installs import Installation
from pgbenchlab.redaction import MASK, redact_setting, secrets_in

SETTINGS_FILE = "pgbenchlab.conf"
BASE_SETTINGS: dict[str, str] = {
    "log_checkpoints": "on",
    "log_autovacuum_min_duration": "0",
    "log_line_prefix": "%m [%p] ",
    "log_timezone": "UTC",
    "lc_messages": "C",
    "logging_collector": "off",
}
# Words a configuration file reads as directives, not settings.
CONFIG_DIRECTIVES = frozenset({"include", "include_dir", "include_if_exists"})
# Where the cluster's files are: pgbenchlab's to choose, like its port.
LOCATION_SETTINGS = frozenset({"data_directory", "config_file", "hba_file", "ident_file"})
# Settings of the current transaction: PostgreSQL takes them from a configuration file without
# complaint, then every transaction starts from the default_… setting instead.
PER_TRANSACTION = frozenset(
    {"transaction_isolation", "transaction_read_only", "transaction_deferrable"}
)
TEMP_PARENT = PurePosixPath("/tmp")
POSTGRES_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PG_COLOR": "never"}


def postgres_env(install: Installation) -> dict[str, str]:
    """The environment an installation's programs run in. A build from source names its
    library directory on this machine in its programs (RUNPATH: initdb needs its libpq); a
    copy of it on another host finds its own through LD_LIBRARY_PATH (prebuilt binaries name
    theirs relative to the program already)."""
    if install.source != "build":
        return dict(POSTGRES_ENV)
    return {**POSTGRES_ENV, "LD_LIBRARY_PATH": str(install.bin_dir.parent / "lib")}


_SETTING_NAME = re.compile(r"[A-Za-z0-9_.$]+")  # nothing a configuration line can be bent with
_SERVER_SAYS = re.compile(r"\b(?:LOG|WARNING|ERROR|FATAL|DETAIL|HINT):\s+(.*)")
_RANGE = re.compile(r'valid range for parameter "[^"]*" \((.*)\)')
_FAR_BELOW_ANY_MINIMUM = "-2147483647"


def _quote_setting(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def settings_text(settings: Mapping[str, str]) -> str:
    """A configuration file setting these, each value quoted."""
    return "".join(f"{key} = {_quote_setting(value)}\n" for key, value in settings.items())


def settings_problem(
    install: Installation, settings: Mapping[str, str], host: Host = LOCAL_HOST
) -> str | None:
    """Why the installation's server would refuse to start with these settings, or None.

    `postgres -C` reads a configuration file as the server does when it starts (names, values,
    units, ranges, enumerations, check hooks) and exits before it needs a data directory:
    4–11 ms, about what `--describe-config` costs, with nothing started or changed. A refusal
    costs one more read per setting, to name the one refused.
    """
    for name, value in settings.items():
        if reason := _refused_name(name):
            return f"setting {name} = {redact_setting(name, value)!r}: {reason}"
    if not settings or _postgres_refusal(install, settings, host) is None:
        return None
    for name, value in settings.items():
        if why := _postgres_refusal(install, {name: value}, host):
            shown = redact_setting(name, value)
            return f"setting {name} = {shown!r}: {_explained(install, name, why, host)}"
    names = ", ".join(settings)
    return f"settings {names} together: {_postgres_refusal(install, settings, host)}"


def _refused_name(name: str) -> str | None:
    if not _SETTING_NAME.fullmatch(name):
        return "not a setting name"
    if name.lower() in CONFIG_DIRECTIVES:
        return "a configuration-file directive, not a setting"
    if name.lower() in LOCATION_SETTINGS:
        return "where the cluster's files are is pgbenchlab's to choose; remove it"
    if name.lower() in PER_TRANSACTION:
        return (
            "a setting of one transaction, which a server's configuration cannot set (every "
            f"transaction starts from default_{name.lower()}); set default_{name.lower()}"
        )
    return None


def _postgres_refusal(install: Installation, settings: Mapping[str, str], host: Host) -> str | None:
    """What the installation's postgres says about a configuration file of these settings."""
    conf_dir = host.make_temp_dir("pgbl-settings-", TEMP_PARENT)
    try:
        done = _check_conf(install, settings, host, conf_dir)
    finally:
        host.remove_tree(conf_dir)
    if done.returncode == 0:
        return None
    said = [m.group(1) for line in done.stderr.splitlines() if (m := _SERVER_SAYS.search(line))]
    kept = [
        line.replace(f"{conf_dir}/", "")
        for line in said
        if not line.startswith(("configuration file", "skipping missing configuration file"))
    ]
    secrets = [s for n, v in settings.items() for s in secrets_in(n, v)]
    text = "; ".join(kept) or f"postgres exited with code {done.returncode}"
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def _check_conf(
    install: Installation, settings: Mapping[str, str], host: Host, conf_dir: PurePath
) -> Finished:
    host.write_text(conf_dir / "postgresql.conf", f"include '{SETTINGS_FILE}'\n")
    host.write_text(conf_dir / "postgresql.auto.conf", "")
    host.write_text(conf_dir / SETTINGS_FILE, settings_text(settings))
    # -C first: the one mode postgres allows root to run.
    argv = [str(install.binary("postgres")), "-C", "server_version_num", "-D", str(conf_dir)]
    return host.run(argv, env=postgres_env(install), timeout=60)


def _explained(install: Installation, name: str, why: str, host: Host) -> str:
    """PostgreSQL's refusal, with what it would allow where its message does not say."""
    major = install.version.major_text
    if why.startswith("unrecognized configuration parameter"):
        close = difflib.get_close_matches(
            name, list(installs.describe_settings(install, host)), n=1
        )
        hint = f'; did you mean "{close[0]}"?' if close else ""
        return f"PostgreSQL {major} has no such setting{hint}"
    if why.startswith("invalid value") and "; " not in why:
        probe = _postgres_refusal(install, {name: _FAR_BELOW_ANY_MINIMUM}, host) or ""
        if found := _RANGE.search(probe):
            return f"{why} (PostgreSQL {major} allows {found.group(1)})"
    return why
