"""A run's cell is one record from the plan to the store and back (`records.cell`): its JSON is
the cell's identity, unchanged from the dicts cells were before, and reads back as itself."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pgbenchlab import plan
from pgbenchlab.records.cell import RunCell

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.toml"))
# A cell as the store kept it before it was a record (tests/golden/results/before-redesign.db).
BEFORE = {
    "checkpoint": True, "clients": 1, "connect": False, "duration_s": 3,
    "latency_limit_ms": None, "latency_log": "auto", "protocol": "prepared", "rate": None,
    "scale": 1, "server": "pg18", "server_settings": {}, "threads": 1, "transactions": None,
    "vacuum": "pgbench", "warmup_s": 1, "workload": "select-only",
}  # fmt: skip


def test_a_stored_cell_reads_back_as_the_same_json() -> None:
    cell = RunCell.from_stored(BEFORE)
    assert cell.stored() == BEFORE and cell.server == "pg18" and cell.profile is None
    tuned = replace(cell, max_tries=3, connection="tls", sysctl=(("vm.swappiness", "1"),))
    again = RunCell.from_stored(json.loads(json.dumps(tuned.stored())))
    assert again == tuned and again.stored()["sysctl"] == {"vm.swappiness": "1"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_cell_reads_back_as_itself(path: Path) -> None:
    for spec in plan.load(path).specs:
        stored = json.loads(json.dumps(spec.stored_cell.stored(), sort_keys=True))
        assert RunCell.from_stored(stored) == spec.stored_cell
        assert ("profile" in stored) == spec.profiled
