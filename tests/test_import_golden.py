"""`import outputs` on the golden pgbench outputs of the formats no pgbench here prints: 9.6,
10, 11, 12 and 14 (`tests/golden/pgbench/documented-*`: WRITTEN BY HAND from the reference's
line formats, numbers illustrative) beside the real 13 capture. Laid out as a shell loop leaves
them (``> case.txt 2> case.err``, a rate-limited case in a directory naming its -R rate), each
imported report equals the golden parse, checked by eye against the text; what cannot be
imported is listed with why; logs are used only when they are the run's whole log."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab.campaign import RESULTS_DB
from pgbenchlab.cli import main
from pgbenchlab.importing import AxisMap, import_outputs
from pgbenchlab.importing.outputs import read_outputs
from pgbenchlab.store import ImportedFile, Store
from support import plain

GOLDEN = Path(__file__).parent / "golden"
FORMATS = ("documented-9.6", "documented-10", "documented-11", "documented-12", "13")
FORMATS += ("documented-14",)
TREE_MAP = r"^(?P<server>[^/]+)/(?:R(?P<rate>[0-9.]+)/)?"


def rate_of(argv: list[str]) -> str | None:
    for flag, value in itertools.pairwise(argv):
        if flag in ("-R", "--rate"):
            return value
    return None


def shell_loop_tree(root: Path) -> dict[str, Path]:
    """Each golden case with a report as `case.txt` and `case.err`; the golden JSON by path."""
    expected = {}
    for major in FORMATS:
        for stdout in sorted((GOLDEN / "pgbench" / major).glob("*.stdout")):
            argv = json.loads(stdout.with_suffix(".argv").read_text())
            rate = rate_of(argv)
            where = root / major / (f"R{rate}" if rate else "")
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy(stdout, where / f"{stdout.stem}.txt")
            shutil.copy(stdout.with_suffix(".stderr"), where / f"{stdout.stem}.err")
            expected[(where / f"{stdout.stem}.txt").relative_to(root).as_posix()] = stdout
    return expected


def test_every_golden_report_is_imported_as_parsed(tmp_path: Path) -> None:
    root = tmp_path / "2019-upgrade"
    expected = shell_loop_tree(root)
    (root / "README").write_text("runs of the 2019 upgrade\n")
    outcome = import_outputs(tmp_path / "results", root, AxisMap.parse(TREE_MAP), "old")
    unread = {f.path: f.note for f in outcome.unread}
    assert unread.pop("README").startswith("pgbench report has no 'transaction type' line")
    with Store(tmp_path / "results" / RESULTS_DB) as store:
        campaign = store.campaign_id("old")
        files = {f.path: f for f in store.imported_files(campaign)}
        imported = 0
        for rel, stdout in expected.items():
            golden = json.loads(stdout.with_suffix(".json").read_text())
            if golden["report"] is None:  # no report: listed with its stderr, never guessed
                for path in (rel, rel.removesuffix(".txt") + ".err"):
                    why = unread.pop(path)
                    assert why == "empty" or why.startswith("pgbench report has no"), path
                continue
            run = store.run_record(int(files[rel].run or 0))
            assert run is not None, rel
            assert plain(run.report.stored() if run.report else None) == plain(golden["report"]), (
                rel
            )
            assert plain(run["tps"]) == plain(golden["report"]["tps"]), rel
            assert run["transactions"] == golden["report"]["transactions"], rel
            stderr = golden["stderr"]
            aborted = stderr["aborted"] or stderr["client_aborts"] or run["tps"] is None
            assert run["status"] == ("aborted" if aborted else "ok"), rel
            assert files[rel.removesuffix(".txt") + ".err"].role == "stderr"
            imported += 1
    assert not unread, unread
    assert imported == len(outcome.campaign.runs) >= 12
    servers = {r.spec.server for r in outcome.campaign.runs}
    assert servers == set(FORMATS)  # from the pattern
    limited = [r for r in outcome.campaign.runs if r.report and r.report.lag_avg_ms is not None]
    assert limited and all(r.spec.rate for r in limited)  # the -R rate from the directory


def test_a_rate_limited_run_without_its_rate_is_listed_not_guessed(tmp_path: Path) -> None:
    root = tmp_path / "old"
    root.mkdir()
    case = GOLDEN / "pgbench" / "documented-9.6" / "rate-limit-per-statement.stdout"
    shutil.copy(case, root / "r.txt")
    shutil.copy(GOLDEN / "pgbench" / "documented-9.6" / "t-mode.stdout", root / "t.txt")
    outcome = import_outputs(tmp_path / "results", root, AxisMap.parse(None), "old")
    assert [(f.path, f.note.split(":")[0]) for f in outcome.unread] == [
        ("r.txt", "a rate-limited run (-R) whose rate its report does not print")
    ]
    assert len(outcome.campaign.runs) == 1


def test_logs_are_used_only_when_they_are_the_runs_whole_log(tmp_path: Path) -> None:
    """Logs named after an output (`--log-prefix STEM`) but from another run, and logs named
    after no output: listed with why, the outputs imported without percentiles."""
    root = tmp_path / "loops"
    root.mkdir()
    logs = GOLDEN / "logs" / "15"
    cases = {  # output, its golden report, the logs named after it
        "two-threads": ("select-only", "plain"),  # 2 threads; another run's 240 transactions
        "one-thread": ("t-mode", "tpcb"),  # 1 thread; 2 thread files
    }
    for stem, (report, log) in cases.items():
        shutil.copy(GOLDEN / "pgbench" / "15" / f"{report}.stdout", root / f"{stem}.txt")
        for path in (logs / log).iterdir():
            shutil.copy(path, root / path.name.replace("pgbench_log", stem))
    for path in (logs / "plain").iterdir():
        shutil.copy(path, root / path.name.replace("pgbench_log", "nobody"))
    outcome = import_outputs(tmp_path / "results", root, AxisMap.parse(None), "loops")
    notes = {f.path.split(".")[0]: f.note for f in outcome.unread}
    processed = outcome.campaign.runs[1].transactions
    assert notes == {
        "two-threads": f"240 transactions in the log, {processed} in the report: a sampled log "
        "(--sampling-rate) or another run's",
        "one-thread": "2 thread file(s), the report 1 thread(s): not this run's whole log",
        "nobody": notes["nobody"],
    }
    assert notes["nobody"].startswith("a -l log matched to no output")
    assert [r.latency for r in outcome.campaign.runs] == [None, None]


def test_the_command_lists_what_it_could_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "2019-upgrade"
    root.mkdir()
    shutil.copy(GOLDEN / "pgbench" / "13" / "t-mode.stdout", root / "c2-s2.txt")
    (root / "notes.txt").write_bytes(b"\xff\xfe not text")
    results = ["--results", str(tmp_path / "results")]
    assert main(["import", "outputs", str(root), "--map", r"c(?P<clients>\d+)", *results]) == 0
    out = capsys.readouterr().out
    assert "campaign '2019-upgrade' (id 1, imported): 1 run(s)" in out
    assert "1 file(s) not read:" in out and "notes.txt  it is not UTF-8 text" in out
    assert main(["campaigns", *results]) == 0
    assert "2019-upgrade  imported  1" in capsys.readouterr().out
    assert main(["import", "outputs", str(root), "--map", "(", *results]) == 2
    assert "--map '(' is not a regular expression" in capsys.readouterr().err


def test_progress_lines_in_the_output_itself_give_the_series(tmp_path: Path) -> None:
    """`> out.txt 2>&1`: the -P lines come before the report in the one file."""
    root = tmp_path / "merged"
    root.mkdir()
    case = GOLDEN / "pgbench" / "15" / "tpcb-progress"
    stderr = case.with_suffix(".stderr").read_text()
    (root / "out.txt").write_text(stderr + case.with_suffix(".stdout").read_text())
    outcome = import_outputs(tmp_path / "results", root, AxisMap.parse(None), "merged")
    [run] = outcome.campaign.runs
    printed = [float(t) for t in re.findall(r"^progress: [\d.]+ s, ([\d.]+) tps", stderr, re.M)]
    assert printed and [s.tps for s in run.seconds] == printed
    assert (
        run.status == "ok"
        and run.tps == json.loads(case.with_suffix(".json").read_text())["report"]["tps"]
    )


def test_other_names_are_the_servers_variant_and_repeats_follow_the_paths(
    tmp_path: Path,
) -> None:
    root = tmp_path / "tuning"
    report = GOLDEN / "pgbench" / "15" / "t-mode.stdout"
    for rel in ("sb128MB/r1.txt", "sb128MB/r2.txt", "sb1GB/r1.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(report, root / rel)
    pattern = AxisMap.parse(r"sb(?P<shared_buffers>\w+)/r(?P<repeat>\d)")
    outcome = import_outputs(tmp_path / "results", root, pattern, "tuning")
    runs = outcome.campaign.runs
    assert [(r.spec.server_settings, r.repeat) for r in runs] == [
        ((("shared_buffers", "128MB"),), 1),
        ((("shared_buffers", "128MB"),), 2),
        ((("shared_buffers", "1GB"),), 1),
    ]
    assert [dict(s.variant) for s in outcome.campaign.servers] == [
        {"shared_buffers": "128MB"},
        {"shared_buffers": "1GB"},
    ]


def test_an_import_is_stored_whole_or_not_at_all(tmp_path: Path) -> None:
    root = tmp_path / "one"
    root.mkdir()
    shutil.copy(GOLDEN / "pgbench" / "13" / "t-mode.stdout", root / "t.txt")
    found = read_outputs(root, AxisMap.parse(None), "one").campaign
    ghost = ImportedFile("ghost.txt", "0" * 64, 1, "output", run=len(found.runs))  # no such run
    with Store(tmp_path / RESULTS_DB) as store:
        with pytest.raises(IndexError):  # after the campaign, its server and its run
            store.record_import(replace(found, files=(*found.files, ghost)))
        assert store.find_campaign("one") is None
        assert store.db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert store.db.execute("SELECT count(*) FROM servers").fetchone()[0] == 0
        store.record_import(found)
        assert [f.path for f in store.imported_files(store.campaign_id("one"))] == ["t.txt"]
