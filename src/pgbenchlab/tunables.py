"""Kernel tunables a campaign sets: `[matrix.sysctl]` (named as sysctl names them) and
`[matrix.sysfs]` (block-device and memory knobs that are files under /sys, named by their path:
the I/O scheduler, read_ahead_kb, transparent huge pages); as root, through a Host, verified by
reading them back, and always put back.

A sysfs file that offers choices reads as all of them with the one in force in brackets
("none [mq-deadline] kyber"): its value is the bracketed one.

Before anything changes, the values found are written to a journal (a small file held under an
exclusive lock while the campaign runs; the kernel drops the lock if pgbenchlab dies). The
campaign's end restores them on every exit path (done, Ctrl-C, SIGTERM, a failure) and empties
the journal. After a kill -9 the journal is left full and unlocked: the next start of any
campaign restores what it says (holding the journal for that moment: a campaign that sets
tunables and starts meanwhile waits for it, up to JOURNAL_WAIT_S, before it concludes that
another campaign is changing tunables). The journal lives in /run, a tmpfs emptied at boot, as the
kernel's tunables are reset at boot.

Some tunables come in pairs the kernel keeps exclusive: writing vm.dirty_bytes zeroes
vm.dirty_ratio, and the other way round (and a 0 may be refused: it means "the other rules").
So both of a pair are journalled, and put back by writing the non-zero one.

Whether the kernel takes a value is known only by writing it: a tunable may exist yet be
read-only (EACCES, root included), refuse a value out of its range (EINVAL) or clamp it, and
the kernel tells no tunable's range. So before any run every planned value is tried: written
and read back under the journal, the values found put back at once (`try_values`). The machine
is changed for a few microseconds and, should pgbenchlab die meanwhile, the journal puts it
back at the next start.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import PurePosixPath

from pgbenchlab.errors import UserError
from pgbenchlab.hosts import LOCAL_HOST, Host, LockedFile

PROC_SYS = PurePosixPath("/proc/sys")
SYS = "/sys/"  # a [matrix.sysfs] tunable's name: its path
JOURNAL = PurePosixPath("/run/pgbenchlab/sysctl-journal.json")
JOURNAL_WAIT_S = 2.0  # held that long, it is held by a campaign that sets tunables


def journal_path() -> PurePosixPath:
    """The journal's path: PGBENCHLAB_SYSCTL_JOURNAL (read when a campaign starts), else
    `JOURNAL`."""
    return PurePosixPath(os.environ.get("PGBENCHLAB_SYSCTL_JOURNAL", str(JOURNAL)))


_PAIRS = (
    ("vm.dirty_bytes", "vm.dirty_ratio"),
    ("vm.dirty_background_bytes", "vm.dirty_background_ratio"),
)
PARTNERS = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}


class TunableError(UserError):
    """A kernel tunable the campaign cannot set: not root, no such key, read-only, a value the
    kernel does not take, or in use."""


class NotTaken(RuntimeError):
    """Tunables read back other than set."""


def normal(text: str) -> str:
    """A tunable's value as compared: words separated by one space (the kernel uses tabs); of a
    file offering choices, the one in force."""
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen[1] if chosen else " ".join(text.split())


def section(name: str) -> str:
    """The plan's table a tunable comes from, as its messages name it."""
    return (
        f"[matrix.sysfs] {name.removeprefix(SYS)}"
        if name.startswith(SYS)
        else f"[matrix.sysctl] {name}"
    )


