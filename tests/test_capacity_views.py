"""The capacity views without a server: the comparison of two servers' capacities and the knee
chart drawn from synthetic probes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import vl_convert

from pgbenchlab.analysis.capacity import VERDICT_RULES, CapacityAnswer
from pgbenchlab.analysis.slo import parse_slo
from pgbenchlab.errors import UserError
from pgbenchlab.report.render.knee import knee_chart, knee_rows
from pgbenchlab.report.views.capacity import CapacityView, KneePoint, compare_capacities
from pgbenchlab.report.views.capacity_tables import answer_text, comparison_table


def point(run: int, offered: float | None, passed: bool, p99: float = 5.0) -> KneePoint:
    return KneePoint(
        run, "grow" if offered else "start", offered, 4, (offered or 100) * 0.98,
        1.0, p99, p99 * 1.5, 0.0, 0.0, passed, "pass" if passed else "fail (p99)",
    )  # fmt: skip


def view(server: str, answer: CapacityAnswer) -> CapacityView:
    points = (point(1, None, True), point(2, 50, True), point(3, 100, False, 30.0))
    slo = parse_slo("p99 <= 10ms, late <= 1%")
    return CapacityView(server, "s=1 ceiling prepared", "cell", slo, 10.0, answer, points)


def test_the_ratio_of_two_capacities_and_its_bracket() -> None:
    base = view("pg15", CapacityAnswer(80.0, 80.0, 84.0, "confirmed"))
    cand = view("pg18", CapacityAnswer(100.0, 100.0, 105.0, "confirmed"))
    (found,) = compare_capacities([base, cand], "pg15", "pg18")
    assert found.ratio == pytest.approx(1.25)
    assert found.ratio_low == pytest.approx(100 / 84)
    assert found.ratio_high == pytest.approx(105 / 80)
    table = comparison_table([found], "pg15", "pg18")
    assert table.rows[0][-2:] == ("1.250", "1.190 – 1.312")
    with pytest.raises(UserError, match="no capacity search of server pg17"):
        compare_capacities([base, cand], "pg15", "pg17")


def test_the_knee_chart_draws_the_probes_the_slo_and_the_bracket() -> None:
    searched = view("pg18", CapacityAnswer(50.0, 50.0, 100.0, "confirmed"))
    rows = knee_rows(searched)
    assert {r["rule"] for r in rows if r.get("kind") == "slo"} == {10.0, 0.01}
    assert [r for r in rows if r.get("kind") == "bracket"] == [
        {"kind": "bracket", "low": 50.0, "high": 100.0}
    ]
    assert not any(r.get("offered") is None and "measure" in r and "rule" not in r for r in rows)
    svg = vl_convert.vega_to_svg(vl_convert.vegalite_to_vega(knee_chart(searched)))
    assert "Capacity of pg18: capacity 50 tx/s" in svg and "SLO p99" in svg


def test_the_answer_says_what_its_runs_achieved_and_skipped() -> None:
    confirmations = (
        KneePoint(4, "confirm", 100.0, 4, 97.5, 1.0, 5.0, 7.0, 0.0, 0.0161, True, "pass"),
        KneePoint(5, "confirm", 100.0, 4, 99.0, 1.0, 5.0, 7.0, 0.0, 0.0, True, "pass"),
    )
    searched = view("pg18", CapacityAnswer(100.0, 100.0, 105.0, "confirmed"))
    searched = replace(searched, points=searched.points + confirmations)
    assert searched.achieved == 97.5 and searched.skipped_share == 0.0161
    assert "achieved at least 97.5 tx/s, skipped at most 1.61%" in answer_text(searched)
    shown = searched.as_dict()["answer"]
    assert shown["achieved"] == 97.5 and shown["skipped_share"] == 0.0161
    assert view("pg18", CapacityAnswer(None, None, 50.0, "none")).achieved is None


def test_an_answer_judged_by_older_rules_says_so() -> None:
    for rules in (1, VERDICT_RULES - 1):
        old = replace(
            view("pg15", CapacityAnswer(80.0, 80.0, 84.0, "confirmed")), verdict_rules=rules
        )
        assert "judged by older rules (before skipped and failed transactions counted" in (
            answer_text(old)
        )
    assert "older rules" not in answer_text(view("pg15", CapacityAnswer(80.0, 80.0, 84.0, "x")))
