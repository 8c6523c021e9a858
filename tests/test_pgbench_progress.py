"""Golden and property tests for the stderr parser: -P progress lines, aborts and messages."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgbenchlab.pgbench.progress import (
    PgbenchStderr,
    ProgressLine,
    parse_progress,
    parse_progress_line,
    parse_stderr,
)
from support import case_id, plain

GOLDEN = Path(__file__).parent / "golden" / "pgbench"
CASES = sorted(GOLDEN.glob("*/*.stderr"))


def as_dict(parsed: PgbenchStderr) -> dict[str, Any]:
    return asdict(parsed) | {"errors": parsed.errors, "warnings": parsed.warnings}


def golden(major: str, name: str) -> PgbenchStderr:
    return parse_stderr((GOLDEN / major / f"{name}.stderr").read_text())


def exit_status(stderr: Path) -> int:
    return int(stderr.with_suffix(".exit").read_text())


# --- golden files -------------------------------------------------------------------------------


@pytest.mark.parametrize("stderr", CASES, ids=case_id)
def test_stderr_matches_golden(stderr: Path) -> None:
    want = json.loads(stderr.with_suffix(".json").read_text())["stderr"]
    assert plain(as_dict(parse_stderr(stderr.read_text()))) == plain(want)


@pytest.mark.parametrize("stderr", CASES, ids=case_id)
def test_every_progress_line_is_parsed(stderr: Path) -> None:
    text = stderr.read_text()
    count = sum(line.startswith("progress: ") for line in text.splitlines())
    assert len(parse_progress(text)) == count == len(parse_stderr(text).progress)


@pytest.mark.parametrize("stderr", CASES, ids=case_id)
def test_aborted_agrees_with_the_exit_status(stderr: Path) -> None:
    parsed = parse_stderr(stderr.read_text())
    # 12+ exit 2 exactly when the run was aborted; 9.6-11 exit 0 with client aborts only.
    old = stderr.parent.name in ("documented-9.6", "documented-10", "documented-11")
    assert parsed.aborted == (exit_status(stderr) == 2)
    if parsed.client_aborts and not old:
        assert parsed.aborted


def test_error_lines_do_not_mean_failure() -> None:
    for major in ("13", "15", "16", "18"):
        parsed = golden(major, "custom-script-no-tables")
        assert len(parsed.errors) == 3 and not parsed.aborted and not parsed.client_aborts
        assert exit_status(GOLDEN / major / "custom-script-no-tables.stderr") == 0


def test_multi_line_server_errors_stay_with_their_message() -> None:
    parsed = golden("15", "missing-tables")
    assert parsed.errors == (
        'could not count number of branches: ERROR:  relation "pgbench_branches" does not exist\n'
        "LINE 1: select count(*) from pgbench_branches\n"
        "                             ^",
    )
    assert [m.level for m in parsed.messages] == ["error", "hint"]
    assert parsed.other_lines == ()


def test_abort_shapes_of_every_version() -> None:
    shapes = {
        "documented-9.6": "client 0 aborted in state 1: ",
        "documented-10": "client 0 aborted in command 1 of script 0; ",
        "documented-11": "client 0 aborted in command 1 (SQL) of script 0; ",
        "13": "pgbench: error: client 1 script 0 aborted in command 1 query 0: ",
        "18": "pgbench: error: client 0 script 0 aborted in command 1 query 0: ",
    }
    for directory, prefix in shapes.items():
        first = golden(directory, "client-abort").client_aborts[0]
        assert first == prefix + "ERROR:  division by zero"
    assert golden("documented-12", "client-abort-midrun").aborted
    assert golden("13", "client-abort").messages[-1].level == "fatal"  # "error" from 15 on
    assert golden("17", "exit-on-abort").aborted and golden("18", "exit-on-abort").aborted


def test_warnings_and_random_seed() -> None:
    assert golden("16", "partitioned").warnings == (
        "scale option ignored, using count from pgbench_branches table (2)",
    )
    assert golden("18", "random-seed").random_seed == 42
    assert golden("documented-11", "zipfian-latency-limit").random_seed == 42  # bare in 11/12


# --- single progress lines ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "progress: 5.0 s, 1843.2 tps, lat 2.168 ms stddev 1.234",
            ProgressLine(elapsed_s=5.0, tps=1843.2, latency_avg_ms=2.168, latency_stddev_ms=1.234),
        ),
        (
            "progress: 1.0 s, 2003.9 tps, lat 2.422 ms stddev 2.042, 0 failed, lag 0.782 ms, "
            "983 skipped",
            ProgressLine(
                elapsed_s=1.0, tps=2003.9, latency_avg_ms=2.422, latency_stddev_ms=2.042,
                failed=0, lag_ms=0.782, skipped=983,
            ),
        ),
        (
            "progress: 1.0 s, 695.9 tps, lat 3.196 ms stddev 2.448, 90 failed, lag 0.310 ms, "
            "0 skipped, 356 retried, 519 retries",
            ProgressLine(
                elapsed_s=1.0, tps=695.9, latency_avg_ms=3.196, latency_stddev_ms=2.448,
                failed=90, lag_ms=0.31, skipped=0, retried=356, retries=519,
            ),
        ),
        (
            "progress: 1795333832.685 s, 3211.9 tps, lat 0.611 ms stddev 0.462, 0 failed",
            ProgressLine(
                epoch_s=1795333832.685, tps=3211.9, latency_avg_ms=0.611,
                latency_stddev_ms=0.462, failed=0,
            ),
        ),
    ],
)  # fmt: skip
def test_progress_line_formats(line: str, want: ProgressLine) -> None:
    assert parse_progress_line(line) == want
    assert parse_progress_line(line + "\r\n") == want


@pytest.mark.parametrize("spelling", ["nan", "-nan", "NaN"])
def test_progress_nan(spelling: str) -> None:
    parsed = parse_progress_line(f"progress: 3.0 s, 0.0 tps, lat {spelling} ms stddev {spelling}")
    assert parsed is not None and math.isnan(parsed.latency_avg_ms)


@pytest.mark.parametrize(
    "line",
    [
        "",
        "starting vacuum...end.",
        "progress: 1.0 s, 1643.0 tps",
        "progress: 1.0 s, x tps, lat 2.396 ms stddev 2.164",
        "progress: 1.0 s, 1643.0 tps, lat 2.396 ms stddev 2.164, 0 failed, trailing",
        "100000 of 200000 tuples (50%) done (elapsed 0.10 s, remaining 0.10 s)",
    ],
)
def test_non_progress_lines_give_none(line: str) -> None:
    assert parse_progress_line(line) is None


def test_vacuum_banner_sharing_a_line_with_an_error() -> None:
    parsed = parse_stderr('starting vacuum...pgbench: error: ERROR:  relation "x" does not exist')
    assert parsed.errors == ('ERROR:  relation "x" does not exist',)
    assert parsed.other_lines == ()


# --- properties ---------------------------------------------------------------------------------

thousandths = st.integers(min_value=0, max_value=10**9)
counts = st.integers(min_value=0, max_value=10**12)


@settings(max_examples=300)
@given(
    st.integers(min_value=1, max_value=10**6),
    thousandths,
    thousandths,
    thousandths,
    st.one_of(st.none(), counts),
    st.one_of(st.none(), st.tuples(thousandths, st.one_of(st.none(), counts))),
    st.one_of(st.none(), st.tuples(counts, counts)),
)
def test_progress_round_trip(
    tenths: int,
    tps: int,
    lat: int,
    sd: int,
    failed: int | None,
    lag: tuple[int, int | None] | None,
    retry: tuple[int, int] | None,
) -> None:
    """A line written in pgbench's format parses back to exactly the printed values."""
    line = f"progress: {tenths / 10:.1f} s, {tps / 10:.1f} tps, lat {lat / 1000:.3f} ms"
    line += f" stddev {sd / 1000:.3f}"
    line += "" if failed is None else f", {failed} failed"
    if lag is not None:
        line += f", lag {lag[0] / 1000:.3f} ms" + ("" if lag[1] is None else f", {lag[1]} skipped")
    line += "" if retry is None else f", {retry[0]} retried, {retry[1]} retries"
    parsed = parse_progress_line(line)
    assert parsed is not None
    assert parsed.elapsed_s == float(f"{tenths / 10:.1f}") and parsed.epoch_s is None
    assert parsed.tps == float(f"{tps / 10:.1f}")
    assert parsed.latency_avg_ms == float(f"{lat / 1000:.3f}")
    assert parsed.latency_stddev_ms == float(f"{sd / 1000:.3f}")
    assert parsed.failed == failed
    assert parsed.lag_ms == (None if lag is None else float(f"{lag[0] / 1000:.3f}"))
    assert parsed.skipped == (None if lag is None else lag[1])
    assert (parsed.retried, parsed.retries) == (retry or (None, None))


