"""A server's variant, the settings and kernel tunables its cells set around it, and the label
(its name and variant) that every output names the server by: the report's "server" axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgbenchlab.records.version import major_text
from pgbenchlab.redaction import redact_settings
from pgbenchlab.store import RunRecord


def server_label(name: str, variant: Mapping[str, Any]) -> str:
    """A server's name with its variant, the value of the report's "server" axis."""
    return name + "".join(f" {k}={v}" for k, v in sorted(variant.items()))


def run_variant(run: RunRecord) -> dict[str, str]:
    """What a stored run's cell set around its server, its settings and kernel tunables, masked
    as the servers table masks the variants it records (`RunSpec.variant`)."""
    return redact_settings(dict(run.spec.server_settings + run.spec.sysctl))


def versions_order(servers: Sequence[tuple[str, int]]) -> list[str]:
    """The server labels of (label, server_version_num) pairs, oldest major first (stable within
    a major) when they differ by major version; none otherwise (versions are then no axis of
    their own)."""
    if len({major_text(version) for _, version in servers}) < 2:
        return []
    return [label for label, _ in sorted(servers, key=lambda s: s[1])]
