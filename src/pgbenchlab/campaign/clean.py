"""`pgbenchlab clean`: stop and delete the managed clusters a results directory's campaigns
created."""

from __future__ import annotations

import shutil
from pathlib import Path

from pgbenchlab import osuser
from pgbenchlab import server as server_module
from pgbenchlab.campaign.layout import RESULTS_DB, cluster_root
from pgbenchlab.campaign.script_trial import remove_stale_trials
from pgbenchlab.claims import Claim
from pgbenchlab.errors import ServerError
from pgbenchlab.server.tablespaces import remove_linked
from pgbenchlab.store import Store


def remove_clusters(results_dir: Path) -> list[Path]:
    """Stop and delete the managed clusters a results directory's campaigns created: under its
    cluster root, and in the explicit data directories its servers table records (their
    contents only, as the directory may be a mount point) whose cluster this results
    directory's campaign made (its marker says so: a servers table merged from another
    machine's results names directories this one never made). Holds the campaign lock, so a
    running campaign's clusters are never touched; a data directory another campaign claims
    now is left alone. Also the trial clusters of `run --check`s that were killed."""
    results_dir = results_dir.resolve()
    account = osuser.server_account()
    root = cluster_root(results_dir, account)
    db = results_dir / RESULTS_DB
    store = Store(db) if db.exists() else None
    try:
        explicit = []
        if store is not None:
            store.acquire()
            explicit = [d for d in store.recorded_data_dirs() if not d.is_relative_to(root)]
        data_dirs = sorted(p.parent for p in root.glob(f"*/*/data/{server_module.MARKER}"))
        removed = [d for d in explicit if _remove_explicit_cluster(d, results_dir)]
        for data_dir in data_dirs:
            server_module.stop_leftover(data_dir)
            remove_linked(data_dir)  # its tablespaces, outside the cluster root
        shutil.rmtree(root, ignore_errors=True)
        return data_dirs + removed + remove_stale_trials()
    finally:
        if store is not None:
            store.close()


def _remove_explicit_cluster(data_dir: Path, results_dir: Path) -> bool:
    if server_module.marker_owner(data_dir) != str(results_dir):
        return False  # no cluster of ours: none there, or another results directory's
    try:
        claim = Claim(data_dir, "pgbenchlab clean")
    except ServerError:
        return False  # another campaign uses it now
    try:
        server_module.stop_leftover(data_dir)
        server_module.remove_cluster_files(data_dir)
        claim.set_state("")
    finally:
        claim.release()
    return True
