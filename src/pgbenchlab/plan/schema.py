"""What a plan may say: the keys of each table and the values some of them allow."""

import re

from pgbenchlab.records.cell import DEFAULT_MAX_TRIES as DEFAULT_MAX_TRIES
from pgbenchlab.records.cell import PROFILED_EXTRA as PROFILED_EXTRA

BUILTINS = {
    "tpcb-like": "tpcb-like",
    "read-write": "tpcb-like",
    "simple-update": "simple-update",
    "select-only": "select-only",
    "read-only": "select-only",
}
ORDERS = ("interleaved", "sequential", "random")
PROTOCOLS = ("simple", "extended", "prepared")
# How pgbench reaches the server: the Unix socket, TCP, TCP with TLS (verify-full), a managed
# PgBouncer in front of it ([pooler]).
CONNECTIONS = ("socket", "tcp", "tls", "pgbouncer")
VACUUM_MODES = ("pgbench", "all", "none")
REINIT_MODES = ("never", "per-scale", "per-run")
LATENCY_LOG_MODES = ("auto", "full", "off")
# CPU profiles: none, one extra repeat per cell kept out of the statistics, or every run.
PROFILE_MODES = ("off", "auto", "on")
# Counting mode: timed runs, or the server under callgrind counting instructions per transaction.
COUNT_MODES = ("off", "instructions")
RESERVED_SETTINGS = frozenset(
    {"port", "listen_addresses", "unix_socket_directories", "unix_socket_permissions"}
    | {"ssl", "ssl_cert_file", "ssl_key_file"}
)

TOP_KEYS = (
    "campaign",
    "defaults",
    "pgbench",
    "dataset",
    "server",
    "server_group",
    "matrix",
    "build",
    "host",
    "pooler",
)
CAMPAIGN_KEYS = (
    "name",
    "repeats",
    "min_repeats",
    "max_repeats",
    "precision",
    "decide",
    "equivalence",
    "correction",
    "order",
    "seed",
    "description",
    "quick",
    "restart",
)
# Between rounds of repeats: nothing, or every managed server restarted and the page cache
# dropped (the restart-to-restart noise floor).
RESTART_MODES = ("never", "each-round")
OPTION_KEYS = (
    "duration",
    "transactions",
    "warmup",
    "protocol",
    "threads",
    "vacuum",
    "checkpoint",
    "reinit",
    "latency_log",
    "rate",
    "latency_limit",
    "connect",
    "max_tries",
    "connection",
    "profile",
    "count",
)
# How long a run lasts: one choice, made by the most specific table that gives either.
RUN_LENGTH = ("duration", "transactions")
MAX_RUNS = 1_000_000  # runs in one campaign; far beyond any real one (1 s runs: 11 days)
AXIS_KEYS = (
    "scale",
    "workload",
    "clients",
    "rate",
    "latency_limit",
    "connect",
    "protocol",
    "connection",
)
# A server's own options (besides its axes): its runs profiled or not, counted or timed.
SERVER_OPTIONS = ("profile", "count")
SERVER_KEYS = (
    "name",
    "description",
    "install",
    "dsn",
    "settings",
    "data_dir",
    "init",
    "cpus",
    "numa",
    "host",
    "prepare",
    *AXIS_KEYS,
    "setting",
    *SERVER_OPTIONS,
)
PREPARE_KEYS = ("duration", "workload", "clients")
HOST_KEYS = ("name", "ssh", "port", "identity", "known_hosts")
GROUP_KEYS = ("name", "servers", "solo", *AXIS_KEYS)
WORKLOAD_KEYS = (
    "name",
    "builtin",
    "script",
    "scripts",
    "weight",
    "define",
    *OPTION_KEYS,
    "clients",
)
PGBENCH_KEYS = ("install", "cpus", "numa", "hosts", "profile", "keep_logs")
BUILD_KEYS = (
    "source", "ref", "configure", "compiler", "build_system", "patches", "series", "prefixes",
    "from", "rebuild",
)  # fmt: skip
# rebuild = N: at most this many builds of the same source, each laid out differently.
MAX_REBUILD = 4
MATRIX_KEYS = (*AXIS_KEYS, "setting", "sysctl", "sysfs")

# A kernel tunable's name as sysctl writes it: vm.dirty_bytes, net.ipv4.tcp_fin_timeout, ...
SYSCTL_NAME = re.compile(r"[a-z0-9_]+(\.[a-z0-9_-]+)+")
# A file under /sys, relative to it: block/sda/queue/scheduler, kernel/mm/transparent_hugepage/...
SYSFS_NAME = re.compile(r"[A-Za-z0-9_:.-]+(/[A-Za-z0-9_:.-]+)+")
