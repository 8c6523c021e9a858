"""What a plan may say: the keys of each table and the values some of them allow."""

BUILTINS = {
    "tpcb-like": "tpcb-like",
    "read-write": "tpcb-like",
    "simple-update": "simple-update",
    "select-only": "select-only",
    "read-only": "select-only",
}
ORDERS = ("interleaved", "sequential", "random")
PROTOCOLS = ("simple", "extended", "prepared")
VACUUM_MODES = ("pgbench", "all", "none")
REINIT_MODES = ("never", "per-scale", "per-run")
LATENCY_LOG_MODES = ("auto", "full", "off")
RESERVED_SETTINGS = frozenset(
    {"port", "listen_addresses", "unix_socket_directories", "unix_socket_permissions"}
)

TOP_KEYS = ("campaign", "defaults", "pgbench", "server", "matrix", "build")
CAMPAIGN_KEYS = ("name", "repeats", "order", "seed", "description")
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
)
MAX_RUNS = 1_000_000  # runs in one campaign; far beyond any real one (1 s runs: 11 days)
AXIS_KEYS = ("scale", "workload", "clients", "rate", "latency_limit", "connect", "protocol")
SERVER_KEYS = ("name", "install", "dsn", "settings", "data_dir", "init", *AXIS_KEYS, "setting")
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
PGBENCH_KEYS = ("install",)
BUILD_KEYS = ("source", "ref", "configure", "compiler", "build_system", "patches", "from")
MATRIX_KEYS = (*AXIS_KEYS, "setting")

DEFAULT_MAX_TRIES = 1  # pgbench's own default: failed transactions are not retried
