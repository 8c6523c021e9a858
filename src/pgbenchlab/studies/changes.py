"""The studies of a change: latency (rates, connections, protocols, checkpoints), tuning
(named test sets) and patch (a base build against one build per patch)."""

from __future__ import annotations

import re
from pathlib import Path

from pgbenchlab import builds
from pgbenchlab.builds import BuildRecipe, series
from pgbenchlab.errors import UserError
from pgbenchlab.studies.common import Machine, branch_rows_needed, finish, profile, server
from pgbenchlab.studies.toml import Text
from pgbenchlab.tomltext import Value, value

# A guess of in-memory tpcb-like throughput per CPU, for rates below saturation; the plan says
# to set them from a measured peak.
TPCB_TPS_PER_CPU = 1000
RATE_SHARES = (0.25, 0.5, 0.75)
DIRTY_BACKGROUND_BYTES = 64 * 1024**2
# Builds for profiles: frame pointers for call graphs; the server needs no readline, ICU or zlib.
PATCH_CONFIGURE = [
    "--without-readline",
    "--without-icu",
    "--without-zlib",
    "CFLAGS=-O2 -fno-omit-frame-pointer",
]


def latency(m: Machine) -> str:
    tls = m.facts.newest_with_tls
    text = m.start(
        "latency",
        "what does latency look like under load?",
        "tpcb-like at fixed arrival rates (-R) with a latency limit (-L) and the three",
        "protocols; at full speed, a new connection per transaction (-C) or not over each",
        "connection kind (what connecting costs); two checkpoint spacings.",
        description="latency at fixed rates, connections, protocols, checkpoints",
        repeats=3,
    )
    m.timing(text, 20)
    text.key("latency_log", "full", "every transaction's latency: exact percentiles")
    clients = 2 * m.facts.cpus
    newest = m.facts.newest
    install_note = "" if tls in (None, newest) else f"the newest with TLS ({newest.name}: none)"
    server(text, "server", (tls or newest).name, m.settings(clients), install_note)
    peak = TPCB_TPS_PER_CPU * m.facts.cpus
    workloads = latency_workloads(m, peak, tls=tls is not None)
    text.table("matrix")
    m.scale_key(text, m.scales[:1], least=branch_rows_needed(workloads, [clients]))
    text.comment(
        "at-rates: 50 TPS, far below any peak;"
        if m.quick
        else f"at-rates: 25/50/75 % of a guessed peak of {peak} TPS ({TPCB_TPS_PER_CPU} per CPU);",
        "set rates from a measured peak (the scalability study) to stay below saturation; later",
        "transactions are counted late (-L). connecting: -C or not over each connection kind,",
        "at full speed: the report gives what a new connection costs"
        + (", and TLS on top of TCP" if tls else ""),
    )
    if not tls:
        no_tls(text, m)
    text.items("workload", workloads)
    text.key("clients", [clients])
    checkpoints = ["30s", "5min"]
    if m.quick:
        text.comment(
            f"the full study crosses every cell with checkpoint_timeout = {value(checkpoints)}: a",
            "2 s run sees no checkpoint",
        )
        return finish(text, m.facts.cpus)
    text.table("matrix.setting", "the server restarts with each value")
    text.key("checkpoint_timeout", checkpoints, "frequent against rare checkpoints")
    return finish(text, m.facts.cpus)


def latency_workloads(m: Machine, peak: int, *, tls: bool) -> list[Value]:
    """tpcb-like at rates (each protocol), and at full speed with -C or not over each
    connection kind: named apart, so that each is a cell of its own."""
    rated: dict[str, Value] = {
        "name": "at-rates",
        "builtin": "tpcb-like",
        "rate": [50] if m.quick else [int(peak * share) for share in RATE_SHARES],
        "latency_limit": "100ms",
        "protocol": ["prepared"] if m.quick else ["simple", "extended", "prepared"],
    }
    connecting: dict[str, Value] = {
        "name": "connecting",
        "builtin": "tpcb-like",
        "connect": [False, True],
        "connection": ["socket", "tcp", "tls"] if tls else ["socket", "tcp"],
    }
    return [rated, connecting]


def no_tls(text: Text, m: Machine) -> None:
    """Why connection = "tls" is not in the plan, and what would put it there."""
    names = ", ".join(i.name for i in m.facts.installs) or "the embedded 18"
    text.comment(
        f'no "tls": no installation here ({names}) has a server and pgbench built with',
        "TLS (the plan would exit 2 with it). Debian's packages have it: install one",
        "(postgresql-NN) and run `pgbenchlab new latency` again, or build one with",
        'configure = ["--with-openssl"] (meson: "-Dssl=openssl") and add "tls" here.',
    )