ALL_LINES = sorted({line for p in CASES for line in p.read_text().splitlines()})
ABORT_LINES = {line for line in ALL_LINES if "Run was aborted" in line}


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    parsed = parse_stderr(text)
    assert len(parsed.progress) <= text.count("progress: ")
    for line in parsed.progress:
        assert line.tps >= 0 and (line.elapsed_s or line.epoch_s or 0) >= 0
    for line in text.split("\n"):
        parse_progress_line(line)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ALL_LINES), st.text(max_size=40)), max_size=60))
def test_random_mixes_of_stderr_lines_never_raise(lines: list[str]) -> None:
    parsed = parse_stderr("\n".join(lines))
    if ABORT_LINES.intersection(lines):
        assert parsed.aborted
    if parsed.aborted:
        assert any("Run was aborted" in line for line in lines)


@pytest.mark.parametrize("stderr", CASES, ids=case_id)
def test_every_prefix_never_raises(stderr: Path) -> None:
    text = stderr.read_text()
    whole = len(parse_stderr(text).progress)
    seen = 0
    for end in range(len(text) + 1):
        progress = len(parse_stderr(text[:end]).progress)
        assert progress <= whole
        if text[end - 1 : end] == "\n":  # whole lines: a longer prefix never loses one
            assert progress >= seen
            seen = progress
    assert seen == whole
