"""Campaign: the plan's run specs executed end to end, each result stored as it finishes.

Owns the orchestration (`runner`), the server pool (`servers`), which pgbench runs
(`client`), the results directory's layout and archived artifacts (`layout`), resuming
(`resume`), `clean` (`clean`), stop signals (`signals`), running pgbench (`measure`) through
the executor seam (`executor`), what it tells a display (`events`), the pure assembly of a
run's result (`assemble`), with repeats = "auto" which cells the next round runs (`rounds`),
the restarts between rounds and the noise floors recorded when the campaign ends (`floors`),
the capacity search executed probe by probe (`capacity`), and where a run was made and
the results of a plan's shards joined (`fleet`), and what is refused before anything starts
(`preflight`: one ordered list of checks, every problem reported at once; `run --dry-run`
shows their outcomes). It may import everything below
it: plan, installs, hosts, server, dataset, pgbench, telemetry, analysis, results, findings,
store; nothing from report or cli.
"""

from pgbenchlab.campaign import preflight
from pgbenchlab.campaign.clean import remove_clusters
from pgbenchlab.campaign.events import NullReporter, Reporter
from pgbenchlab.campaign.layout import RESULTS_DB
from pgbenchlab.campaign.preflight import check_before_start
from pgbenchlab.campaign.runner import run_campaign
from pgbenchlab.campaign.session import Outcome

__all__ = [
    "RESULTS_DB",
    "NullReporter",
    "Outcome",
    "Reporter",
    "check_before_start",
    "preflight",
    "remove_clusters",
    "run_campaign",
]