def tuning(m: Machine) -> str:
    text = m.start(
        "tuning",
        "did this change to the settings, the file system or the OS help?",
        "Named test sets (one server each, compared with the baseline in the report), each",
        "described by what changed (its report says it too); two scales; TPS and worst-case",
        "latency.",
        description="test sets against a baseline: TPS and worst-case latency",
        repeats=5,
    )
    m.timing(text, 20, vacuum="all")
    text.key("latency_log", "full", "every transaction: the worst-case latency exactly")
    clients = 2 * m.facts.cpus
    settings = m.settings(clients)
    install = m.facts.newest.name
    server(text, "baseline", install, settings, about="the settings every other set starts from")
    rarer = "150s" if m.quick else "5min"
    spread = {"checkpoint_timeout": rarer, "checkpoint_completion_target": "0.9"}
    about = (
        f"a setting: checkpoint_timeout {settings['checkpoint_timeout']} → {rarer} and "
        "checkpoint_completion_target 0.9: checkpoints five times rarer, spread over 90 % of "
        "the interval (fewer full-page writes, smoother I/O)"
    )
    server(text, "spread-checkpoints", install, settings | spread, about=about)
    for index, path in enumerate(m.options.data_dirs, start=1):
        about = f"a file system: the data directory on {path.resolve()}"
        server(text, f"filesystem{index}", install, settings, about=about)
        text.key("data_dir", str(path.resolve()))
    if not m.options.data_dirs:
        text.blank().comment(
            "Test set on another file system: give --data-dir DIR, or copy the baseline",
            'server here with data_dir = "/mnt/other-fs/pgbenchlab" (file system and mount',
            "options are recorded with the results, so sets compare like for like).",
        )
    m.matrix(text, m.scales[:2], ["tpcb-like"], [clients], clients_note="2 × CPUs")
    dirty_background(text, m)
    return finish(text, m.facts.cpus)


def patch(m: Machine) -> str:
    source, base = m.options.source, m.options.base
    patches, posted = m.options.patches, m.options.series
    if not source or not (patches or posted):
        raise UserError(
            "new patch needs --source git:/path/to/postgresql and --patch FILE or --series PATH"
        )
    if not source.startswith("git:"):
        raise UserError(f"--source {source}: give a git checkout as git:/path/to/postgresql")
    if m.options.prefixes and not posted:
        raise UserError("--prefixes belongs to --series (each prefix of a series a build)")
    for path in patches:
        if not path.is_file():
            raise UserError(f"--patch {path}: no such file")
    counts = [len(series.read_series(path)) for path in posted]  # BuildError: one line
    # command-line paths are the working directory's; the plan holds them absolute
    source = f"git:{Path(source.removeprefix('git:')).expanduser().resolve()}"
    builds.check(BuildRecipe("base", source, base, patches=tuple(str(p) for p in patches)))
    text = m.start(
        "patch",
        "does this patch change performance?",
        "The base build and one build per patch (each alone on the base, same options) or",
        "series (its patches applied in order), select-only and tpcb-like at a client ladder;",
        "the report gives a verdict per cell.",
        description=_described(patches, counts, base),
        repeats=5,
    )
    m.timing(text, 20)
    if not m.quick:
        profile(text, "each patch's profile diff")
    text.table("build.base", "the source the patches apply to")
    text.key("source", source)
    if base:
        text.key("ref", base)
    text.key("configure", PATCH_CONFIGURE)
    names = patch_names((*patches, *posted))
    servers = ["base"]
    for name, path in zip(names[: len(patches)], patches, strict=True):
        text.table(f"build.{name}", "the base and this patch alone")
        text.key("from", "base")
        text.key("patches", [str(path.resolve())])
        servers.append(name)
    for name, path, count in zip(names[len(patches) :], posted, counts, strict=True):
        text.table(f"build.{name}", f"the base and this series of {count} patch(es), in order")
        text.key("from", "base")
        text.key("series", str(path.resolve()))
        if m.options.prefixes and count > 1:
            text.key("prefixes", True, f"{name}-p1 … {name}-p{count - 1}: its first patches")
            servers += [f"{name}-p{k}" for k in range(1, count)]
        servers.append(name)
    clients = m.ladder()
    for name in servers:
        server(text, name, {"build": name}, m.settings(clients[-1]))
    m.matrix(text, m.scales[:1], ["select-only", "tpcb-like"], clients)
    return finish(text, m.facts.cpus)


def _described(patches: tuple[Path, ...], counts: list[int], base: str | None) -> str:
    parts = [f"{len(patches)} patch(es)"] if patches else []
    parts += [f"a series of {count} patch(es)" for count in counts]
    return f"{', '.join(parts)} against {base or 'HEAD'}"


def dirty_background(text: Text, m: Machine) -> None:
    """The kernel's background writeback threshold as a test set when pgbenchlab may write
    kernel tunables (root); otherwise how to add it."""
    about = (
        "Test set: dirty-background — a kernel tunable: background writeback from 64 MiB of",
        "dirty pages against the default, 0: the kernel uses vm.dirty_background_ratio instead",
        "(a share of the memory); it crosses every set above.",
    )
    if m.facts.root:
        text.blank().comment(*about)
        text.table("matrix.sysctl", "written before each run, put back at the end")
        text.key("vm.dirty_background_bytes", [0, DIRTY_BACKGROUND_BYTES])
        return
    text.blank().comment(
        *about,
        "Kernel tunables need root (pgbenchlab refuses the axis otherwise); as root add:",
        "[matrix.sysctl]",
        f'"vm.dirty_background_bytes" = [0, {DIRTY_BACKGROUND_BYTES}]',
    )


def patch_names(patches: tuple[Path, ...]) -> list[str]:
    """A server name per patch file: its stem made a plan name, unique, never "base"."""
    names: list[str] = []
    for index, path in enumerate(patches, start=1):
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-.")
        name = stem if stem and stem[0].isalnum() and stem != "base" else f"patch{index}"
        names.append(name if name not in names else f"{name}-{index}")
    return names
