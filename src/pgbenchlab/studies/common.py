"""What every study template shares: the sizes of this machine, the header with the estimate,
[campaign], the server settings and [[server]] tables, the matrix's scales (with their disk
warning), workloads and clients."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgbenchlab import plan
from pgbenchlab.durations import duration_text
from pgbenchlab.findings import BRANCH_UPDATING_BUILTINS
from pgbenchlab.plan.schema import BUILTINS
from pgbenchlab.studies import sizing
from pgbenchlab.studies.facts import MachineFacts
from pgbenchlab.studies.sizing import Scale
from pgbenchlab.studies.toml import Text
from pgbenchlab.tomltext import Value

ESTIMATE = "@@ESTIMATE@@"
MAX_REPEATS = 10  # of a full study's repeats = "auto"
# PostgreSQL 13 and 18 built here in ~2 minutes on 2 CPUs (README, "Builds"): ~4 CPU-minutes.
BUILD_CPU_MINUTES = 4


@dataclass(frozen=True)
class StudyOptions:
    quick: bool = False
    source: str | None = None  # patch: git:/path of a PostgreSQL checkout
    base: str | None = None  # patch: the ref the patches apply to
    patches: tuple[Path, ...] = ()
    series: tuple[Path, ...] = ()  # patch: series as posted (an mbox, or a directory)
    prefixes: bool = False  # patch: each prefix of each series a build too
    data_dirs: tuple[Path, ...] = ()  # platform, tuning: where data directories go
    majors: tuple[str, ...] = ()  # archaeology: the majors to compare ("9.6", "13", ...)


@dataclass(frozen=True)
class Machine:
    """The facts and what the templates derive from them, computed once."""

    facts: MachineFacts
    options: StudyOptions
    shared_buffers: int = field(init=False)
    scales: tuple[Scale, Scale, Scale] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shared_buffers", sizing.shared_buffers(self.facts, self.quick))
        object.__setattr__(self, "scales", sizing.scales(self.facts, self.quick))

    @property
    def quick(self) -> bool:
        return self.options.quick

    @property
    def run_s(self) -> int:
        return sizing.QUICK_RUN_S if self.quick else sizing.RUN_S

    def ladder(self, top: int | None = None) -> list[int]:
        return sizing.ladder(self.facts, self.quick, top)

    def settings(self, max_clients: int, **extra: str) -> dict[str, Value]:
        """The settings every server of a study starts with: shared_buffers computed, timed
        checkpoints inside every run, WAL room so that they stay timed, connections for the
        ladder."""
        found: dict[str, Value] = {
            "shared_buffers": sizing.setting_size(self.shared_buffers),
            "max_wal_size": "1GB" if self.quick else "8GB",
            "checkpoint_timeout": "30s" if self.quick else f"{sizing.CHECKPOINT_TIMEOUT_S}s",
        }
        if max_clients + 10 > 100:
            found["max_connections"] = max_clients + 20
        return found | extra

    def start(self, study: str, question: str, *about: str, description: str, repeats: int) -> Text:
        """A study's plan begun: the header and [campaign], named after the study; ``repeats``
        is the first rounds' count of a full study."""
        text = Text()
        self.header(text, study, question, *about)
        text.table("campaign")
        text.key("name", f"{study}-quick" if self.quick else study)
        text.key("description", description)
        if self.quick:
            text.key("quick", True, "a first look: runs short on purpose, not for publishing")
            text.key("repeats", 1, 'once: the full study repeats until answered ("auto")')
        else:
            text.key("repeats", "auto", "rounds until every comparison (or interval) is decided")
            text.key("min_repeats", repeats, "the first rounds, for every cell")
            text.key("max_repeats", MAX_REPEATS, "never more rounds than this")
        text.key("order", "interleaved", "each cell once per round: drift hits every cell alike")
        return text

    def header(self, text: Text, study: str, question: str, *about: str) -> None:
        f = self.facts
        sb = self.shared_buffers
        text.comment(
            f"pgbenchlab study {study}{' (quick)' if self.quick else ''}: {question}",
            *about,
            "",
            f"Computed for this machine: {f.cpus} CPUs, {sizing.size_text(f.memory_bytes)} of "
            f"RAM, {sizing.size_text(f.disk_free_bytes)} free where the data goes.",
            f"shared_buffers = {sizing.setting_size(sb)}"
            + ("" if self.quick else " (a quarter of RAM, within 128 MB … 16 GB)")
            + f"; pgbench needs ~{sizing.BYTES_PER_SCALE // sizing.MIB} MiB per scale unit.",
            ESTIMATE,
            "Run: pgbenchlab run THIS_FILE   (--dry-run lists every run and its order)",
        ).blank()

    def scale_key(self, text: Text, wanted: tuple[Scale, ...], *, least: int = 1) -> None:
        """`scale = [...]` with each size explained, none below ``least`` (as many branch rows
        as clients, for a workload that updates them). Every dataset exists at once, on every
        server written above: a scale that would take the datasets past the free disk is
        left out with a warning saying why and what it needs."""
        wanted = wanted[:1] if self.quick else wanted
        raised = {max(s.value, least): s for s in reversed(wanted)}  # one per value, the first
        wanted = tuple(
            s if v == s.value else Scale(v, f"as many branch rows as clients ({least})")
            for v, s in sorted(raised.items())
        )
        # each server in its own data directory (free disk counted per directory), or all
        # beside the results
        copies = 1 if self.options.data_dirs else max(1, text.count_tables("server"))
        free = self.facts.disk_free_bytes
        kept = [s for i, s in enumerate(wanted) if copies * _needed(wanted[: i + 1]) <= free]
        for s in wanted:
            text.comment(f"scale {s.value}: {sizing.size_text(s.bytes)}, {s.fits}")
        for i, s in enumerate(wanted):
            if s not in kept:
                text.comment(
                    f"WARNING: scale {s.value} ({s.fits}) needs ~"
                    f"{sizing.size_text(sizing.disk_needed(s))} of disk on each of {copies} "
                    f"server(s), {sizing.size_text(copies * _needed(wanted[: i + 1]))} with "
                    f"the smaller scales; {sizing.size_text(free)} is free: left out. "
                    "Free space (or give a data_dir elsewhere) and add it back."
                )
        text.key("scale", [s.value for s in kept or wanted[:1]])

    def matrix(
        self,
        text: Text,
        scales: tuple[Scale, ...],
        workloads: Value,
        clients: Value,
        *,
        workload_note: str = "",
        clients_note: str = "",
    ) -> None:
        """[matrix] with its scales, workloads and clients; other axes follow it."""
        text.table("matrix")
        self.scale_key(text, scales, least=branch_rows_needed(workloads, clients))
        text.key("workload", workloads, workload_note)
        text.key("clients", clients, clients_note)

    def timing(self, text: Text, warmup_s: int, **extra: Value) -> None:
        text.table("defaults")
        text.key("duration", f"{self.run_s}s", self._run_comment())
        text.key("warmup", f"{0 if self.quick else warmup_s}s", "the same workload, not counted")
        text.key("threads", "auto", "pgbench -j: min(clients, CPUs)")
        text.keys(extra)

    def _run_comment(self) -> str:
        if self.quick:
            return "seconds: a taste, not a measurement"
        return f"three checkpoint_timeouts: every run sees ~{sizing.RUN_S // 60} checkpoints"


