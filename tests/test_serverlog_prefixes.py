"""An external server's log read with its own log_line_prefix and log_timezone: golden logs
captured from a real PostgreSQL 18 with four DBA-style prefixes in four time zones, and as
csvlog and jsonlog (tests/golden/serverlog/capture_prefixes.py); the prefixes that cannot be
read and why; the hour repeated when summer time ends; a log the server switched files in."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pgbenchlab.hosts import LOCAL_HOST
from pgbenchlab.records.telemetry import LogEvent
from pgbenchlab.telemetry.logformat import (
    MANAGED,
    LineFormat,
    UnreadablePrefix,
    compile_prefix,
    file_kind,
    line_format,
    structured_format,
)
from pgbenchlab.telemetry.serverlog import LogFollower, ServerLog, parse_events, records

GOLDEN = Path(__file__).parent / "golden" / "serverlog"
CASES: dict[str, dict[str, Any]] = json.loads((GOLDEN / "prefixes.json").read_text())


def golden(case: str) -> tuple[str, LineFormat, dict[str, Any]]:
    found = CASES[case]
    text = (GOLDEN / f"prefix-{case}.log").read_text()
    return text, line_format(found["prefix"], found["zone"]), found


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_line_of_a_real_log_is_a_record_or_continues_one(case: str) -> None:
    text, fmt, _ = golden(case)
    for line in text.splitlines():
        assert fmt.parse(line) or line.startswith("\t"), line


@pytest.mark.parametrize("case", sorted(CASES))
def test_timestamps_in_the_servers_zone_are_this_machines_clock(case: str) -> None:
    """The capture noted its own clock before and after the scenario: every record, printed
    in Paris, New York, Kolkata or Lord Howe time (or epoch seconds), falls in between."""
    text, fmt, found = golden(case)
    stamps = [r.at for r in records(text, fmt)]
    assert len(stamps) >= 6
    assert float(found["started"]) - 1 < min(stamps)  # %t: whole seconds
    assert max(stamps) <= float(found["ended"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_events_whatever_the_prefix(case: str) -> None:
    text, fmt, found = golden(case)
    events = parse_events(text, float(found["started"]), fmt)
    assert_scenario(events)
    starts = [e for e in events if e.kind == "checkpoint_start"]
    (end,) = [e for e in events if e.kind == "checkpoint_end"]
    assert end.detail["buffers"] > 0 and end.detail["slru_buffers"] >= 1  # type: ignore[operator]
    assert 0 <= end.t - starts[0].t < 1
    (wait,) = [e for e in events if e.kind == "lock_wait"]
    assert "still waiting for ShareLock" in wait.summary
    assert all(-1 < e.t < 6 for e in events)  # %t: whole seconds


def assert_scenario(events: list[LogEvent]) -> None:
    """The capture's scenario: one checkpoint, t's autovacuum and autoanalyze (with their
    continuation lines), an error with its statement, a FATAL, a lock wait with its detail."""
    starts = [e for e in events if e.kind == "checkpoint_start"]
    assert [e.detail["flags"] for e in starts] == [["immediate", "force", "wait"]]
    assert len([e for e in events if e.kind == "checkpoint_end"]) == 1
    ours = [e for e in events if e.detail.get("table") == "postgres.public.t"]
    assert [e.kind for e in ours] == ["autovacuum", "autoanalyze"]
    assert "tuples: 23" in str(ours[0].detail["text"])
    errors = [e for e in events if e.kind == "error"]
    assert [e.summary for e in errors] == [
        "ERROR: division by zero",
        'FATAL: database "no_such_database" does not exist',
    ]
    assert errors[0].detail["statement"] == "SELECT 1 / 0"
    (wait,) = [e for e in events if e.kind == "lock_wait"]
    assert "Process holding the lock" in str(wait.detail["detail"])


@pytest.mark.parametrize("destination", ["csvlog", "jsonlog"])
def test_csvlog_and_jsonlog_give_the_events_of_the_text_log(destination: str) -> None:
    """The same scenario logged in Paris time as CSV rows (quoted newlines) and JSON lines."""
    events = destination_events(destination)
    assert_scenario(events)
    assert all(0 < e.t < 6 for e in events)  # started, ended: this machine's clock


def test_csvlog_and_jsonlog_agree() -> None:
    assert destination_events("csvlog") == destination_events("jsonlog")


def destination_events(destination: str) -> list[LogEvent]:
    found = json.loads((GOLDEN / "destinations.json").read_text())
    suffix = ".csv" if destination == "csvlog" else ".json"
    text = (GOLDEN / f"destination-{destination}{suffix}").read_text()
    fmt = structured_format(destination, found["zone"])
    assert file_kind(f"postgresql-2026-11-25_115727{suffix}") == destination
    assert max(r.at for r in records(text, fmt)) < found["ended"]
    return parse_events(text, found["started"], fmt)


def test_verbose_messages_lose_their_sqlstate_and_keep_their_location() -> None:
    text, fmt, found = golden("padded")
    assert found["verbosity"] == "verbose"
    error = next(r for r in records(text, fmt) if r.severity == "ERROR")
    assert error.message == "division by zero"
    assert error.attached["location"].startswith("int4div, ")


def test_the_managed_prefix_compiles_to_what_the_managed_path_reads() -> None:
    managed = (GOLDEN / "pg18.log").read_text()
    compiled = line_format("%m [%p] ", "UTC")
    t0 = next(records(managed)).at
    assert parse_events(managed, t0, compiled) == parse_events(managed, t0, MANAGED)


@pytest.mark.parametrize(
    ("prefix", "missing"),
    [
        ("", "no timestamp"),
        ("%u@%d [%p] ", "no timestamp"),
        ("%m [%c] ", "no process id: add %p"),
        ("%q%m [%p] ", "no timestamp before %q"),
        ("%m %q[%p] ", "no process id before %q"),
    ],
)
def test_a_prefix_without_time_or_process_says_what_to_add(prefix: str, missing: str) -> None:
    with pytest.raises(UnreadablePrefix, match=missing):
        compile_prefix(prefix)


def test_literal_percent_padding_and_unknown_escapes() -> None:
    fmt = line_format("%%%z[%-8p]%10t ", "UTC")  # %z: no escape, prints nothing
    parsed = fmt.parse("%[42      ]2026-11-25 12:00:00 UTC LOG:  checkpoint starting: time")
    assert parsed is not None and parsed[0]["pid"] == "42"
    assert parsed[1:] == ("LOG", "checkpoint starting: time")


def test_a_line_that_does_not_match_costs_no_more_than_its_length() -> None:
    """Four names of any length between spaces: a line whose severity PostgreSQL would not
    print (a translated one) is not tried at every split of its 1 800 spaces."""
    fmt = line_format("%m %p %a %u %d %h ", "UTC")
    line = "2026-11-25 12:00:00.000 UTC 1 " + "x y@z " * 1800 + "ОШИБКА:  LOG:  no"
    started = time.perf_counter()
    assert fmt.parse(line) is None
    assert time.perf_counter() - started < 0.5  # whole-line matching: minutes


def test_an_unknown_zone_is_unread_unless_the_prefix_has_epoch_seconds() -> None:
    with pytest.raises(UnreadablePrefix, match="log_timezone"):
        line_format("%m [%p] ", "Mars/Olympus_Mons")
    assert line_format("%n [%p] ", "Mars/Olympus_Mons").zone == "Mars/Olympus_Mons"


def test_the_hour_repeated_when_summer_time_ends_is_told_by_its_abbreviation() -> None:
    """Paris, 2026-10-25: 02:30 happens twice, first in CEST (00:30 UTC), then in CET (01:30
    UTC). These lines are constructed: no captured server crossed a change of time."""
    fmt = line_format("%m [%p] ", "Europe/Paris")
    lines = [
        "2026-10-25 02:30:00.000 CEST [7] LOG:  checkpoint starting: time",
        "2026-10-25 02:30:00.000 CET [7] LOG:  checkpoint starting: time",
        "2026-10-25 02:30:00.000 +01 [7] LOG:  checkpoint starting: time",
    ]
    first, second, numeric = (r.at for r in records("\n".join(lines), fmt))
    assert second - first == 3600 and numeric == second
    assert first == 1792888200.0  # 2026-10-25 00:30:00 UTC


def test_a_log_switched_to_a_new_file_is_read_on(tmp_path: Path) -> None:
    """The rest of the followed file, then the newer files of the same kind (names sorting
    after it, starting as log_filename does); older, other-kind and foreign files are not."""
    line = "2026-11-25 10:00:0{} UTC [1] LOG:  checkpoint starting: {}\n"
    files = {
        "postgresql-2026-11-25_090000.log": line.format(0, "old"),
        "postgresql-2026-11-25_095959.log": line.format(1, "before"),
        "postgresql-2026-11-25_100003.log": line.format(3, "after"),
        "postgresql-2026-11-25_100004.csv": "csv,line\n",
        "postgresql-2026-11-25_100005.log": line.format(5, "later") + "partial",
        "startup.log": line.format(6, "foreign"),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    followed = tmp_path / "postgresql-2026-11-25_095959.log"
    follower = LogFollower(LOCAL_HOST, ServerLog(followed, MANAGED, "postgresql-"))
    with (tmp_path / "postgresql-2026-11-25_095959.log").open("a") as f:
        f.write(line.format(2, "during"))
    events, problems = follower.events(1795600800.0)
    assert [e.detail["flags"] for e in events] == [["during"], ["after"], ["later"]]
    assert [e.t for e in events] == [2.0, 3.0, 5.0] and problems == []
    alone = LogFollower(LOCAL_HOST, ServerLog(tmp_path / "postgresql-2026-11-25_095959.log"))
    assert alone.events(0.0) == ((), [])
    (tmp_path / "postgresql-2026-11-25_095959.log").unlink()
    assert follower.events(0.0)[1][0].startswith("server log: ")
