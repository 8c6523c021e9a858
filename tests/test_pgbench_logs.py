"""Per-transaction and aggregate pgbench logs, checked against an independent brute-force reading.

Golden files: ``tests/golden/logs/<major>/<case>/`` were written by real pgbench 13 (built from
Debian's source package), 15, 16, 17 (Debian's binary packages) and 18
(``tests/golden/logs/capture_logs.py``; flags in ``cases.json``, provenance in ``CAPTURED.md``);
``tests/golden/logs/hand/`` holds hand-written files in the documented 9.6–14 formats.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_of_sorted
from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench.aggregate_logs import AggregateLogSummary, analyse_aggregate_logs
from pgbenchlab.pgbench.logs import (
    Distribution,
    TransactionLogSummary,
    analyse_transaction_logs,
    thread_log_files,
)

GOLDEN = Path(__file__).parent / "golden" / "logs"
MAJORS = ("13", "15", "16", "17", "18")
WORDS = {"skipped", "failed", "serialization", "deadlock"}


@dataclass(frozen=True)
class Case:
    major: int
    name: str
    files: tuple[Path, ...]
    rate_limited: bool
    retries: bool
    sampling_rate: float
    aggregate: bool


def captured_cases() -> list[Case]:
    cases = []
    for major in MAJORS:
        index = json.loads((GOLDEN / major / "cases.json").read_text())
        for name, flags in index.items():
            if name == "version":
                continue
            files = thread_log_files(GOLDEN / major / name / "pgbench_log")
            cases.append(
                Case(
                    int(major),
                    name,
                    files,
                    flags["rate_limited"],
                    flags["retries"],
                    flags["sampling_rate"],
                    flags["aggregate"],
                )
            )
    return cases


HAND_TRANSACTION_CASES = [
    Case(9, "9.6/rate-limit", (), True, False, 1.0, False),
    Case(11, "11/plain", (), False, False, 1.0, False),
    Case(14, "14/rate-limit", (), True, False, 1.0, False),
]
CASES = captured_cases()
TRANSACTION_CASES = [c for c in CASES if not c.aggregate]
AGGREGATE_CASES = [c for c in CASES if c.aggregate and c.major >= 15]
OLD_AGGREGATE_CASES = [c for c in CASES if c.aggregate and c.major < 15]


def hand_files(name: str) -> tuple[Path, ...]:
    return thread_log_files(GOLDEN / "hand" / name / "pgbench_log")


def case_id(case: Case) -> str:
    return f"{case.major}-{case.name}"


# The brute-force reference: plain Python over the text, values in sorted lists.


@dataclass(frozen=True)
class Line:
    time: int | str
    epoch: int
    us: int
    lag: int | None
    retries: int | None


def read_lines(files: tuple[Path, ...], rate_limited: bool, retries: bool) -> list[Line]:
    lines = []
    for path in files:
        for text in path.read_text().splitlines():
            fields = text.split(" ")
            assert len(fields) == 6 + rate_limited + retries
            time = fields[2] if fields[2] in WORDS else int(fields[2])
            lag = int(fields[6]) if rate_limited else None
            tries = int(fields[-1]) if retries else None
            lines.append(Line(time, int(fields[4]), int(fields[5]), lag, tries))
    return lines


def analyse(
    case: Case, files: tuple[Path, ...] | None = None, **kw: object
) -> TransactionLogSummary:
    return analyse_transaction_logs(
        files if files is not None else case.files,
        pg_major=case.major,
        rate_limited=case.rate_limited,
        has_retries_column=case.retries,
        sampling_rate=case.sampling_rate,
        **kw,  # type: ignore[arg-type]
    )


def check_distribution(found: Distribution | None, values: list[int]) -> None:
    if not values:
        assert found is None
        return
    assert found is not None
    ordered = sorted(values)
    assert found.count == len(values)
    for p in STANDARD_PERCENTILES:
        assert found.percentile_ms(p) == percentile_of_sorted(ordered, p) / 1000
    assert found.min_ms == ordered[0] / 1000
    assert found.max_ms == ordered[-1] / 1000
    assert found.mean_ms == pytest.approx(statistics.fmean(values) / 1000, rel=1e-12)
    assert found.stddev_ms == pytest.approx(statistics.pstdev(values) / 1000, rel=1e-9, abs=1e-12)


def check_against_brute_force(summary: TransactionLogSummary, lines: list[Line]) -> None:
    ok = [line for line in lines if isinstance(line.time, int)]
    latencies = [line.time for line in ok if isinstance(line.time, int)]
    assert summary.lines == len(lines)
    assert summary.successful == len(ok)
    assert summary.skipped == sum(line.time == "skipped" for line in lines)
    failures = [line for line in lines if line.time in ("failed", "serialization", "deadlock")]
    assert summary.failed == len(failures)
    assert summary.serialization_failures == sum(x.time == "serialization" for x in failures)
    assert summary.deadlock_failures == sum(x.time == "deadlock" for x in failures)
    check_distribution(summary.latency, latencies)
    assert summary.latency_histogram.count == len(ok)
    if summary.rate_limited:
        lags = [line.lag or 0 for line in ok]
        check_distribution(summary.lag, lags)
        check_distribution(
            summary.service_time, [max(0, t - g) for t, g in zip(latencies, lags, strict=True)]
        )
    else:
        assert summary.lag is None and summary.service_time is None
    if lines[0].retries is not None:
        assert summary.retried == sum((line.retries or 0) > 0 for line in lines)
        assert summary.retries == sum(line.retries or 0 for line in lines)
    check_per_second(summary, lines)


def check_per_second(summary: TransactionLogSummary, lines: list[Line]) -> None:
    by_second: dict[int, list[Line]] = defaultdict(list)
    for line in lines:
        by_second[line.epoch].append(line)
    seconds = [s.start_s for s in summary.per_second]
    assert seconds == list(range(min(by_second), max(by_second) + 1))
    for second in summary.per_second:
        group = by_second.get(second.start_s, [])
        values = [line.time for line in group if isinstance(line.time, int)]
        assert second.successful == len(values)
        assert second.skipped == sum(line.time == "skipped" for line in group)
        assert second.failed == sum(line.time in WORDS - {"skipped"} for line in group)
        if not values:
            assert second.latency_mean_ms is None
            continue
        assert second.latency_min_ms == min(values) / 1000
        assert second.latency_max_ms == max(values) / 1000
        assert second.latency_mean_ms == pytest.approx(statistics.fmean(values) / 1000)
        assert second.latency_stddev_ms == pytest.approx(statistics.pstdev(values) / 1000)
        if summary.rate_limited:
            lags = [line.lag or 0 for line in group if isinstance(line.time, int)]
            assert second.lag_mean_ms == pytest.approx(statistics.fmean(lags) / 1000)
            assert second.lag_max_ms == max(lags) / 1000


# Real pgbench logs.


@pytest.mark.parametrize("case", TRANSACTION_CASES, ids=case_id)
def test_real_transaction_logs_match_brute_force(case: Case) -> None:
    assert len(case.files) == 2  # -j 2: one file per thread
    summary = analyse(case)
    check_against_brute_force(summary, read_lines(case.files, case.rate_limited, case.retries))
    assert summary.truncated_lines == 0


@pytest.mark.parametrize("case", HAND_TRANSACTION_CASES, ids=lambda c: c.name)
def test_hand_written_old_formats_match_brute_force(case: Case) -> None:
    files = hand_files(case.name)
    summary = analyse(case, files)
    check_against_brute_force(summary, read_lines(files, case.rate_limited, False))


def by_name(name: str) -> list[Case]:
    return [c for c in TRANSACTION_CASES if c.name == name]


@pytest.mark.parametrize("case", by_name("rate-limit"), ids=case_id)
def test_rate_limited_runs_label_latency_lag_and_service_time(case: Case) -> None:
    summary = analyse(case)
    assert summary.skipped > 0
    assert summary.latency is not None and summary.lag is not None
    assert summary.service_time is not None and summary.service_time_histogram is not None
    assert summary.latency.measure == "latency_from_schedule"
    assert "scheduled start" in summary.latency.description
    assert summary.lag.measure == "schedule_lag" and summary.service_time.measure == "service_time"
    assert summary.service_time.mean_ms <= summary.latency.mean_ms


@pytest.mark.parametrize("case", by_name("failures") + by_name("rate-retries"), ids=case_id)
def test_failed_transactions_and_retries(case: Case) -> None:
    summary = analyse(case)
    assert summary.failed > 0
    assert summary.serialization_failures == summary.deadlock_failures == 0
    assert summary.retried is not None and summary.retried > 0
    assert summary.retries is not None and summary.retries >= summary.retried
    assert sum(s.retries or 0 for s in summary.per_second) == summary.retries


@pytest.mark.parametrize("case", by_name("failures-detailed"), ids=case_id)
def test_detailed_failures(case: Case) -> None:
    summary = analyse(case)
    assert summary.serialization_failures > 0 and summary.deadlock_failures > 0
    assert summary.failed == summary.serialization_failures + summary.deadlock_failures


@pytest.mark.parametrize("case", by_name("sampling"), ids=case_id)
def test_sampled_logs_keep_raw_counts_and_say_so(case: Case) -> None:
    summary = analyse(case)
    lines = read_lines(case.files, False, False)
    assert summary.sampled and summary.sampling_rate == case.sampling_rate
    assert summary.successful == len(lines)  # not scaled by 1 / rate
    assert summary.latency is not None and summary.latency.sampled
    assert summary.latency.description.endswith("(sampled)")


@pytest.mark.parametrize("case", by_name("rate-limit") + by_name("plain"), ids=case_id)
def test_window_keeps_transactions_completed_inside(case: Case) -> None:
    lines = read_lines(case.files, case.rate_limited, case.retries)
    done = sorted(line.epoch * 1_000_000 + line.us for line in lines)
    start, end = done[len(done) // 4] / 1e6, done[3 * len(done) // 4] / 1e6
    inside = [line for line in lines if start * 1e6 <= line.epoch * 1_000_000 + line.us < end * 1e6]
    summary = analyse(case, window=(start, end))
    assert summary.window == (start, end)
    assert summary.lines_outside_window == len(lines) - len(inside)
    check_against_brute_force(summary, inside)


def test_a_log_from_a_clock_ahead_is_moved_onto_ours(tmp_path: Path) -> None:
    here, there = tmp_path / "pgbench_log.1", tmp_path / "pgbench_log.lg1.2"
    here.write_text("0 1 100 0 1600000000 900000\n")
    there.write_text("0 1 200 0 1600000001 100000\n0 2 300 0 1600000002 300000\n")
    summary = analyse_transaction_logs(
        [here, there],
        pg_major=16,
        rate_limited=False,
        has_retries_column=False,
        window=(1600000000.5, 1600000001.5),
        clock_offsets_s={there: 0.25},  # its 1.1 s and 2.3 s are our 0.85 s and 2.05 s
    )
    assert (summary.lines, summary.lines_outside_window) == (2, 1)
    assert [s.start_s for s in summary.per_second] == [1600000000]
    assert summary.latency is not None and summary.latency.max_ms == 0.2


def test_window_still_checks_lines_outside_it(tmp_path: Path) -> None:
    path = tmp_path / "pgbench_log.3"
    path.write_text("0 1 100 0 1600000000 5\n0 2 100 x 1600000009 5\n")
    with pytest.raises(PgbenchParseError):
        analyse_transaction_logs(
            [path],
            pg_major=16,
            rate_limited=False,
            has_retries_column=False,
            window=(1600000000, 1600000001),
        )


@pytest.mark.parametrize("case", by_name("failures-detailed"), ids=case_id)
def test_zstd_compressed_files_read_like_plain_ones(case: Case, tmp_path: Path) -> None:
    compressed = []
    for path in case.files:
        target = tmp_path / (path.name + ".zst")
        target.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
        compressed.append(target)
    assert thread_log_files(tmp_path / "pgbench_log") == tuple(compressed)
    plain, packed = analyse(case), analyse(case, tuple(compressed))
    assert packed.latency == plain.latency and packed.per_second == plain.per_second
    assert packed.failed == plain.failed


@pytest.mark.parametrize("case", by_name("rate-limit"), ids=case_id)
def test_killed_pgbench_partial_last_line_is_counted_not_parsed(case: Case, tmp_path: Path) -> None:
    first, second = case.files
    text = first.read_text()
    cut = tmp_path / "pgbench_log.1"
    cut.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 4])  # "0 1" of the last line
    only_partial = tmp_path / "pgbench_log.1.1"
    only_partial.write_text("3 17 2")
    summary = analyse(case, (cut, second, only_partial))
    assert summary.truncated_lines == 2
    expected = read_lines((first,), True, False)[:-1] + read_lines((second,), True, False)
    check_against_brute_force(summary, expected)


def test_no_lines_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "pgbench_log.1"
    empty.write_text("")
    summary = analyse_transaction_logs(
        [empty], pg_major=16, rate_limited=True, has_retries_column=False
    )
    assert summary.lines == summary.successful == 0
    assert summary.latency is None and summary.lag is None and summary.per_second == ()
    assert summary.latency_histogram.count == 0


# Malformed input.

GOOD = "0 1 2545 0 1795340194 653781\n"


@pytest.mark.parametrize(
    ("text", "pg_major"),
    [
        ("0 1 2545 0 1795340194\n", 15),  # a field missing
        ("0 1 2545 0 1795340194 653781 7\n", 15),  # one too many
        ("0 1 fast 0 1795340194 653781\n", 15),  # unknown word
        ("0 1 failed 0 1795340194 653781\n", 14),  # no failures before 15
        ("0 1 -5 0 1795340194 653781\n", 15),  # negative latency
        ("0 1 2545 0 x 653781\n", 15),
        ("0 1  2545 0 1795340194\n", 15),  # an empty field
        ("0 1 99999999999999999999 0 1795340194 653781\n", 15),
        ("0 1 2545 0 1 5\n0 1 2545 0 1795340194 653781\n", 15),  # not one run
    ],
)
def test_malformed_lines_raise_parse_errors(text: str, pg_major: int, tmp_path: Path) -> None:
    path = tmp_path / "pgbench_log.9"
    path.write_text(GOOD + text + GOOD)
    with pytest.raises(PgbenchParseError):
        analyse_transaction_logs(
            [path], pg_major=pg_major, rate_limited=False, has_retries_column=False
        )


def test_wrong_column_flags_raise_parse_errors() -> None:
    case = by_name("rate-retries")[0]
    for rate_limited, retries in ((False, True), (True, False), (False, False)):
        with pytest.raises(PgbenchParseError):
            analyse_transaction_logs(
                case.files, pg_major=15, rate_limited=rate_limited, has_retries_column=retries
            )


def test_corrupt_zstd_file_raises_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "pgbench_log.5.zst"
    path.write_bytes(b"(\xb5/\xfd not really zstd")
    with pytest.raises(PgbenchParseError):
        analyse_transaction_logs([path], pg_major=15, rate_limited=False, has_retries_column=False)


LOG_ALPHABET = st.sampled_from(
    ["0", "1", "7", "12", " ", " ", "\n", "\n", "skipped", "failed", "-", "x", '"', "\r", "\t", "é"]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(LOG_ALPHABET, max_size=60).map("".join),
    st.sampled_from([9, 14, 15, 18]),
    st.booleans(),
    st.booleans(),
    st.binary(max_size=8),
)
def test_any_text_gives_a_summary_or_a_parse_error(
    text: str, major: int, rate_limited: bool, retries: bool, junk: bytes
) -> None:
    retries = retries and major >= 15
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pgbench_log.1"
        path.write_bytes(text.encode() + junk)
        newlines = (text.encode() + junk).count(b"\n")
        with contextlib.suppress(PgbenchParseError):
            summary = analyse_transaction_logs(
                [path], pg_major=major, rate_limited=rate_limited, has_retries_column=retries
            )
            assert summary.lines + summary.lines_outside_window <= newlines
            assert summary.truncated_lines <= 1
            counted = summary.successful + summary.skipped + summary.failed
            assert counted == summary.lines
            assert sum(s.successful for s in summary.per_second) == summary.successful
            assert_ordered(summary.latency)
        with contextlib.suppress(PgbenchParseError):
            aggregate = analyse_aggregate_logs([path], pg_major=major)
            assert len(aggregate.intervals) <= newlines + 1
            assert sum(i.successful for i in aggregate.intervals) == aggregate.successful
            assert min((i.successful for i in aggregate.intervals), default=0) >= 0


def assert_ordered(distribution: Distribution | None) -> None:
    """A distribution's figures are finite and ordered: min ≤ each percentile ≤ max."""
    if distribution is None:
        return
    values = [value for _, value in distribution.percentiles_ms]
    assert distribution.count > 0 and all(math.isfinite(v) for v in values)
    assert distribution.min_ms <= min(values) and max(values) <= distribution.max_ms
    assert values == sorted(values)
    slack = 1e-9 * max(1.0, distribution.max_ms)  # the mean is a float sum
    assert distribution.min_ms - slack <= distribution.mean_ms <= distribution.max_ms + slack


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([c for c in TRANSACTION_CASES if c.name == "rate-retries"]), st.data())
def test_a_file_cut_anywhere_still_reads(case: Case, data: st.DataObject) -> None:
    text = case.files[0].read_bytes()
    cut = data.draw(st.integers(0, len(text)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pgbench_log.1"
        path.write_bytes(text[:cut])
        summary = analyse(case, (path,))
    complete = text[:cut].count(b"\n")
    assert summary.lines == complete
    assert summary.truncated_lines == (0 if cut == 0 or text[cut - 1 : cut] == b"\n" else 1)


# Aggregate logs.


def brute_aggregate(files: tuple[Path, ...]) -> dict[int, list[list[int]]]:
    rows: dict[int, list[list[int]]] = defaultdict(list)
    for path in files:
        for text in path.read_text().splitlines():
            fields = [int(f) for f in text.split(" ")]
            rows[fields[0]].append(fields)
    return rows


@pytest.mark.parametrize("case", AGGREGATE_CASES, ids=case_id)
def test_real_aggregate_logs_sum_threads(case: Case) -> None:
    summary = analyse_aggregate_logs(case.files, pg_major=case.major)
    rows = brute_aggregate(case.files)
    assert summary.columns == 15 and not summary.transactions_include_skipped
    assert summary.interval_s == 1 and summary.truncated_lines == 0
    assert [i.start_s for i in summary.intervals] == sorted(rows)
    assert summary.rate_limited == case.rate_limited
    for interval in summary.intervals:
        group = rows[interval.start_s]
        n = sum(r[1] for r in group)
        assert interval.successful == n
        assert interval.skipped == sum(r[10] for r in group)
        assert interval.retried == sum(r[11] for r in group)
        assert interval.serialization_failures == sum(r[13] for r in group)
        assert interval.failed is None  # 15+ has no column for all failures
        assert interval.latency_mean_ms == pytest.approx(sum(r[2] for r in group) / n / 1000)
        assert interval.latency_min_ms == min(r[4] for r in group) / 1000
        assert interval.latency_max_ms == max(r[5] for r in group) / 1000
        variance = sum(r[3] for r in group) / n - (sum(r[2] for r in group) / n) ** 2
        assert interval.latency_stddev_ms == pytest.approx(math.sqrt(variance) / 1000)
        if case.rate_limited:
            assert interval.lag_mean_ms == pytest.approx(sum(r[6] for r in group) / n / 1000)
    if case.name == "aggregate-rate":
        assert summary.skipped > 0
    if case.name == "aggregate-failures":
        assert sum(i.serialization_failures or 0 for i in summary.intervals) > 0
        assert sum(i.retries or 0 for i in summary.intervals) > 0


@pytest.mark.parametrize("case", OLD_AGGREGATE_CASES, ids=case_id)
def test_real_old_aggregate_logs_count_skipped_in_num_transactions(case: Case) -> None:
    """Real ≤14 files: 6 columns, 11 with -R -L; num_transactions includes the skipped ones,
    the latency sums cover the others."""
    summary = analyse_aggregate_logs(case.files, pg_major=case.major)
    rows = brute_aggregate(case.files)
    assert summary.columns == (11 if case.rate_limited else 6)
    assert summary.transactions_include_skipped and summary.rate_limited == case.rate_limited
    assert [i.start_s for i in summary.intervals] == sorted(rows)
    for interval in summary.intervals:
        group = rows[interval.start_s]
        skipped = sum(r[10] for r in group) if case.rate_limited else 0
        n = sum(r[1] for r in group) - skipped
        assert (interval.successful, interval.skipped) == (n, skipped)
        assert interval.latency_mean_ms == pytest.approx(sum(r[2] for r in group) / n / 1000)
        assert interval.latency_max_ms == max(r[5] for r in group) / 1000
        if case.rate_limited:
            assert interval.lag_mean_ms == pytest.approx(sum(r[6] for r in group) / n / 1000)
            assert interval.lag_max_ms == max(r[9] for r in group) / 1000
    assert summary.skipped > 0 if case.rate_limited else summary.skipped == 0


def aggregate(name: str, major: int) -> AggregateLogSummary:
    return analyse_aggregate_logs(hand_files(name), pg_major=major)


def test_old_aggregate_six_columns() -> None:
    summary = aggregate("10/aggregate", 10)
    assert summary.columns == 6 and summary.transactions_include_skipped
    assert not summary.rate_limited
    first, second = summary.intervals
    assert (first.start_s, first.successful, first.skipped, first.failed) == (1500000000, 220, 0, 0)
    assert first.latency_mean_ms == pytest.approx(280_000 / 220 / 1000)
    assert (first.latency_min_ms, first.latency_max_ms) == (0.38, 9.0)
    assert second.latency_max_ms == 15.0 and second.lag_mean_ms is None
    assert second.retried is None and second.serialization_failures is None


def test_old_aggregate_with_lag() -> None:
    summary = aggregate("12/aggregate-rate", 12)
    assert summary.columns == 10 and summary.rate_limited
    first = summary.intervals[0]
    assert first.successful == 95
    assert first.lag_mean_ms == pytest.approx(9000 / 95 / 1000)
    assert first.lag_max_ms == 0.4


def test_old_aggregate_counts_skipped_in_num_transactions() -> None:
    summary = aggregate("14/aggregate-rate-skipped", 14)
    assert summary.columns == 11 and summary.transactions_include_skipped
    first, second, third = summary.intervals
    # num_transactions 60 + 55 includes 10 + 5 skipped; latency sums are over the other 100
    assert (first.successful, first.skipped) == (100, 15)
    assert first.latency_mean_ms == pytest.approx(0.95)
    assert first.lag_mean_ms == pytest.approx(0.15)
    assert (first.latency_min_ms, first.latency_max_ms, first.lag_max_ms) == (0.3, 4.0, 0.9)
    assert (second.successful, second.skipped) == (195, 20)
    assert (third.successful, third.skipped, third.latency_mean_ms) == (0, 30, None)
    assert summary.successful == 295 and summary.skipped == 65


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ("1 2 3 4 5 6 7\n", 14),  # 7 columns never existed
        ("1 2 3 4 5 6\n", 15),  # 15+ always writes 15
        ("1 2 3 4 5 x\n", 12),
        ("1 2 3 4 5 6\n1 2 3 4 5 6 7 8 9 10\n", 12),  # widths disagree
        ("1 2 3 4 5 -6\n", 12),
    ],
)
def test_malformed_aggregate_lines(text: str, major: int, tmp_path: Path) -> None:
    path = tmp_path / "pgbench_log.2"
    path.write_text(text)
    with pytest.raises(PgbenchParseError):
        analyse_aggregate_logs([path], pg_major=major)


