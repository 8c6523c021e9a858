"""The per-host log reduction on real pgbench logs (tests/golden/logs, see CAPTURED.md there):
the reductions of parts merged equal the reduction of the union, and summarised they give
what the whole-log path gives for the same files, window and clock offsets."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgbenchlab.errors import PgbenchParseError
from pgbenchlab.pgbench import log_reducer
from pgbenchlab.pgbench.log_files import thread_log_files
from pgbenchlab.pgbench.log_records import IntervalStats, TransactionLogSummary
from pgbenchlab.pgbench.log_reduced import merge_reductions, summarise_reduction
from pgbenchlab.pgbench.log_reducer import Layout, Reduction, reduce_logs
from pgbenchlab.pgbench.logs import analyse_transaction_logs

GOLDEN = Path(__file__).parent / "golden" / "logs"


def cases() -> list[tuple[int, str, tuple[Path, ...], dict[str, object]]]:
    found = []
    for index in sorted(GOLDEN.glob("*/cases.json")):
        major = index.parent.name
        for name, flags in json.loads(index.read_text()).items():
            if name != "version" and not flags["aggregate"]:
                files = thread_log_files(GOLDEN / major / name / "pgbench_log")
                found.append((int(major), name, files, flags))
    return found


CASES = cases()
IDS = [f"{major}-{name}" for major, name, _, _ in CASES]


def middle_window(files: tuple[Path, ...]) -> tuple[float, float]:
    """A window holding the middle third of the files' completion times."""
    done = sorted(
        int(f[4]) + int(f[5]) / 1e6
        for path in files
        for f in (line.split() for line in path.read_text().splitlines())
    )
    return done[len(done) // 3], done[2 * len(done) // 3]


def layout(flags: dict[str, object], window: tuple[float, float] | None, shift_us: int) -> Layout:
    return Layout(bool(flags["rate_limited"]), bool(flags["retries"]), window, shift_us)


def test_the_golden_cases_have_several_thread_files() -> None:
    assert len(CASES) >= 30 and all(len(files) >= 2 for _, _, files, _ in CASES)


@pytest.mark.parametrize(("major", "name", "files", "flags"), CASES, ids=IDS)
def test_parts_merged_equal_the_union(
    major: int, name: str, files: tuple[Path, ...], flags: dict[str, object]
) -> None:
    for window in (None, middle_window(files)):
        shape = layout(flags, window, 123_456)
        whole = reduce_logs([str(f) for f in files], shape)
        parts = [reduce_logs([str(f)], shape) for f in files]
        assert merge_reductions(parts).to_json() == whole.to_json()
        assert Reduction.from_json(whole.to_json()).to_json() == whole.to_json()
        assert whole.lines + whole.outside == sum(len(f.read_text().splitlines()) for f in files)


@pytest.mark.parametrize(("major", "name", "files", "flags"), CASES, ids=IDS)
def test_a_reduction_summarises_as_the_whole_logs_do(
    major: int, name: str, files: tuple[Path, ...], flags: dict[str, object]
) -> None:
    """Each thread file as if written on its own host, with its own clock offset."""
    window = middle_window(files)
    shifts = [0.0, -0.0625][: len(files)] + [0.25] * (len(files) - 2)
    parts = [
        reduce_logs([str(f)], layout(flags, window, round(s * 1e6)))
        for f, s in zip(files, shifts, strict=True)
    ]
    options = {
        "pg_major": major,
        "rate_limited": bool(flags["rate_limited"]),
        "has_retries": bool(flags["retries"]),
        "sampling_rate": float(str(flags["sampling_rate"])),
        "window": window,
    }
    reduced = summarise_reduction(merge_reductions(parts), **options)  # type: ignore[arg-type]
    offsets = dict(zip(files, shifts, strict=True))
    whole = analyse_transaction_logs(
        files,
        has_retries_column=options.pop("has_retries"),  # type: ignore[arg-type]
        clock_offsets_s=offsets,
        **options,  # type: ignore[arg-type]
    )
    assert reduced.successful > 0
    assert_same(reduced, whole)


def assert_same(reduced: TransactionLogSummary, whole: TransactionLogSummary) -> None:
    """Equal; per-second means and deviations (float arithmetic either way) to 1e-9."""
    plain = {"files": (), "per_second": ()}
    assert dataclasses.replace(reduced, **plain) == dataclasses.replace(whole, **plain)
    assert [Path(f).name for f in reduced.files] == [Path(f).name for f in whole.files]
    assert len(reduced.per_second) == len(whole.per_second)
    for mine, theirs in zip(reduced.per_second, whole.per_second, strict=True):
        assert _fields(mine) == pytest.approx(_fields(theirs), rel=1e-9, abs=1e-12)


def _fields(second: IntervalStats) -> list[float]:
    return [-1.0 if v is None else float(v) for v in dataclasses.astuple(second)]


def test_the_reducer_runs_alone_with_the_standard_library_only(tmp_path: Path) -> None:
    """As a load generator runs it: the file copied anywhere, python -I (no pgbenchlab)."""
    _, _, files, flags = next(c for c in CASES if c[1] == "rate-retries")
    script = tmp_path / "log_reducer.py"
    script.write_text(Path(log_reducer.__file__).read_text())
    shape = layout(flags, middle_window(files), -7)
    argv = [sys.executable, "-I", str(script), *log_reducer.arguments(shape), *map(str, files)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout == reduce_logs([str(f) for f in files], shape).to_json() + "\n"


def test_malformed_lines_are_refused_as_the_whole_log_path_does(tmp_path: Path) -> None:
    log = tmp_path / "pgbench_log.1"
    log.write_text("0 1 500 0 1795570325 1\n0 2 oops 0 1795570325 2\n0 3 600 0 17955")
    reduction = reduce_logs([str(log)], Layout(False, False))
    assert (reduction.lines, reduction.malformed, reduction.truncated) == (1, 1, 1)
    with pytest.raises(PgbenchParseError, match="1 malformed pgbench 17 log lines"):
        summarise_reduction(
            reduction,
            pg_major=17,
            rate_limited=False,
            has_retries=False,
            sampling_rate=1.0,
            window=None,
        )


def test_crlf_line_ends_and_a_partial_last_line(tmp_path: Path) -> None:
    """As a Windows pgbench writes them, and as a killed one leaves its file."""
    _, _, files, flags = next(c for c in CASES if c[1] == "rate-retries")
    shape = layout(flags, None, 0)
    crlf = tmp_path / files[0].name
    crlf.write_bytes(files[0].read_bytes().replace(b"\n", b"\r\n") + b"0 99 12")
    plain = reduce_logs([str(files[0])], shape)
    windows = reduce_logs([str(crlf)], shape)
    assert (windows.truncated, plain.truncated) == (1, 0)
    assert dataclasses.replace(windows, truncated=0).to_json() == plain.to_json()
