"""Study templates: the classic campaigns written as complete, commented plans for this
machine (`pgbenchlab new STUDY`).

:mod:`.facts` gathers what a template is computed from (CPUs, memory, free disk, the
installations and cached builds) into a frozen record; :mod:`.sizing` derives shared_buffers,
scales, client ladders and run lengths from it; :mod:`.throughput` (archaeology, platform,
scalability) and :mod:`.changes` (latency, tuning, patch) write the plans with what
:mod:`.common` writes for all of them (the header, [campaign], servers, the matrix's common
axes) and the estimated time, computed by parsing the plan written (so every template is a
valid plan). Pure functions of the facts apart from `facts.gather`.

Layer 4: imports `plan`, `findings`, `installs`, `builds`, `hosts`, `telemetry.machine`, and
`server.settings` and `invocation.command` (whether an installation can serve TLS).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pgbenchlab.errors import UserError
from pgbenchlab.studies import changes, throughput
from pgbenchlab.studies.common import Machine, StudyOptions
from pgbenchlab.studies.facts import BuildFact, InstallFact, MachineFacts, gather

STUDIES: dict[str, Callable[[Machine], str]] = {
    "archaeology": throughput.archaeology,
    "latency": changes.latency,
    "platform": throughput.platform,
    "tuning": changes.tuning,
    "scalability": throughput.scalability,
    "patch": changes.patch,
}

__all__ = [
    "STUDIES",
    "BuildFact",
    "InstallFact",
    "MachineFacts",
    "StudyOptions",
    "gather",
    "render",
]


def render(study: str, facts: MachineFacts, options: StudyOptions) -> str:
    """The plan of a study for a machine with these facts: TOML text, commented."""
    if study not in STUDIES:
        raise UserError(f"unknown study {study!r}; choose one of: {', '.join(STUDIES)}")
    given = options.source or options.base or options.patches or options.series
    if study != "patch" and (given or options.prefixes):
        raise UserError("--source, --base, --patch, --series and --prefixes belong to `new patch`")
    if study not in ("platform", "tuning") and options.data_dirs:
        raise UserError("--data-dir belongs to `new platform` and `new tuning`")
    check_data_dirs(options.data_dirs)
    if study != "archaeology" and options.majors:
        raise UserError("--majors belongs to `new archaeology`")
    check_majors(options.majors)
    return STUDIES[study](Machine(facts, options))


def check_majors(majors: tuple[str, ...]) -> None:
    """Each --majors entry a major pgbenchlab can run (9.6 or 10 and later), each once."""
    for major in majors:
        if not re.fullmatch(r"9\.6|[1-9][0-9]", major):
            raise UserError(
                f"--majors {major}: not a major pgbenchlab can run; give majors as 9.6, 10, 11 … "
                "(a comma-separated list)"
            )
    repeated = sorted({m for m in majors if majors.count(m) > 1})
    if repeated:
        raise UserError(f"--majors: {', '.join(repeated)} given twice; give each major once")


def check_data_dirs(data_dirs: tuple[Path, ...]) -> None:
    """Each --data-dir a directory (or one to be made), each storage once."""
    seen: set[Path] = set()
    for path in data_dirs:
        if path.exists() and not path.is_dir():
            raise UserError(f"--data-dir {path}: not a directory; give the directory to hold it")
        if path.resolve() in seen:
            raise UserError(f"--data-dir {path}: given twice; give each storage once")
        seen.add(path.resolve())