def test_windows_line_ends_are_accepted(tmp_path: Path) -> None:
    # pgbench on Windows writes its logs in text mode: CRLF.
    path = tmp_path / "pgbench_log.2"
    path.write_bytes(b"1500000000 120 150000 250000000 400 9000\r\n")
    assert analyse_aggregate_logs([path], pg_major=13).successful == 120
    path.write_bytes(GOOD.replace("\n", "\r\n").encode() * 2)
    summary = analyse_transaction_logs(
        [path], pg_major=13, rate_limited=False, has_retries_column=False
    )
    assert summary.successful == 2


@pytest.mark.parametrize("case", [c for c in AGGREGATE_CASES if c.major == 18], ids=case_id)
def test_compressed_aggregate_logs(case: Case, tmp_path: Path) -> None:
    packed = []
    for path in case.files:
        target = tmp_path / (path.name + ".zst")
        # streamed: no content size in the frame header
        with path.open("rb") as source, target.open("wb") as sink:
            zstandard.ZstdCompressor().copy_stream(source, sink)
        packed.append(target)
    plain = analyse_aggregate_logs(case.files, pg_major=18)
    assert analyse_aggregate_logs(packed, pg_major=18).intervals == plain.intervals


def test_aggregate_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "pgbench_log.2"
    path.write_text("1500000000 120 150000 250000000 400 9000\n1500000001 30")
    summary = analyse_aggregate_logs([path], pg_major=13)
    assert summary.truncated_lines == 1 and len(summary.intervals) == 1


def test_thread_files_need_one_pid(tmp_path: Path) -> None:
    for name in ("run.7", "run.7.1", "run.7.2.zst", "run.8", "run.txt", "run.7.x"):
        (tmp_path / name).write_text("")
    with pytest.raises(ValueError):
        thread_log_files(tmp_path / "run")
    assert [p.name for p in thread_log_files(tmp_path / "run", pid=7)] == [
        "run.7",
        "run.7.1",
        "run.7.2.zst",
    ]
