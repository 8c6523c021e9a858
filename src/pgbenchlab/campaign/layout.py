"""Where a campaign's files live under the results directory, and what is kept of each run.

The results database, the managed clusters' root (beside the results, or where the server
account reaches when running as root), one artifacts directory per run attempt, and the
archive of pgbench's raw output and logs in it (zstd-compressed, the argv as stored), beside
the certificate authority a TLS run verified its server against when that is on another host.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path

import zstandard

from pgbenchlab import files, osuser
from pgbenchlab.invocation import command
from pgbenchlab.plan import RunSpec
from pgbenchlab.redaction import redact_setting
from pgbenchlab.server import Endpoint
from pgbenchlab.store import artifact_parts
from pgbenchlab.store.faults import results_writes

RESULTS_DB = "results.db"
AUTHORITY_FILE = "server-ca.crt"  # the certificate authority pgbench verified a server against


def cluster_root(results_dir: Path, account: osuser.OsAccount) -> Path:
    """Where managed clusters live: beside the results, or (as root) where the account reaches."""
    if not account.is_switch:
        return results_dir / "clusters"
    key = hashlib.sha256(str(results_dir.resolve()).encode()).hexdigest()[:10]
    root = osuser.ROOT_STATE_DIR / "clusters" / key
    osuser.ROOT_STATE_DIR.mkdir(mode=0o755, exist_ok=True)
    account.make_dir(osuser.ROOT_STATE_DIR / "clusters", 0o755)
    account.make_dir(root)
    return root


def artifact_dir(results_dir: Path, campaign: str, campaign_id: int, spec: RunSpec) -> Path:
    """An empty directory for one run attempt's files (an earlier attempt's are removed)."""
    path = files.inside(
        results_dir, *artifact_parts(campaign, campaign_id, spec.sequence, spec.run_key)
    )
    shutil.rmtree(path, ignore_errors=True)  # an interrupted earlier attempt's leftovers
    with results_writes(path):
        path.mkdir(parents=True)
    return path


def place_authority(endpoint: Endpoint, artifacts: Path, server: str = "") -> Endpoint:
    """endpoint, verifying its server against an authority written into the run's artifacts
    (TLS to a server on another host: pgbench, or its generator host's copy, reads it there);
    in a group's run each member's under its server's name."""
    if endpoint.authority is None:
        return endpoint
    path = artifacts / (f"{server}-{AUTHORITY_FILE}" if server else AUTHORITY_FILE)
    with results_writes(path):
        path.write_text(endpoint.authority)
    return endpoint.trusting(str(path))


def log_files(artifacts: Path) -> list[Path]:
    """The per-transaction log files pgbench wrote into a run's artifacts directory."""
    return sorted(artifacts.glob(f"{command.LOG_PREFIX}.*"))


def archive(artifacts: Path, done: command.Completed, argv: tuple[str, ...]) -> tuple[str, ...]:
    """Keep pgbench's raw output and logs, zstd-compressed, beside the results database; the
    names of the files kept."""
    with results_writes(artifacts):
        compressor = zstandard.ZstdCompressor(level=3)
        (artifacts / "stdout.txt.zst").write_bytes(compressor.compress(done.stdout.encode()))
        (artifacts / "stderr.txt.zst").write_bytes(compressor.compress(done.stderr.encode()))
        (artifacts / "argv.json").write_text(json.dumps(list(argv)))
        for log in log_files(artifacts):
            if log.suffix == ".zst":
                continue
            with log.open("rb") as source, open(f"{log}.zst", "wb") as target:
                compressor.copy_stream(source, target)
            log.unlink()
    return tuple(sorted(p.name for p in artifacts.iterdir()))


def sanitize_argv(argv: tuple[str, ...], results_dir: Path) -> tuple[str, ...]:
    """argv as stored: the binary by name and paths relative to the results directory."""
    prefix = str(results_dir) + "/"
    cleaned = [Path(argv[0]).name]
    for previous, arg in itertools.pairwise(argv):
        if previous == "-D":  # a variable's value may be a connection string with a password
            name, _, value = arg.partition("=")
            arg = f"{name}={redact_setting(name, value)}"
        cleaned.append(arg.replace(prefix, ""))
    return tuple(cleaned)
