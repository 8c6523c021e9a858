"""pgbenchlab: a laboratory for PostgreSQL OLTP performance."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pgbenchlab")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