class KernelTunables:
    """The tunables ``names`` of one campaign on ``host`` (``root``: where /proc/sys is)."""

    def __init__(
        self,
        names: Collection[str],
        *,
        host: Host = LOCAL_HOST,
        root: PurePosixPath = PROC_SYS,
        journal: PurePosixPath | None = None,
    ) -> None:
        self.names = tuple(sorted(names))
        self.host, self.root, self.journal_path = host, root, journal or journal_path()
        self.originals: dict[str, str] = {}
        self.journal: LockedFile | None = None

    def path(self, name: str) -> PurePosixPath:
        if name.startswith(SYS):
            return PurePosixPath(name)
        return self.root / name.replace(".", "/")

    def read(self, name: str) -> str:
        return normal(self.host.read_text(self.path(name)))

    def check(self, euid: int | None = None) -> None:
        """Refuse, before anything starts, the first tunable this process cannot set."""
        for problem in self.problems(euid):
            raise TunableError(problem)

    def problems(self, euid: int | None = None) -> list[str]:
        """Why this process cannot set these tunables, one line each with its fix: not root
        (one line for all), or a name this kernel has no tunable for."""
        if not self.names:
            return []
        if (os.geteuid() if euid is None else euid) != 0:
            return [
                f"[matrix.sysctl]/[matrix.sysfs] ({', '.join(self.names)}): kernel tunables "
                "are set as root; run pgbenchlab as root or remove them from the plan"
            ]
        return [
            f"{section(name)}: no such kernel tunable here ({self.path(name)}): "
            "remove it from the plan or correct its name"
            for name in self.names
            if not self.host.exists(self.path(name))
        ]

    def repair(self) -> dict[str, str]:
        """Restore what a campaign killed while it had tunables changed left in the journal;
        hold the journal for this campaign when it sets tunables. The values put back."""
        if not self.names and not self.host.exists(self.journal_path):
            return {}
        self.host.mkdir(self.journal_path.parent, mode=0o755)
        try:
            journal = self._lock_journal()
        except PermissionError:  # root's journal, and this campaign sets nothing (`check`)
            return {}
        except BlockingIOError:
            if self.names:
                raise TunableError(
                    f"another campaign is changing kernel tunables (journal {self.journal_path}); "
                    "run one campaign with [matrix.sysctl] at a time"
                ) from None
            return {}  # its own campaign restores them
        text = journal.read_text().strip()
        left = json.loads(text) if text else {}
        self._put_back(left)
        journal.write_text("")
        if self.names:
            self.journal = journal
        else:
            journal.release()
        return dict(left)

    def _lock_journal(self) -> LockedFile:
        """The journal, locked. A campaign that sets tunables waits up to JOURNAL_WAIT_S for
        it: every campaign's start holds it for the moment its repair takes."""
        deadline = time.monotonic() + (JOURNAL_WAIT_S if self.names else 0.0)
        while True:
            try:
                return self.host.lock(self.journal_path)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def apply(self, values: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Set a run's tunables, journalled first; the values read back, as recorded."""
        wanted = dict(values)
        if not wanted:
            return {}
        self._remember(wanted)
        for name, value in wanted.items():
            if self.read(name) == normal(value):
                continue
            if normal(value) in (self.originals[name], "0") and name in PARTNERS:
                # back to how it was, or "the ratio rules" (the kernel refuses a 0 for *_bytes)
                self._put_back({n: self.originals[n] for n in self._with_partner(name)})
            elif normal(value) == self.originals[name]:
                self._put_back({n: self.originals[n] for n in self._with_partner(name)})
            else:
                self.host.write_in_place(self.path(name), value)
        found = {name: self.read(name) for name in wanted}
        wrong = {n: v for n, v in found.items() if v != normal(wanted[n])}
        if wrong:
            raise NotTaken(
                "kernel tunables did not take their values: "
                + ", ".join(f"{n} = {v} (set {wanted[n]})" for n, v in wrong.items())
            )
        return found

    def try_values(self, planned: Iterable[tuple[str, str]]) -> None:
        """Refuse, before any run, a value the kernel does not take: each is set as a run sets
        it (journalled first, read back), and the values found are put back at once."""
        try:
            for name, value in dict.fromkeys(planned):
                self._try(name, value)
        finally:
            self._put_back(self.originals)
            self.originals = {}
            if self.journal is not None:
                self.journal.write_text("")

    def _try(self, name: str, value: str) -> None:
        try:
            self.apply([(name, value)])
        except PermissionError as error:
            raise TunableError(
                f"{section(name)}: cannot be written here ({error.strerror}); remove it "
                "from the plan"
            ) from None
        except OSError as error:
            raise TunableError(
                f"{section(name)} = {value}: the kernel refuses it "
                f"({error.strerror or error}); give a value it takes"
            ) from None
        except NotTaken:
            raise TunableError(
                f"{section(name)} = {value}: the kernel keeps {self.read(name)} instead; "
                "give a value it takes as it is"
            ) from None

    def restore(self) -> None:
        """Put back every tunable changed, then empty the journal and let it go."""
        if self.originals:
            self._put_back(self.originals)
            self.originals = {}
        if self.journal is not None:
            self.journal.write_text("")
            self.journal.release()
            self.journal = None

    def _remember(self, wanted: Mapping[str, str]) -> None:
        """Journal the values found (with their partners) before the first change."""
        names = {n for name in wanted for n in self._with_partner(name)}
        fresh = sorted(names - self.originals.keys())
        if not fresh:
            return
        self.originals |= {name: self.read(name) for name in fresh}
        if self.journal is None:
            self.host.mkdir(self.journal_path.parent, mode=0o755)  # /run is emptied at boot
            self.journal = self.host.lock(self.journal_path)
        self.journal.write_text(json.dumps(self.originals, sort_keys=True))

    def _with_partner(self, name: str) -> list[str]:
        partner = PARTNERS.get(name)
        if partner is None or not self.host.exists(self.path(partner)):
            return [name]
        return [name, partner]

    def _put_back(self, values: Mapping[str, str]) -> None:
        """Write the values back; of a pair, only the non-zero member: writing it zeroes the
        other, and the kernel refuses a 0 for some (vm.dirty_background_bytes on 6.x)."""
        for name, value in sorted(values.items()):
            if value == "0" and PARTNERS.get(name) in values:
                continue
            if self.read(name) != value or name in PARTNERS:
                self.host.write_in_place(self.path(name), value)
