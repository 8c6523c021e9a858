"""The campaign's servers: what `preflight` checks of them before anything starts (installations,
settings, data directories, external servers), each managed one's data directory claimed for
the campaign, started on first use and restarted for another setting variant."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from pgbenchlab import dataset, files, installs, osuser
from pgbenchlab import server as server_module
from pgbenchlab.builds.shipping import shipped
from pgbenchlab.campaign.hosts import CampaignHosts
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.claims import Claim
from pgbenchlab.errors import PlanError, ServerError, UserError
from pgbenchlab.hosts import LOCAL_HOST, Host
from pgbenchlab.installs import Installation
from pgbenchlab.osuser import OsAccount
from pgbenchlab.plan import POOLER, Plan, RunSpec, ServerPlan
from pgbenchlab.server import SUPERUSER, ExternalServer, ManagedServer, Server, tablespaces
from pgbenchlab.server.pooler import (
    PgBouncer,
    PoolerConfig,
    find_pgbouncer,
    pgbouncer_version,
    prepared_problem,
)


class ServerPool(Protocol):
    """What a campaign asks of its servers (`Servers`, or a stand-in in tests)."""

    def claim(self) -> None: ...

    def release(self) -> None: ...

    def get(self, spec: RunSpec) -> tuple[Server, bool]: ...

    def stop_all(self) -> list[str]: ...


class Servers:
    """The campaign's servers, started on first use, restarted for another setting variant."""

    def __init__(
        self,
        plan: Plan,
        results_dir: Path,
        found: list[Installation],
        hosts: CampaignHosts | None = None,
    ) -> None:
        self.plan = plan
        self.hosts = hosts or CampaignHosts(plan)  # where each server runs
        self.results_dir = results_dir
        self.found = found  # this machine's installations
        local_managed = any(s.managed and s.host is None for s in plan.servers)
        self.account = osuser.server_account() if local_managed else None
        self.live: dict[str, Server] = {}
        self.variants: dict[str, tuple[tuple[str, str], ...]] = {}
        self.claims: dict[str, Claim] = {}

    def install(self, server: ServerPlan) -> Installation:
        """The server's installation, found on its host."""
        spec = server.install or ("embedded" if server.host is None else "newest")
        if server.host is None:
            return installs.resolve(spec, self.found)
        host = self.hosts.get(server.host)
        if spec.startswith((installs.BUILD_PREFIX, installs.BINARIES_PREFIX)):
            return shipped(installs.resolve(spec, self.found), host)  # made here, copied there
        if "/" in spec:  # a bin directory there, found or not
            return installs.resolve(spec, [], host=host)
        found = self.hosts.installations(server.host)
        if not any(i.has_server for i in found):
            raise ServerError(
                f"no PostgreSQL server is installed on host {server.host}: install one there "
                "(e.g. apt install postgresql) or run this server elsewhere",
                where=f"{self.plan.path}: server {server.name}",
            )
        if spec == "newest":
            return next(i for i in found if i.has_server)
        return installs.resolve(spec, found, host=host)

    def claim(self) -> None:
        """Hold every managed server's data directory for this campaign (see claims.py)."""
        owner = f"campaign {self.plan.name} (results {self.results_dir}, pid {os.getpid()})"
        for server in self.plan.servers:
            if server.managed and server.name not in self.claims:
                host = self.hosts.get(server.host)
                self.claims[server.name] = Claim(self.data_dir(server), owner, host)

    def release(self) -> None:
        for claim in self.claims.values():
            claim.release()
        self.claims.clear()

    def data_dir(self, plan: ServerPlan) -> Path:
        if plan.data_dir:
            return Path(plan.data_dir)
        if plan.host is not None:
            state = self.hosts.get(plan.host).state_dir()
            assert state is not None
            return Path(state / "clusters" / self.plan.name / plan.name / "data")
        assert self.account is not None
        root = cluster_root(self.results_dir, self.account)
        return files.inside(root, self.plan.name, plan.name, "data")

    def check_data_dir(self, server: ServerPlan) -> None:
        """The data_dir a managed server names: not inside another cluster, and one the
        server account can create (here; on a host, where its login can)."""
        if not server.data_dir:
            return
        data_dir = Path(server.data_dir)
        if server.host is not None:
            server_module.check_data_dir(data_dir, self.hosts.get(server.host))
            return
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
            self._make_tablespaces(server)
            return server, True
        if isinstance(server, ManagedServer) and (
            self.variants.get(plan.name) != spec.server_settings or not server.is_alive()
        ):
            self._configure(server, plan, spec.server_settings)
            server.restart()
            return server, True
        return server, False

    def _make_tablespaces(self, server: Server) -> None:
        """The dataset's tablespaces in a managed cluster, made once it runs."""
        if isinstance(server, ManagedServer) and self.plan.dataset.tablespaces:
            wanted = tablespaces.planned(self.plan.dataset, server.name, server.data_dir)
            tablespaces.ensure(server.endpoint, wanted, server.account, server.host)

    def _configure(
        self, server: Server, plan: ServerPlan, variant: tuple[tuple[str, str], ...]
    ) -> None:
        if isinstance(server, ManagedServer):
            server.settings = dict(plan.settings) | dict(variant)
        self.variants[plan.name] = variant

    def _create(self, plan: ServerPlan) -> Server:
        if not plan.managed:
            assert plan.dsn is not None
            host = None if plan.host is None else self.hosts.get(plan.host)
            return ExternalServer(plan.name, plan.dsn, init_allowed=plan.init, host=host)
        host = self.hosts.get(plan.host)
        install = self.install(plan)
        data_dir = self.data_dir(plan)
        if plan.host is not None:
            account = self.hosts.account(plan.host)
            host.mkdir(data_dir.parent, owner=account)
        else:
            assert self.account is not None
            account = self.account
            install = osuser.reachable_install(install, account)
            if not plan.data_dir:
                account.make_dir(data_dir.parent.parent, 0o700)
                account.make_dir(data_dir.parent, 0o700)
        return ManagedServer(
            plan.name,
            install,
            data_dir,
            account,
            dict(plan.settings),
            claim=self.claims.get(plan.name),
            owner_tag=str(self.results_dir),  # in its marker: `clean` removes only its own
            host=host,
            cpus=plan.cpus,
            numa=plan.numa,
            tls=self.plan.uses_connection("tls", plan.name),
            address=host.address,
            # from another host, pgbench's address is not the server's: any, by password
            client_network=None if plan.host is None else "all",
            counting=self.plan.counts(plan.name),
            pooler=self.pooler(plan, account, host),
        )

    def pooler(self, plan: ServerPlan, account: OsAccount, host: Host) -> PgBouncer | None:
        """The PgBouncer in front of the server, on its host, when a run connects through it."""
        if not self.plan.uses_connection(POOLER, plan.name):
            return None
        wanted = self.plan.pooler
        binary = find_pgbouncer(wanted.install, host)
        config = PoolerConfig(
            binary,
            wanted.pool_mode,
            wanted.pool_size,
            wanted.max_client_conn,
            wanted.cpus,
            SUPERUSER,
        )
        return PgBouncer(plan.name, config, account, host)

    def stop_all(self) -> list[str]:
        """Stop every started server; those that could not be (their host unreachable) are
        told, and stopped by the next campaign that uses their data directory."""
        unstopped = []
        for server in self.live.values():
            try:
                server.stop()
            except (UserError, OSError) as exc:
                unstopped.append(f"server {server.name} could not be stopped: {exc}")
        self.live.clear()
        return unstopped


