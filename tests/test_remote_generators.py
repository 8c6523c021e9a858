"""Load generators on other hosts (network namespaces with their own sshd), end to end: a -R
rate split across two of them, and a load generator saturated by its own script named in the
run's diagnosis."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from netns_hosts import TestHosts
from pgbenchlab import plan
from pgbenchlab.analysis.diagnosis import Bottleneck
from pgbenchlab.analysis.stats import STANDARD_PERCENTILES, percentile_of_sorted
from pgbenchlab.campaign import Outcome, run_campaign
from pgbenchlab.cli import main
from pgbenchlab.findings import WarningCode
from pgbenchlab.pgbench.progress import ProgressLine
from pgbenchlab.plan import RunSpec
from pgbenchlab.store import Store
from pgbenchlab.telemetry.crosscheck import check_commits
from support import QuietReporter
from test_remote_campaign import db_host, hosts_toml, lines_in_window, one_server_plan

pytestmark = pytest.mark.server
__all__ = ["db_host"]  # the fixture, shared with test_remote_campaign (its hosts, one set here)


def generators_plan(hosts: TestHosts, generators: list[str], pgbench: str, rest: str) -> str:
    """db1's managed server driven from the load generators: the plan's [pgbench] table gets
    pgbench's lines too; rest follows the server (its [matrix])."""
    text = one_server_plan(hosts, "db1").replace(
        hosts_toml(hosts, "db1"), hosts_toml(hosts, "db1", *generators)
    )
    listed = ", ".join(f'"{g}"' for g in generators)
    text = text.replace("[[server]]", f"[pgbench]\nhosts = [{listed}]\n{pgbench}\n[[server]]")
    return text + rest


def run(hosts: TestHosts, text: str, tmp_path: Path, reporter: QuietReporter) -> Outcome:
    the_plan = plan.parse(text, str(tmp_path / "p.toml"), base=tmp_path)
    outcome = run_campaign(the_plan, tmp_path / "results", reporter)
    assert (outcome.ran, outcome.failed) == (1, 0), [r.error for r in outcome.results]
    assert hosts.leftovers() == []
    return outcome


class GeneratorArgv(QuietReporter):
    """Each generator's pgbench argv as its host runs it, read as the run reports progress
    (every generator measuring then; the hosts share this machine's process table)."""

    def __init__(self, hosts: TestHosts, generators: int) -> None:
        super().__init__()
        self.hosts = hosts
        self.generators = generators
        self.argv: dict[str, list[str]] = {}  # by the generator named in its log prefix

    def progress(self, spec: RunSpec, line: ProgressLine) -> None:
        super().progress(spec, line)
        if len(self.argv) == self.generators:
            return
        for process in self.hosts.account_processes():
            cmdline = Path(f"/proc/{process.split()[0]}/cmdline").read_bytes()
            argv = [a.decode() for a in cmdline.split(b"\0")[:-1]]
            if argv and argv[0].endswith("/pgbench"):
                prefix = next(a for a in argv if a.startswith("--log-prefix="))
                self.argv[prefix.rsplit(".", 1)[1]] = argv


RATE, DURATION_S = 500, 3  # 333.333 and 166.667 TPS


