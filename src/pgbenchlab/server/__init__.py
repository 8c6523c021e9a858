"""PostgreSQL servers: managed clusters (initdb, settings, start, stop) and external servers.

Runners and samplers see a server only through `Server`: a name, an `Endpoint` to connect to,
and lifecycle calls that an external server answers without touching anything. A managed
server acts on its machine only through its `hosts.Host`.

`endpoint` holds the records and the interface, `settings` what a plan may set and how
PostgreSQL is asked about it, `cluster_files` what pgbenchlab leaves in and about a data
directory, `managed` and `external` the two kinds of server, `tablespaces` a managed
cluster's tablespaces. May import hosts, installs, osuser, claims, redaction, errors and plan
(the dataset's tablespaces).
"""

from pgbenchlab.server.cluster_files import (
    LOG_FILE,
    MARKER,
    SOCKET_PREFIX,
    SOCKET_RECORD,
    check_data_dir,
    marker_owner,
    postmaster_pid,
    remove_cluster_files,
    stop_leftover,
)
from pgbenchlab.server.endpoint import (
    LOST_NETWORK_OPTIONS,
    RESERVED_SETTINGS,
    Endpoint,
    Server,
    ServerFacts,
    libpq_environment,
    libpq_environment_names,
)
from pgbenchlab.server.external import ExternalServer
from pgbenchlab.server.managed import SUPERUSER, ManagedServer, client_endpoint
from pgbenchlab.server.settings import (
    BASE_SETTINGS,
    PER_TRANSACTION,
    SETTINGS_FILE,
    settings_problem,
)

__all__ = [
    "BASE_SETTINGS",
    "LOG_FILE",
    "LOST_NETWORK_OPTIONS",
    "MARKER",
    "PER_TRANSACTION",
    "RESERVED_SETTINGS",
    "SETTINGS_FILE",
    "SOCKET_PREFIX",
    "SOCKET_RECORD",
    "SUPERUSER",
    "Endpoint",
    "ExternalServer",
    "ManagedServer",
    "Server",
    "ServerFacts",
    "check_data_dir",
    "client_endpoint",
    "libpq_environment",
    "libpq_environment_names",
    "marker_owner",
    "postmaster_pid",
    "remove_cluster_files",
    "settings_problem",
    "stop_leftover",
]