def data_dir_clashes(plan: Plan) -> list[str]:
    """Managed servers that would share a data directory, one line per pair."""
    seen: dict[tuple[str | None, Path], str] = {}
    clashes = []
    for server in plan.servers:
        if server.managed and server.data_dir:
            path = (server.host, Path(server.data_dir).resolve())
            if path in seen:
                clashes.append(
                    f"{plan.path}: servers {seen[path]} and {server.name} both use data_dir "
                    f"{path[1]}: give each server a directory of its own"
                )
            seen.setdefault(path, server.name)
    return clashes


def check_external(server: ServerPlan, plan: Plan) -> None:
    """An external server reached (as pgbench will), and without init = true, its pgbench
    tables there at every scale the plan runs on it."""
    assert server.dsn is not None
    external = ExternalServer(server.name, server.dsn, init_allowed=server.init)
    external.prepare()
    if not server.init:
        runs = (s for s in plan.specs if server.name in plan.members(s.server))
        dataset.require_datasets(external, (s.scale for s in runs))


def check_settings(
    server: ServerPlan, plan: Plan, install: Installation, host: Host = LOCAL_HOST
) -> None:
    """Every combination of settings the server will start with, judged by its own postgres."""
    variants = {
        tuple((dict(server.settings) | dict(spec.server_settings)).items())
        for spec in plan.specs
        if server.name in plan.members(spec.server)
    }
    for variant in sorted(variants):
        problem = server_module.settings_problem(install, dict(variant), host)
        if problem is not None:
            raise ServerError(problem, where=f"{plan.path}: server {server.name}")


def check_tls(server: ServerPlan, plan: Plan, install: Installation, host: Host) -> None:
    """connection = "tls" needs a server built with TLS support (on its host)."""
    if server_module.settings_problem(install, {"ssl": "on"}, host) is not None:
        raise ServerError(
            f'server {server.name}: connection "tls" needs a PostgreSQL built with TLS support '
            f"(--with-openssl); installation {install.name} ({install.version.text}) has none: "
            'remove "tls" for it or build one with configure = ["--with-openssl"]',
            where=plan.path,
        )


def check_pooler(plan: Plan, host: Host) -> None:
    """connection = "pgbouncer": a PgBouncer found on a host that runs a pooled server, and one
    that can pool the runs through it (pgbench's -M prepared through a transaction or statement
    pool needs 1.21)."""
    binary = find_pgbouncer(plan.pooler.install, host)
    text, version = pgbouncer_version(binary, host)
    prepared = any(
        s.options.connection == POOLER and s.options.protocol == "prepared" for s in plan.specs
    )
    problem = prepared_problem(plan.pooler.pool_mode, version, text) if prepared else None
    if problem is not None:
        raise PlanError(problem, where=plan.path)