def test_a_rate_split_across_two_load_generators(db_host: TestHosts, tmp_path: Path) -> None:
    text = generators_plan(
        db_host,
        ["lg1", "lg2"],
        "keep_logs = true",
        f'[matrix]\nscale = [1]\nworkload = ["select-only"]\nclients = [3]\nrate = [{RATE}]\n',
    ).replace('duration = "2s"', f'duration = "{DURATION_S}s"')
    reporter = GeneratorArgv(db_host, 2)
    outcome = run(db_host, text, tmp_path, reporter)
    result = outcome.results[0]
    lg1, lg2 = result.generators
    # Clients split as ever, threads = "auto" one per CPU on each generator up to its
    # clients; the rate in proportion to clients, summing to the plan's, each share in its
    # own generator's argv with its own seed.
    assert [(g.host, g.clients, g.threads) for g in result.generators] == [
        ("lg1", 2, 2),
        ("lg2", 1, 1),
    ]
    assert (lg1.rate, lg2.rate) == (RATE * 2 / 3, RATE / 3)
    assert set(reporter.argv) == {"lg1", "lg2"}, reporter.argv
    for share in result.generators:
        argv = reporter.argv[share.host]
        given = dict(itertools.pairwise(argv))
        assert (given["-c"], given["-j"]) == (str(share.clients), str(share.threads))
        assert float(given["-R"]) == share.rate
        assert f"--random-seed={share.seed}" in argv
    rates = [float(a[a.index("-R") + 1]) for a in reporter.argv.values()]
    assert sum(rates) == pytest.approx(RATE, rel=1e-15)
    assert lg1.seed != lg2.seed
    # TPS: pgbench -R starts transactions as a Poisson process (each thread its own, at its
    # share of the rate: together one of the whole rate), so a run of T seconds counts
    # N ~ Poisson(RATE × T), σ = √(RATE × T): 6σ leave a chance failure at 2 in 10⁹. A
    # stalled machine can only make it fewer: what the schedule owed at the end, at most
    # the largest schedule lag's worth of transactions, is not counted.
    assert result.tps is not None and result.lag_max_ms is not None
    poisson = 6 * math.sqrt(RATE * DURATION_S) / DURATION_S
    behind = RATE * result.lag_max_ms / 1000 / DURATION_S
    assert RATE - poisson - behind <= result.tps <= RATE + poisson, (result.tps, behind)
    # The server counted the commits of both generators' transactions.
    assert not any(w.code == WarningCode.COMMITS_DISAGREE for w in result.warnings)
    commits = check_commits(
        result.transactions, result.telemetry, clients=3, connect_each=False, builtin_only=True
    )
    assert commits is not None and commits.agrees, commits
    # Schedule lag and latency merged from the reductions: the exact percentiles of the
    # union of both whole logs (kept), within the common window on this machine's clock.
    artifacts = tmp_path / "results" / "artifacts"
    kept = lines_in_window(result, artifacts)
    assert kept["lg1"] and kept["lg2"]
    latency = [int(fields[2]) for lines in kept.values() for fields in lines]
    union = sorted(int(fields[6]) for lines in kept.values() for fields in lines)
    exact = {p: percentile_of_sorted(union, p) / 1000 for p in STANDARD_PERCENTILES}
    assert result.latency is not None and result.latency.lag_percentiles_ms == exact
    assert result.latency.percentiles_ms == {
        p: percentile_of_sorted(sorted(latency), p) / 1000 for p in STANDARD_PERCENTILES
    }
    store = Store(tmp_path / "results" / "results.db")
    try:
        (stored,) = store.run_records(outcome.campaign_id)
    finally:
        store.close()
    assert (stored["lag_p50_ms"], stored["lag_p99_ms"], stored["lag_p999_ms"]) == (
        exact["50"],
        exact["99"],
        exact["99.9"],
    )
    assert stored["lag_avg_ms"] is not None and stored["lag_avg_ms"] >= 0


# Client-side work only: each transaction computes a chain of 2,000 expressions in pgbench and
# sends nothing (a statement's round trip would leave pgbench idle while a loaded server
# answers), so its thread is on a CPU or waiting for one all the time whatever else runs here.
SPIN = "\\set x0 1\n" + "".join(
    f"\\set x{i} (:x{i - 1} * 7 + {i}) % 1000003\n" for i in range(1, 2000)
)


ALONE = "on load generator lg1, pgbench's 1 thread(s) were on a CPU or waiting for one"
EACH = "load generator {} wanted"  # of its usable CPUs: on one or waiting for one


@pytest.mark.parametrize(
    ("generators", "named"),
    [
        # the run's telemetry watched lg1's pgbench there (wait4 alone gives no run-queue wait)
        (["lg1"], [ALONE]),
        # each generator's pgbench watched on its host while the shares ran
        (["lg1", "lg2"], [EACH.format("lg1"), EACH.format("lg2")]),
    ],
    ids=["alone", "each-of-two"],
)
@pytest.mark.alone
def test_a_saturated_load_generator_is_named_in_the_diagnosis(
    db_host: TestHosts,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    generators: list[str],
    named: list[str],
) -> None:
    (tmp_path / "spin.sql").write_text(SPIN)
    text = generators_plan(
        db_host,
        generators,
        "",
        "[matrix]\nscale = [1]\n"
        f'workload = [{{ script = "spin.sql" }}]\nclients = [{len(generators)}]\n',
    )
    # 3 s: the run's window also holds pgbench's connection and the SSH news of its end (some
    # 0.15 s); no per-transaction log (its reduction on lg1 would lengthen the window).
    text = text.replace('warmup = "0s"', 'warmup = "0s"\nlatency_log = "off"')
    text = text.replace('duration = "2s"', 'duration = "3s"')
    outcome = run(db_host, text, tmp_path, QuietReporter())
    result = outcome.results[0]
    assert result.diagnosis is not None, result.telemetry
    assert result.diagnosis.verdict == Bottleneck.CLIENT_BOUND, result.diagnosis
    evidence = result.diagnosis.evidence
    assert [e[: len(n)] for e, n in zip(evidence, named, strict=False)] == named, evidence
    store = Store(tmp_path / "results" / "results.db")
    try:
        run_id = store.run_records(outcome.campaign_id)[0].id
        stored = store.diagnoses_by_run([run_id])[run_id]
    finally:
        store.close()
    assert (stored.verdict, stored.evidence) == ("client_bound", evidence)
    assert main(["show", "--results", str(tmp_path / "results"), str(run_id)]) == 0
    shown = capsys.readouterr().out
    assert "what limited it: client bound" in shown
    assert all(f"- {n}" in shown for n in named), shown
