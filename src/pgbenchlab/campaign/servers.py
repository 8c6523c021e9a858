"""The campaign's servers: checked before anything starts, each managed one's data directory
claimed for the campaign, started on first use and restarted for another setting variant."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from pgbenchlab import dataset, files, installs, osuser
from pgbenchlab import server as server_module
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.claims import Claim
from pgbenchlab.errors import PlanError, ServerError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation
from pgbenchlab.plan import Plan, RunSpec, ServerPlan
from pgbenchlab.server import ExternalServer, ManagedServer, Server


class ServerPool(Protocol):
    """What a campaign asks of its servers (`Servers`, or a stand-in in tests)."""

    def claim(self) -> None: ...

    def release(self) -> None: ...

    def get(self, spec: RunSpec) -> tuple[Server, bool]: ...

    def stop_all(self) -> None: ...


class Servers:
    """The campaign's servers, started on first use, restarted for another setting variant."""

    def __init__(
        self, plan: Plan, results_dir: Path, found: list[Installation], host: Host = LOCAL_HOST
    ) -> None:
        self.plan = plan
        self.host = host  # where managed servers run (one host for all, until remote hosts)
        self.results_dir = results_dir
        self.found = found
        self.account = osuser.server_account() if any(s.managed for s in plan.servers) else None
        self.live: dict[str, Server] = {}
        self.variants: dict[str, tuple[tuple[str, str], ...]] = {}
        self.claims: dict[str, Claim] = {}

    def validate(self) -> None:
        """Everything a user can get wrong about servers, checked before anything starts:
        installations, setting names, data directories, external servers' reachability and,
        without init = true, their pgbench tables."""
        self.check_distinct_data_dirs()
        for server in self.plan.servers:
            if server.managed:
                install = installs.resolve(server.install or "embedded", self.found)
                check_settings(server, self.plan, install)
                if self.plan.uses_connection("tls", server.name):
                    check_tls(server, self.plan, install)
                if server.data_dir:
                    self.check_data_dir(Path(server.data_dir))
            else:
                assert server.dsn is not None
                external = ExternalServer(server.name, server.dsn, init_allowed=server.init)
                external.prepare()
                if not server.init:
                    scales = (s.scale for s in self.plan.specs if s.server == server.name)
                    dataset.require_datasets(external, scales)

    def check_distinct_data_dirs(self) -> None:
        seen: dict[Path, str] = {}
        for server in self.plan.servers:
            if server.managed and server.data_dir:
                path = Path(server.data_dir).resolve()
                if path in seen:
                    raise PlanError(
                        f"servers {seen[path]} and {server.name} both use data_dir {path}: "
                        "give each server a directory of its own",
                        where=self.plan.path,
                    )
                seen[path] = server.name

    def claim(self) -> None:
        """Hold every managed server's data directory for this campaign (see claims.py)."""
        owner = f"campaign {self.plan.name} (results {self.results_dir}, pid {os.getpid()})"
        for server in self.plan.servers:
            if server.managed and server.name not in self.claims:
                self.claims[server.name] = Claim(self.data_dir(server), owner, self.host)

    def release(self) -> None:
        for claim in self.claims.values():
            claim.release()
        self.claims.clear()

    def data_dir(self, plan: ServerPlan) -> Path:
        if plan.data_dir:
            return Path(plan.data_dir)
        assert self.account is not None
        root = cluster_root(self.results_dir, self.account)
        return files.inside(root, self.plan.name, plan.name, "data")

    def check_data_dir(self, data_dir: Path) -> None:
        server_module.check_data_dir(data_dir)
        assert self.account is not None
        if not data_dir.exists() and not self.account.can_create(data_dir):
            raise ServerError(
                f"the server account {self.account.name} cannot create this directory: "
                "make its parent writable (and every ancestor traversable) for it, "
                "or choose another data_dir",
                where=str(data_dir),
            )

    def get(self, spec: RunSpec) -> tuple[Server, bool]:
        """The running server for spec, and whether it was (re)started for it."""
        plan = self.plan.server(spec.server)
        server = self.live.get(plan.name)
        if server is None:
            server = self._create(plan)
            self.live[plan.name] = server
            self._configure(server, plan, spec.server_settings)
            server.prepare()
            return server, True
        if isinstance(server, ManagedServer) and (
            self.variants.get(plan.name) != spec.server_settings or not server.is_alive()
        ):
            self._configure(server, plan, spec.server_settings)
            server.restart()
            return server, True
        return server, False

    def _configure(
        self, server: Server, plan: ServerPlan, variant: tuple[tuple[str, str], ...]
    ) -> None:
        if isinstance(server, ManagedServer):
            server.settings = dict(plan.settings) | dict(variant)
        self.variants[plan.name] = variant

    def _create(self, plan: ServerPlan) -> Server:
        if not plan.managed:
            assert plan.dsn is not None
            return ExternalServer(plan.name, plan.dsn, init_allowed=plan.init)
        assert self.account is not None
        install = installs.resolve(plan.install or "embedded", self.found)
        install = osuser.reachable_install(install, self.account)
        data_dir = self.data_dir(plan)
        if not plan.data_dir:
            self.account.make_dir(data_dir.parent.parent, 0o700)
            self.account.make_dir(data_dir.parent, 0o700)
        return ManagedServer(
            plan.name,
            install,
            data_dir,
            self.account,
            dict(plan.settings),
            claim=self.claims.get(plan.name),
            host=self.host,
            tls=self.plan.uses_connection("tls", plan.name),
        )

    def stop_all(self) -> None:
        for server in self.live.values():
            server.stop()
        self.live.clear()


def check_settings(server: ServerPlan, plan: Plan, install: Installation) -> None:
    """Every combination of settings the server will start with, judged by its own postgres."""
    variants = {
        tuple((dict(server.settings) | dict(spec.server_settings)).items())
        for spec in plan.specs
        if spec.server == server.name
    }
    for variant in sorted(variants):
        problem = server_module.settings_problem(install, dict(variant))
        if problem is not None:
            raise ServerError(problem, where=f"{plan.path}: server {server.name}")


def check_tls(server: ServerPlan, plan: Plan, install: Installation) -> None:
    """connection = "tls" needs a server built with TLS support."""
    if server_module.settings_problem(install, {"ssl": "on"}) is not None:
        raise ServerError(
            f'server {server.name}: connection "tls" needs a PostgreSQL built with TLS support '
            f"(--with-openssl); installation {install.name} ({install.version.text}) has none: "
            'remove "tls" for it or build one with configure = ["--with-openssl"]',
            where=plan.path,
        )
