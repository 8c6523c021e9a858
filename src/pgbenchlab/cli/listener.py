"""The HTTP listener of `--metrics HOST:PORT`: bound where asked and nowhere else, before
anything starts (a busy port refused with one line), serving a campaign's live metrics
(`metrics.CampaignMetrics`) from its own thread until the campaign ends.

The OpenMetrics text format is served unless a client asks for Prometheus's older text
format; prometheus_client writes either (and negotiates it, with compression)."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any, TextIO
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app

from pgbenchlab.cli.metrics import CampaignMetrics
from pgbenchlab.errors import UserError

ASKED_FORMATS = ("application/openmetrics-text", "text/plain")
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self}/metrics"


def parse_address(text: str) -> Address:
    """HOST:PORT ([V6]:PORT): an address to listen on, named in full (no default interface)."""
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # an IPv6 address needs its brackets, or its port is ambiguous
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(
            f"--metrics {text!r}: give HOST:PORT, such as 127.0.0.1:9187 ([::1]:9187 for IPv6; "
            "0.0.0.0:9187 listens on every interface)"
        )
    return Address(host, int(port))


class _Listener(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in progress never holds the campaign's end


class _Listener6(_Listener):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged: the campaign's display is the terminal's."""


def openmetrics_first(app: WSGIApplication) -> WSGIApplication:
    """The app, serving OpenMetrics to a client that names neither format (curl's */*)."""

    def serve(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        accept = environ.get("HTTP_ACCEPT", "")
        if not any(kind in accept for kind in ASKED_FORMATS):
            environ["HTTP_ACCEPT"] = OPENMETRICS
        return app(environ, start_response)

    return serve


def listen(address: Address, app: WSGIApplication) -> WSGIServer:
    """A server bound to address (not serving yet); one line says why it cannot be."""
    try:
        found = socket.getaddrinfo(
            address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, *_, sockaddr = found[0]
        kind = _Listener6 if family == socket.AF_INET6 else _Listener
        return make_server(str(sockaddr[0]), address.port, app, kind, handler_class=_Quiet)
    except socket.gaierror as exc:
        raise UserError(f"--metrics {address}: no such host ({exc.strerror})") from None
    except OSError as exc:
        why = {
            errno.EADDRINUSE: "the port is in use; choose a free one",
            errno.EADDRNOTAVAIL: "no interface of this machine has that address",
            errno.EACCES: "not allowed to listen there (ports below 1024 need privileges)",
        }.get(exc.errno or 0, f"cannot listen there ({exc.strerror})")
        raise UserError(f"--metrics {address}: {why}") from None


@contextmanager
def serving(address: Address | None, say: TextIO | None) -> Iterator[CampaignMetrics | None]:
    """The campaign's metrics served at address while the block runs (None: not asked); where
    they are is said on `say`."""
    if address is None:
        yield None
        return
    metrics = CampaignMetrics()
    registry = CollectorRegistry()
    registry.register(metrics)
    server = listen(address, openmetrics_first(make_wsgi_app(registry)))
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    if say is not None:
        print(f"pgbenchlab: live metrics at {address.url}", file=say)
    try:
        yield metrics
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
