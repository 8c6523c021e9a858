"""Tests for the ``pgbench -V`` / ``postgres -V`` parser and version ordering."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.records.version import PgVersion, parse_version

GOLDEN = Path(__file__).parent / "golden" / "pgbench"


@pytest.mark.parametrize(
    ("major", "text", "minor"),
    [
        ("15", "15.18 (Debian 15.18-0+deb12u1)", 18),
        ("16", "16.2", 2),
        ("18", "18.6", 6),
    ],
)
def test_golden_version_outputs(major: str, text: str, minor: int) -> None:
    version = parse_version((GOLDEN / major / "version.txt").read_text())
    assert version.major == (int(major),) and version.minor == minor
    assert version.text == text and version.program == "pgbench" and version.stage is None
    assert version.major_text == major


@pytest.mark.parametrize(
    ("output", "major", "minor", "stage", "num"),
    [
        ("pgbench (PostgreSQL) 9.6.24", (9, 6), 24, None, 90624),
        ("postgres (PostgreSQL) 10.23\n", (10,), 23, None, 100023),
        ("pgbench (PostgreSQL) 17devel", (17,), None, "devel", 170000),
        ("pgbench (PostgreSQL) 18beta1", (18,), None, "beta1", 180000),
        ("postgres (PostgreSQL) 18rc1", (18,), None, "rc1", 180000),
        ("pgbench (PostgreSQL) 9.6beta3", (9, 6), None, "beta3", 90600),
        ("/usr/lib/postgresql/15/bin/postgres (PostgreSQL) 15.18", (15,), 18, None, 150018),
        ("  14.13 (Ubuntu 14.13-1.pgdg22.04+1)  ", (14,), 13, None, 140013),
    ],
)
def test_version_shapes(
    output: str, major: tuple[int, ...], minor: int | None, stage: str | None, num: int
) -> None:
    version = parse_version(output)
    assert (version.major, version.minor, version.stage, version.num) == (major, minor, stage, num)


def test_text_keeps_the_vendor_suffix_without_the_program() -> None:
    version = parse_version("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)")
    assert version.program == "postgres"
    assert version.text == "15.18 (Debian 15.18-0+deb12u1)"


def test_report_header_versions_parse() -> None:
    report = parse_report((GOLDEN / "18" / "server-15.stdout").read_text())
    assert report.client_version is not None and report.server_version is not None
    client, server = parse_version(report.client_version), parse_version(report.server_version)
    assert server < client and server.major_text == "15"


def test_order_across_the_nine_to_ten_switch_and_pre_releases() -> None:
    texts = [
        "9.5.25", "9.6.0", "9.6.24", "10.0", "10.23", "14.13", "15.2", "15.18", "17devel",
        "17beta1", "17beta2", "17rc1", "17.0", "17.4", "18.6",
    ]  # fmt: skip
    versions = [parse_version(t) for t in texts]
    assert sorted(reversed(versions)) == versions
    assert [v.text for v in sorted(versions, reverse=True)] == texts[::-1]


def test_equality_ignores_program_and_vendor_suffix() -> None:
    a = parse_version("pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)")
    b = parse_version("postgres (PostgreSQL) 15.18")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != parse_version("15.17") and a != "15.18"


@pytest.mark.parametrize(
    "output",
    [
        "",
        "\n",
        "pgbench",
        "pgbench (PostgreSQL)",
        "9",  # a 9.x version needs its second part
        "9.6",  # ... and a release its minor
        "16",  # a release needs its minor
        "15.18beta1",
        "1.2.3.4",
        "15.18.1",
        "pgbench (PostgreSQL) 15.x",
        "psql: error: connection failed",
    ],
)
def test_not_versions_are_refused(output: str) -> None:
    with pytest.raises(PgbenchParseError):
        parse_version(output)


@settings(max_examples=500)
@given(st.text())
def test_random_text_parses_or_is_refused(text: str) -> None:
    try:
        version = parse_version(text)
    except PgbenchParseError:
        return
    assert isinstance(version, PgVersion) and version.num >= 0


@given(
    st.tuples(st.integers(10, 99), st.integers(0, 99)),
    st.tuples(st.integers(10, 99), st.integers(0, 99)),
)
def test_order_matches_numeric_order(a: tuple[int, int], b: tuple[int, int]) -> None:
    va, vb = parse_version(f"{a[0]}.{a[1]}"), parse_version(f"{b[0]}.{b[1]}")
    assert (va < vb) == (a < b) and (va == vb) == (a == b)
    assert (va.num < vb.num) == (a < b)
