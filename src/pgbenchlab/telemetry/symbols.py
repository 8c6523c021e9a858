"""What a server binary gives a profile: a full symbol table (static functions named), and
frame pointers (stacks unbroken up to main). Told from readelf and from the flags it was
compiled with (a build's provenance, else pg_config --cflags); what is missing is said with
how it limits the stacks."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from pgbenchlab.hosts import LOCAL_HOST, Host

FRAME_POINTER_FLAG = "-fno-omit-frame-pointer"
_SECTION = re.compile(r"\]\s+(\.\S+)\s")


def _sections(binary: PurePath, host: Host) -> set[str] | None:
    try:
        done = host.run(["readelf", "-S", "-W", str(binary)], timeout=60)
    except OSError:
        return None
    return set(_SECTION.findall(done.stdout)) if done.returncode == 0 else None


def _producer(binary: PurePath, host: Host) -> str | None:
    """The compiler command recorded in the debug info of the first compile unit."""
    try:
        done = host.run(
            ["readelf", "--debug-dump=info", "--dwarf-depth=1", str(binary)], timeout=120
        )
    except OSError:
        return None
    found = re.search(r"DW_AT_producer\s*:\s*(?:\(indirect string[^)]*\):\s*)?(.*)", done.stdout)
    return found.group(1) if found else None


def frame_pointers(
    binary: PurePath, provenance: dict[str, Any] | None, sections: set[str], host: Host
) -> bool | None:
    """Whether the binary keeps frame pointers (None: cannot tell)."""
    if provenance is not None:
        flags = " ".join(str(o) for o in provenance.get("configure_applied", []))
        return FRAME_POINTER_FLAG in flags
    try:  # a packaged server's pg_config tells the flags it was compiled with
        done = host.run([str(binary.parent / "pg_config"), "--cflags"], timeout=30)
        if done.returncode == 0 and done.stdout.strip():
            return FRAME_POINTER_FLAG in done.stdout
    except OSError:
        pass
    if ".debug_info" in sections:
        producer = _producer(binary, host)
        if producer is not None:
            return FRAME_POINTER_FLAG in producer
    return None


def symbols_note(
    binary: PurePath, provenance: dict[str, Any] | None = None, host: Host = LOCAL_HOST
) -> str:
    """What the binary lacks for a profile and what that limits ("" when nothing)."""
    sections = _sections(binary, host)
    if sections is None:
        return f"{binary}: readelf could not read it; symbols and frame pointers unknown"
    missing = []
    if ".symtab" not in sections:
        missing.append(
            "no full symbol table (stripped; only exported functions are named, static ones "
            f"show as [{binary.name}])"
        )
    pointers = frame_pointers(binary, provenance, sections, host)
    if not pointers:
        how = "built without frame pointers" if pointers is False else "frame pointers unknown"
        missing.append(
            f"{how}: stacks break below the sampled function, so self time is right but "
            "callers and total time are not (a build with -fno-omit-frame-pointer gives whole "
            "stacks)"
        )
    return f"{binary}: " + "; ".join(missing) if missing else ""
