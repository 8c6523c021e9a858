"""Parse ``pgbench -V`` / ``postgres -V`` output into an ordered :class:`PgVersion`.

Major-version scheme: ``major`` is a tuple of ints, two parts before PostgreSQL 10 (``(9, 6)``)
and one part from 10 on (``(15,)``). Tuples then order correctly across the 9.x → 10 switch
(``(9, 6) < (10,)``) without inventing a number that PostgreSQL never printed;
``major_text`` gives the usual spelling ("9.6", "15") and ``num`` the ``server_version_num``
form (90624, 150018).

Pre-releases (``17devel``, ``18beta1``, ``18rc1``) have no minor and sort before the major's
first release, as PostgreSQL numbers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

from pgbenchlab.errors import PgbenchParseError

_VERSION = re.compile(
    r"(?:(?P<program>[A-Za-z0-9_./-]+) \(PostgreSQL\) )?"
    r"(?P<first>[0-9]{1,4})(?:\.(?P<second>[0-9]{1,4}))?(?:\.(?P<third>[0-9]{1,4}))?"
    r"(?:(?P<stage>devel|alpha|beta|rc)(?P<stage_no>[0-9]{0,4}))?"
    r"(?P<suffix> .*)?",
    re.ASCII,
)
_STAGE_RANK = {"devel": 0, "alpha": 1, "beta": 2, "rc": 3}
_RELEASE_RANK = 4


@total_ordering
@dataclass(frozen=True, eq=False, kw_only=True)
class PgVersion:
    """A PostgreSQL version; equality and order ignore the program name and vendor suffix."""

    major: tuple[int, ...]  # (9, 6) up to 9.6, (15,) from 10 on
    minor: int | None  # None for pre-releases
    stage: str | None = None  # "devel", "beta1", "rc1", ...; None for a release
    program: str | None = field(default=None)  # "pgbench", "postgres", ...
    text: str  # the version text as printed, vendor suffix included

    @property
    def major_text(self) -> str:
        return ".".join(str(part) for part in self.major)

    @property
    def num(self) -> int:
        """``server_version_num`` form: 90624 for 9.6.24, 150018 for 15.18, 170000 for 17devel."""
        if len(self.major) == 2:
            return self.major[0] * 10000 + self.major[1] * 100 + (self.minor or 0)
        return self.major[0] * 10000 + (self.minor or 0)

    def _key(self) -> tuple[tuple[int, ...], int, int, int]:
        if self.stage is None:
            return self.major, _RELEASE_RANK, 0, self.minor or 0
        kind = self.stage.rstrip("0123456789")
        number = self.stage[len(kind) :]
        return self.major, _STAGE_RANK[kind], int(number or 0), 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PgVersion):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: PgVersion) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def parse_version(output: str) -> PgVersion:
    """Parse ``pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`` or a bare version text
    such as ``16.2`` (the 14+ report header). Raises PgbenchParseError otherwise."""
    lines = output.strip().splitlines()
    line = lines[0].strip() if lines else ""
    match = _VERSION.fullmatch(line)
    if not match:
        raise PgbenchParseError(f"not a PostgreSQL version: {line[:200]!r}")
    first = int(match["first"])
    second, third = (None if v is None else int(v) for v in match.group("second", "third"))
    stage = match["stage"] and match["stage"] + match["stage_no"]
    major: tuple[int, ...]
    if first < 10:  # two-part majors
        if second is None:
            raise PgbenchParseError(
                f"PostgreSQL {first}.x version without its second part: {line!r}"
            )
        major, minor, extra = (first, second), third, None
    else:
        major, minor, extra = (first,), second, third
    if extra is not None or (minor is None) == (stage is None):
        raise PgbenchParseError(f"not a PostgreSQL version number: {line[:200]!r}")
    version = line[len(match["program"]) + len(" (PostgreSQL) ") :] if match["program"] else line
    return PgVersion(major=major, minor=minor, stage=stage, program=match["program"], text=version)


def major_text(version_num: int) -> str:
    """server_version_num's major as it is spelled: 90624 → "9.6", 150010 → "15"."""
    if version_num >= 100000:
        return str(version_num // 10000)
    return f"{version_num // 10000}.{version_num // 100 % 100}"