def _needed(scales: tuple[Scale, ...]) -> int:
    return sum(sizing.disk_needed(s) for s in scales)


def branch_rows_needed(workloads: Value, clients: Value) -> int:
    """The least scale: as many branch rows as the most clients when a workload updates
    them (tpcb-like), so that clients do not queue on the same rows; else 1."""
    names = [w.get("builtin") if isinstance(w, Mapping) else w for w in _listed(workloads)]
    if not any(BUILTINS.get(str(n)) in BRANCH_UPDATING_BUILTINS for n in names):
        return 1
    return max(int(c) for c in _listed(clients) if isinstance(c, int))


def _listed(item: Value) -> list[Value]:
    return list(item) if isinstance(item, Sequence) and not isinstance(item, str) else [item]


def server(
    text: Text,
    name: str,
    install: Value,
    settings: dict[str, Value],
    install_note: str = "",
    *,
    about: str = "",
) -> None:
    """A [[server]] table; `about` becomes its description (reported beside its results)."""
    text.table("server", array=True)
    text.key("name", name)
    if about:
        text.key("description", about)
    text.key("install", install, install_note)
    text.key("settings", settings)


def profile(text: Text, why: str) -> None:
    """`profile = "auto"` in [defaults]: the full studies only, so that --quick runs without
    perf."""
    text.comment(
        "profiling needs perf, and root or kernel.perf_event_paranoid ≤ 0 (the run exits 2",
        'before anything starts otherwise): set "off" where perf cannot run',
    )
    text.key("profile", "auto", f"one more profiled repeat per cell: {why}")


def finish(text: Text, cpus: int) -> str:
    """The plan's text with its estimated time, computed from its own expanded matrix."""
    draft = text.text()
    parsed = plan.parse(draft, "study.toml", base=Path.cwd(), cpu_count=cpus)
    datasets = {(s.server, s.scale) for s in parsed.specs}
    init_bytes = sum(scale * sizing.BYTES_PER_SCALE for _, scale in datasets)
    line = (
        f"# Estimated time: {duration_text(parsed.estimated_seconds())} for "
        f"{len(parsed.specs)} runs (runs, warmups, ~1.5 s around each{_rounds(parsed)}), plus "
        f"~{duration_text(sizing.init_seconds(init_bytes))} to initialise "
        f"{len(datasets)} dataset(s) of {sizing.size_text(init_bytes)}"
        + (
            f", plus {len(parsed.needed_builds)} build(s) from source unless cached "
            f"(~{max(1, round(BUILD_CPU_MINUTES / cpus))} min each here)."
            if parsed.needed_builds
            else "."
        )
    )
    return draft.replace(f"# {ESTIMATE}", line)


def _rounds(parsed: plan.Plan) -> str:
    """With repeats = "auto", what the runs counted are and what may come after them."""
    if parsed.auto is None:
        return ""
    return (
        f'; repeats "auto": later rounds, up to {parsed.auto.max_repeats} in all, run only '
        "the cells still undecided"
    )
