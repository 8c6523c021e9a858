"""Golden and property tests for the pgbench report parser (stdout)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench import report as report_module
from pgbenchlab.pgbench.report import PgbenchReport, ScriptStats, parse_report
from support import case_id, plain

GOLDEN = Path(__file__).parent / "golden" / "pgbench"
CASES = sorted(GOLDEN.glob("*/*.stdout"))
CAPTURED_DIRS = ("13", "15", "16", "17", "18")
# The cases the capture script must produce for every real version (15+: and the retry cases).
REQUIRED_CAPTURES = (
    "tpcb-progress", "t-mode", "select-only", "skip-some-updates", "rate-limit", "latency-limit",
    "connect", "per-statement", "weighted-scripts", "weighted-scripts-per-statement",
    "client-abort", "client-abort-midrun", "missing-tables", "missing-table-script",
)  # fmt: skip
RETRY_CAPTURES = ("max-tries", "verbose-errors", "max-tries-unlimited", "everything")


def expected(stdout: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(stdout.with_suffix(".json").read_text())
    return loaded


def captured(major: str, name: str) -> str:
    return (GOLDEN / major / f"{name}.stdout").read_text()


# --- golden files -------------------------------------------------------------------------------


@pytest.mark.parametrize("stdout", CASES, ids=case_id)
def test_report_matches_golden(stdout: Path) -> None:
    want = expected(stdout)
    if want["report"] is None:
        with pytest.raises(PgbenchParseError) as caught:
            parse_report(stdout.read_text())
        assert str(caught.value) == want["report_error"]
    else:
        assert plain(asdict(parse_report(stdout.read_text()))) == plain(want["report"])


@pytest.mark.parametrize("stdout", CASES, ids=case_id)
def test_expected_numbers_are_printed_numbers(stdout: Path) -> None:
    """Guards the hand-checked JSON: every number in it is a number pgbench printed."""
    printed = {float(t) for t in re.findall(r"-?\d+(?:\.\d+)?", stdout.read_text())}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            assert math.isnan(value) or float(value) in printed, value

    walk(expected(stdout)["report"])


@pytest.mark.parametrize("stdout", CASES, ids=case_id)
def test_statement_rows_are_printed_rows(stdout: Path) -> None:
    lines = stdout.read_text().splitlines()
    report = expected(stdout)["report"] or {"statements": [], "scripts": []}
    rows = report["statements"] + [r for s in report["scripts"] for r in s["statements"]]
    for row in rows:
        latency = "nan" if row["latency_ms"] != row["latency_ms"] else f"{row['latency_ms']:.3f}"
        assert any(latency in line and line.endswith(" " + row["command"]) for line in lines)


def test_every_case_has_all_its_files() -> None:
    for stdout in CASES:
        for suffix in (".stderr", ".argv", ".exit", ".json"):
            assert stdout.with_suffix(suffix).is_file(), (stdout, suffix)
        assert json.loads(stdout.with_suffix(".argv").read_text())[0] == "pgbench"


@pytest.mark.parametrize("major", CAPTURED_DIRS)
def test_captures_cover_the_required_cases(major: str) -> None:
    names = {p.stem for p in (GOLDEN / major).glob("*.stdout")}
    assert set(REQUIRED_CAPTURES) <= names
    assert (set(RETRY_CAPTURES) <= names) == (int(major) >= 15)
    version = (GOLDEN / major / "version.txt").read_text()
    assert version.startswith(f"pgbench (PostgreSQL) {major}.")


def test_documented_versions_are_covered() -> None:
    names = {p.name for p in GOLDEN.iterdir() if p.name.startswith("documented-")}
    assert {"documented-9.6", "documented-14"} <= names


# --- behaviour on real captures -----------------------------------------------------------------


def test_fifteen_default_run_fields() -> None:
    report = parse_report(captured("15", "tpcb-progress"))
    assert report.client_version == "15.18 (Debian 15.18-0+deb12u1)"
    assert report.server_version is None
    assert report.transaction_type == "<builtin: TPC-B (sort of)>"
    assert (report.scale, report.clients, report.threads, report.max_tries) == (2, 2, 2, 1)
    assert report.duration_s == 2 and report.transactions_per_client is None
    assert report.latency_avg_measured and report.latency_stddev_ms is not None
    assert report.reconnect_each_transaction is False
    assert report.tps_including_connections is None
    assert report.skipped is None and report.late is None and report.lag_avg_ms is None


def test_derived_latency_is_not_marked_measured() -> None:
    report = parse_report(captured("16", "select-only"))
    assert report.latency_avg_ms is not None
    assert not report.latency_avg_measured and report.latency_stddev_ms is None


def test_latency_including_failures_is_flagged() -> None:
    report = parse_report(captured("18", "serialization-failures"))
    assert report.includes_failures and report.failed and report.failed > 0
    assert [s.failures for s in report.statements if s.failures] == [report.failed]


def test_reconnect_form_of_the_tps_line() -> None:
    report = parse_report(captured("16", "connect"))
    assert report.reconnect_each_transaction is True
    assert report.average_connection_time_ms is not None
    assert report.initial_connection_time_ms is None


def test_cross_version_header_names_both_versions() -> None:
    assert parse_report(captured("18", "server-15")).server_version == (
        "15.18 (Debian 15.18-0+deb12u1)"
    )
    report = parse_report(captured("15", "server-18"))
    assert (report.client_version, report.server_version) == (
        "15.18 (Debian 15.18-0+deb12u1)",
        "18.6",
    )


def test_eighteen_per_script_blocks_count_processed_separately() -> None:
    report = parse_report(captured("18", "everything"))
    serial = report.scripts[0]
    assert serial.name == "serial.sql" and serial.weight == 3
    # 18 counts failed transactions in " - N transactions" and adds a "processed" line.
    assert serial.transactions == (serial.processed or 0) + (serial.failed or 0)
    assert [s.retries for s in serial.statements] == [0, 0, 453, 0, 0]


def test_zero_transaction_reports_are_accepted_without_tps() -> None:
    for major in CAPTURED_DIRS:
        report = parse_report(captured(major, "client-abort"))
        assert report.transactions == 0 and report.transactions_planned == 10
        assert report.tps is None and report.latency_avg_ms is None
    assert math.isnan(parse_report(captured("15", "client-abort")).failed_pct or 0.0)
    assert parse_report(captured("18", "client-abort")).failed is None  # 18 stops earlier


def test_nan_spellings_of_old_versions() -> None:
    report = parse_report((GOLDEN / "documented-9.6" / "multiple-scripts.stdout").read_text())
    unused = report.scripts[2]
    assert unused.weight == 0 and unused.transactions == 0
    assert unused.latency_avg_ms is not None and math.isnan(unused.latency_avg_ms)
    assert all(math.isnan(s.latency_ms) for s in unused.statements)


def test_old_tps_lines_split_connection_time() -> None:
    report = parse_report(captured("13", "client-abort"))
    assert report.client_version is None and report.tps is None
    report = parse_report(captured("13", "partitioned-rate-limit-per-statement"))
    assert (report.tps, report.tps_including_connections) == (1037.83416, 1037.088515)
    assert report.reconnect_each_transaction is None
    assert (report.partition_method, report.partitions) == ("range", 2)
    assert (report.late, report.late_of, report.late_pct) == (60, 2076, 2.89)
    assert (report.skipped, report.lag_avg_ms, report.lag_max_ms) == (12, 0.109, 2.655)
    assert len(report.statements) == 11
    connect = parse_report(captured("13", "connect"))  # -C before 14: the same two lines
    assert (connect.tps, connect.tps_including_connections) == (1087.601067, 583.545262)


def test_every_pattern_group_is_a_field() -> None:
    """Group names become field values; a typo would only fail on the line that uses it."""
    for rules, cls in (
        (report_module._GLOBAL_RULES, PgbenchReport),
        (report_module._SCRIPT_RULES, ScriptStats),
    ):
        names = {f.name for f in fields(cls)}
        for pattern, fixed in rules:
            assert set(pattern.groupindex) | set(fixed) <= names, pattern.pattern


# --- robustness ---------------------------------------------------------------------------------


def test_unknown_lines_are_kept_and_do_not_disturb() -> None:
    text = captured("15", "max-tries")
    vendor = "default transaction isolation level: repeatable read"
    extra = text.replace("query mode: simple\n", f"query mode: simple\n{vendor}\n")
    with_extra, plain_report = parse_report(extra), parse_report(text)
    assert with_extra.unknown_lines == (vendor,)
    assert asdict(with_extra) | {"unknown_lines": ()} == asdict(plain_report)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "transaction type"),
        ("pgbench (18.6)\n", "transaction type"),
        (captured("15", "t-mode").split("latency average")[0], "no tps line"),
        ("transaction type: x.sql\nscaling factor: 1\n", "actually processed"),
        ("\x00\n\t\r\n", "transaction type"),
    ],
)
def test_missing_or_cut_reports_raise(text: str, message: str) -> None:
    with pytest.raises(PgbenchParseError, match=message):
        parse_report(text)


def header_lines(text: str) -> list[str]:
    """The global lines of a report (before any per-script block or statement table)."""
    stop = re.compile(r"SQL script |script statistics:|statement latencies")
    lines = text.splitlines()
    end = next((i for i, line in enumerate(lines) if stop.match(line)), len(lines))
    return lines[:end]


def scalar_fields(report: PgbenchReport) -> dict[str, Any]:
    skip = {"scripts", "statements", "unknown_lines"}
    return {f.name: getattr(report, f.name) for f in fields(report) if f.name not in skip}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CASES), st.randoms(use_true_random=False))
def test_lines_are_matched_by_key_not_position(stdout: Path, rnd: Any) -> None:
    lines = header_lines(stdout.read_text())
    shuffled = lines[:]
    rnd.shuffle(shuffled)
    try:
        original = parse_report("\n".join(lines))
    except PgbenchParseError:
        with pytest.raises(PgbenchParseError):
            parse_report("\n".join(shuffled))
        return
    assert plain(scalar_fields(parse_report("\n".join(shuffled)))) == plain(scalar_fields(original))


def parse_or_refuse(text: str) -> PgbenchReport | None:
    """The contract: a report or PgbenchParseError, never any other exception."""
    try:
        report = parse_report(text)
    except PgbenchParseError:
        return None
    assert report.transactions is None or report.transactions >= 0
    assert report.tps is None or report.tps >= 0
    return report


@pytest.mark.parametrize("stdout", CASES, ids=case_id)
def test_every_prefix_parses_or_is_refused(stdout: Path) -> None:
    text = stdout.read_text()
    for end in range(len(text) + 1):
        parse_or_refuse(text[:end])


@pytest.mark.parametrize("stdout", CASES, ids=case_id)
def test_a_report_cut_before_its_tps_line_is_refused(stdout: Path) -> None:
    report = parse_or_refuse(stdout.read_text())
    if report is None or report.transactions == 0:
        return
    lines = stdout.read_text().splitlines(keepends=True)
    tps_at = next(i for i, line in enumerate(lines) if line.startswith("tps = "))
    for end in range(tps_at):
        with pytest.raises(PgbenchParseError):
            parse_report("".join(lines[:end]))


ALL_LINES = sorted({line for p in CASES for line in p.read_text().splitlines()})


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_parses_or_is_refused(text: str) -> None:
    parse_or_refuse(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ALL_LINES), st.text(max_size=40)), max_size=60))
def test_random_mixes_of_report_lines_parse_or_are_refused(lines: list[str]) -> None:
    report = parse_or_refuse("\n".join(lines))
    if report is not None:
        assert report.transaction_type and (report.tps is not None or report.transactions == 0)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CASES).flatmap(lambda p: st.permutations(p.read_text().splitlines())))
def test_shuffled_reports_parse_or_are_refused(lines: list[str]) -> None:
    parse_or_refuse("\n".join(lines))


@pytest.mark.parametrize("stdout", CASES, ids=case_id)
def test_a_stored_report_reads_back_as_the_same_record(stdout: Path) -> None:
    """The store keeps a report as JSON and its readers give back the record it was."""
    try:
        report = parse_report(stdout.read_text())
    except PgbenchParseError:
        return
    stored = json.loads(json.dumps(report.stored(), sort_keys=True))
    read = PgbenchReport.from_stored(stored)
    assert read is not None and plain(read.stored()) == plain(report.stored())
    nested = [*read.statements, *(r for s in read.scripts for r in s.statements)]
    assert all(isinstance(s, ScriptStats) for s in read.scripts)
    assert all(isinstance(r, report_module.StatementStats) for r in nested)
    assert PgbenchReport.from_stored({}) is None  # a run without a report stores {}
