"""Several servers driven together ([[server_group]]): the plan's checks, and a real run of two
managed servers on this machine stored once with each server's part and the sum."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pgbenchlab import osuser, plan
from pgbenchlab.analysis.diagnosis import Diagnosis
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_of_sorted
from pgbenchlab.campaign import rounds, run_campaign, together
from pgbenchlab.campaign.layout import cluster_root
from pgbenchlab.campaign.together import server_parts
from pgbenchlab.cli import main
from pgbenchlab.diagnosing import Evidence
from pgbenchlab.errors import PlanError
from pgbenchlab.findings import WarningCode
from pgbenchlab.invocation.command import Completed, Share
from pgbenchlab.pgbench.logs import read_log_bytes
from pgbenchlab.pgbench.progress import ProgressLine, parse_progress_line
from pgbenchlab.pgbench.report import parse_report
from pgbenchlab.plan import GroupPlan, RunSpec
from pgbenchlab.results import RunHost, RunResult, RunStatus
from pgbenchlab.server import SUPERUSER, Endpoint
from pgbenchlab.store import Store
from support import QuietReporter, require_installs
from test_commit_check import telemetry

TWO = """
[campaign]
name = "pair"
[defaults]
duration = "2s"
warmup = "0s"
latency_log = "full"
[[server]]
name = "a"
[[server]]
name = "b"
"""


def parse(text: str, tmp_path: Path) -> plan.Plan:
    return plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)


def test_a_group_is_a_server_of_the_matrix(tmp_path: Path) -> None:
    text = TWO + '[[server_group]]\nname = "ab"\nservers = ["a", "b"]\nclients = [2]\n'
    parsed = parse(text + "[matrix]\nclients = [1]\n", tmp_path)
    assert parsed.groups == (GroupPlan("ab", ("a", "b"), solo=True),)
    assert [(s.server, s.clients) for s in parsed.specs] == [("a", 1), ("b", 1), ("ab", 2)]
    assert parsed.members("ab") == ("a", "b") and parsed.members("a") == ("a",)
    alone = parse(text.replace('"b"]\n', '"b"]\nsolo = false\n'), tmp_path)
    assert [s.server for s in alone.specs] == ["ab"]
    # reports and repeats = "auto" know the group's place among the servers
    assert parsed.axis_orders["server"] == ["a", "b", "ab"] == parsed.server_names
    asked = rounds.questions(parsed.specs, parsed.server_names)
    assert [q.label for q in asked][-1] == "ab s=10 select-only c=2 prepared"


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ('name = "ab"\nservers = ["a", "c"]', 'names server "c", which no'),
        ('name = "ab"\nservers = ["a"]', "a group drives two or more servers"),
        ('name = "ab"\nservers = ["a", "a"]', "names a server twice"),
        ('name = "a"\nservers = ["a", "b"]', '"a" is already the name of a server'),
        ('name = "ab"\nservers = "a"', "must be a list of server names"),
        ('name = "ab"\nservers = ["a", "b"]\nsettings = {}', "settings"),
        ('name = "ab"\nservers = ["a", "b"]\nprofile = "on"', "profile"),
        ('name = "ab"\nservers = ["a", "b"]\nconnection = "tls"', '"tls" is not available'),
    ],
)
def test_mistakes_are_refused(tmp_path: Path, group: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse(f"{TWO}[[server_group]]\n{group}\n", tmp_path)


def test_members_must_run_the_same_cell(tmp_path: Path) -> None:
    text = TWO.replace('name = "b"\n', 'name = "b"\nscale = [5]\n')
    with pytest.raises(PlanError, match="servers a and b differ in scale"):
        parse(text + '[[server_group]]\nname = "ab"\nservers = ["a", "b"]\n', tmp_path)


def test_a_profiled_matrix_is_refused_for_a_group(tmp_path: Path) -> None:
    text = TWO + '[[server_group]]\nname = "ab"\nservers = ["a", "b"]\n'
    with pytest.raises(PlanError, match="group ab: a group's runs are not profiled"):
        parse(text.replace("[defaults]\n", '[defaults]\nprofile = "on"\n'), tmp_path)


GOLDEN = Path(__file__).parent / "golden" / "pgbench" / "18" / "select-only.stdout"


def share(server: str, stdout: str) -> Share:
    done = Completed(("pgbench",), 0, stdout, "", 2.0, 0.5, False)
    return Share("local", 2, 2, None, 1, 2, 0.0, 0.0, done, server)


def test_each_member_is_checked_against_its_own_server(tmp_path: Path) -> None:
    """Member a's server counted its pgbench's commits (and the sampler's); b's counted 5,000
    more: a warning naming b, with b's figures."""
    spec = parse(TWO + "[matrix]\nclients = [2]\n", tmp_path).specs[0]
    report = GOLDEN.read_text()
    done = parse_report(report).transactions
    counted = {"a": telemetry(done + 40), "b": telemetry(done + 5040)}
    parts, warnings = server_parts(spec, [share("a", report), share("b", report)], counted)
    assert [(p.server, p.clients, p.transactions, p.commits_unexplained) for p in parts] == [
        ("a", 2, done, 0),
        ("b", 2, done, 5000),
    ]
    (warning,) = warnings
    assert warning.code == WarningCode.COMMITS_DISAGREE
    assert warning.text.startswith(f"server b: pgbench counted {done:,} transactions")


class LockingB(QuietReporter):
    """Holds an exclusive lock on member b's pgbench_accounts from the measured phase until
    the run's first second has been reported (at most 2.5 s): b's backends wait on it."""

    def __init__(self, results: Path) -> None:
        super().__init__()
        self.results = results
        self.second = threading.Event()
        self.threads: list[threading.Thread] = []

    def phase(self, spec: RunSpec, text: str) -> None:
        super().phase(spec, text)
        if text == "measuring":
            data = cluster_root(self.results, osuser.server_account()) / "pair" / "b" / "data"
            lines = (data / "postmaster.pid").read_text().splitlines()
            endpoint = Endpoint(lines[4], int(lines[3]), SUPERUSER, f"pgbench_s{spec.scale}")
            self.threads.append(threading.Thread(target=self.hold, args=(endpoint,)))
            self.threads[-1].start()

    def progress(self, spec: RunSpec, line: ProgressLine) -> None:
        super().progress(spec, line)
        if (line.elapsed_s or 0) >= 1:
            self.second.set()

    def hold(self, endpoint: Endpoint) -> None:
        with endpoint.connect(autocommit=False) as conn:
            conn.execute("LOCK TABLE pgbench_accounts IN ACCESS EXCLUSIVE MODE")
            self.second.wait(2.5)
            conn.commit()


@pytest.mark.server
@pytest.mark.alone
def test_two_servers_driven_together_are_one_run(
    tmp_path: Path,
    results_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_installs("embedded")
    text = TWO + '[[server_group]]\nname = "ab"\nservers = ["a", "b"]\nsolo = false\n'
    # simple: b's blocked queries do not stall its pgbench's threads (-M prepared prepares
    # synchronously), so both members report the first second and the lock is let go
    matrix = '[matrix]\nscale = [1]\nclients = [2]\nprotocol = ["simple"]\n'
    the_plan = parse(text + matrix, tmp_path)
    diagnosed: list[tuple[RunResult, Diagnosis | None]] = []  # each member's run, as judged
    diagnose_run = together.diagnose_run

    def seen(result: RunResult, evidence: Evidence) -> Diagnosis | None:
        diagnosed.append((result, diagnose_run(result, evidence)))
        return diagnosed[-1][1]

    monkeypatch.setattr(together, "diagnose_run", seen)
    reporter = LockingB(results_dir)
    outcome = run_campaign(the_plan, results_dir, reporter)
    for thread in reporter.threads:
        thread.join()
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    result = outcome.results[0]
    assert result.status == RunStatus.OK and result.spec.server == "ab"
    # Each member got the whole cell: 2 clients each, its own pgbench against its own server.
    a, b = result.servers
    assert (a.server, a.clients, b.server, b.clients) == ("a", 2, "b", 2)
    assert [g.host for g in result.generators] == ["a@local", "b@local"]
    # Stored TPS: the sum of the parts, each its own pgbench's report as it printed it.
    stdout = read_log_bytes(next(results_dir.rglob("stdout.txt.zst"))).decode()
    sections = stdout.split("# load generator ")[1:]
    reports = {s.split("\n", 1)[0]: parse_report(s.split("\n", 1)[1]) for s in sections}
    assert {k: r.tps for k, r in reports.items()} == {"a@local": a.tps, "b@local": b.tps}
    assert a.tps and b.tps and result.tps == pytest.approx(a.tps + b.tps, rel=1e-12)
    assert result.transactions == (a.transactions or 0) + (b.transactions or 0)
    # The progress shown: both members' -P lines summed second by second.
    stderr = read_log_bytes(next(results_dir.rglob("stderr.txt.zst"))).decode()
    summed: dict[int, float] = {}
    for section in stderr.split("# load generator ")[1:]:
        for line in section.splitlines():
            if (parsed := parse_progress_line(line)) and parsed.elapsed_s is not None:
                t = round(parsed.elapsed_s)
                summed[t] = summed.get(t, 0.0) + parsed.tps
    shown = {round(p.elapsed_s or 0): p.tps for k, p in reporter.events if k == "progress"}
    assert shown and shown == {t: round(tps, 1) for t, tps in summed.items() if t in shown}
    # Each server counted its own pgbench's commits (beside the sampler's), nothing else.
    for part in (a, b):
        assert part.server_commits is not None and part.transactions
        assert part.commits_unexplained is not None and abs(part.commits_unexplained) < 100
    assert not any(w.code == WarningCode.COMMITS_DISAGREE for w in result.warnings)
    # What limited each: the diagnosis of its own telemetry and figures. b's backends waited
    # on the lock held over its first second; a's, on nothing of the kind.
    for part in (a, b):
        member, verdict = next((r, d) for r, d in diagnosed if r.tps == part.tps)
        assert member.telemetry is not None and member.tps == part.tps
        assert round(member.telemetry.total("pg_stat_database", "xact_commit") or 0) == (
            part.server_commits
        )
        assert verdict is not None and part.verdict == verdict.verdict.value
        assert part.evidence == verdict.evidence
    assert b.verdict == "lock_bound" and a.verdict != "lock_bound", (a, b)
    # Merged percentiles: the exact ones of the union of both logs within the common window.
    window = next(w for w in result.warnings if w.code == WarningCode.GENERATORS_WINDOW)
    start, end = (round(float(window.evidence[k]) * 1e6) for k in ("start", "end"))
    latencies: dict[str, list[int]] = {"a@local": [], "b@local": []}
    for log in results_dir.rglob("pgbench_log.*"):
        for line in read_log_bytes(log).decode().splitlines():
            fields = line.split()
            done = int(fields[4]) * 1_000_000 + int(fields[5])
            if fields[2].isdigit() and start <= done < end:
                latencies[log.name.split(".")[1]].append(int(fields[2]))
    assert latencies["a@local"] and latencies["b@local"]
    union = sorted(latencies["a@local"] + latencies["b@local"])
    assert result.latency is not None and result.latency.samples == len(union)
    assert result.latency.percentiles_ms == {
        p: percentile_of_sorted(union, p) / 1000 for p in STANDARD_PERCENTILES
    }
    store = Store(results_dir / "results.db")
    try:
        (run,) = store.run_records(outcome.campaign_id)
        assert store.run_server_parts(run.id) == result.servers
        hosts = store.run_hosts(run.id)
        assert hosts == (RunHost("pgbench", "local"), RunHost("server", "local"))
    finally:
        store.close()
    assert main(["show", "--results", str(results_dir), str(run.id)]) == 0
    shown = capsys.readouterr().out
    assert "servers driven together (2; TPS is their sum)" in shown
    assert "2 clients per server · 2 threads per server" in shown
    assert "\n    what limited it: lock bound\n      - benchmark backends waited for locks" in shown
    assert shown.count("    what limited it: ") == 2
    assert main(["report", "--results", str(results_dir), "--format", "markdown"]) == 0
    assert "ab" in capsys.readouterr().out  # the group's cells, as any server's
