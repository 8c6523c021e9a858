"""The Universal Scalability Law on synthetic curves with known contention σ and coherency κ
(recovered within their bootstrap intervals), the refusals for data that cannot support a fit,
and where a curve departs from linear with the wait event that grows there."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest_report import SyntheticPlan, write_synthetic
from pgbenchlab.analysis.scalability import (
    Departure,
    departure,
    departure_text,
    fit_usl,
    growing_wait,
    peak_clients,
    usl,
)
from pgbenchlab.report import write_report
from pgbenchlab.report.render import html, images, markdown
from pgbenchlab.report.views import compare_series
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.model import ReportView
from pgbenchlab.report.views.scalability import scalability_table
from pgbenchlab.store import Store
from report_browser import Browser

CLIENTS = (1, 2, 4, 8, 16, 32, 64)


def curve(
    sigma: float, kappa: float, *, noise: float, repeats: int, seed: int
) -> list[tuple[int, float]]:
    """Runs of a USL curve (λ = 1000) with multiplicative run-to-run noise."""
    rng = np.random.default_rng(seed)
    return [
        (n, float(usl(np.array([n]), 1000.0, sigma, kappa)[0] * np.exp(rng.normal(0, noise))))
        for n in CLIENTS
        for _ in range(repeats)
    ]


@pytest.mark.parametrize(("sigma", "kappa"), [(0.05, 0.001), (0.02, 0.0005), (0.1, 0.001)])
def test_known_sigma_and_kappa_are_recovered_within_their_intervals(
    sigma: float, kappa: float
) -> None:
    true_peak = peak_clients(sigma, kappa)
    assert true_peak is not None
    covered = {"σ": 0, "κ": 0, "N*": 0}
    for seed in range(12):
        fit = fit_usl(curve(sigma, kappa, noise=0.03, repeats=4, seed=seed), seed=seed)
        assert fit.refused is None and fit.sigma and fit.kappa and fit.peak
        covered["σ"] += fit.sigma.low <= sigma <= fit.sigma.high
        covered["κ"] += fit.kappa.low <= kappa <= fit.kappa.high
        covered["N*"] += fit.peak.low <= true_peak <= fit.peak.high
        assert fit.sigma.value == pytest.approx(sigma, rel=0.3, abs=0.01)
        assert fit.peak.value == pytest.approx(true_peak, rel=0.15)
    # From 4 repeats per count the bootstrap covers 85-93 % in simulation (the module says).
    assert min(covered.values()) >= 8, covered


def test_the_curve_passes_through_the_points() -> None:
    fit = fit_usl(curve(0.05, 0.001, noise=0.01, repeats=3, seed=1))
    for n in CLIENTS:
        expected = usl(np.array([n]), 1000.0, 0.05, 0.001)[0]
        assert fit.tps(n) == pytest.approx(expected, rel=0.05)


def test_linear_data_has_no_curvature_to_fit() -> None:
    fit = fit_usl(curve(0.0, 0.0, noise=0.02, repeats=3, seed=3))
    assert fit.refused is not None and fit.refused.startswith("no curvature")
    assert fit.sigma is None and fit.tps(4) is None


def test_contention_without_coherency_gives_no_peak() -> None:
    fit = fit_usl(curve(0.1, 0.0, noise=0.02, repeats=3, seed=4))
    assert fit.refused is None and fit.sigma is not None
    assert fit.sigma.low <= 0.1 <= fit.sigma.high
    assert fit.peak is None and fit.note


@pytest.mark.parametrize(
    ("points", "reason"),
    [
        ([(n, 100.0 * n) for n in (1, 2, 4) for _ in range(3)], "has 3"),
        ([(n, 100.0 * n / (1 + 0.1 * (n - 1))) for n in CLIENTS], "one run per client count"),
    ],
)
def test_too_few_points_or_no_repeats_are_refused(
    points: list[tuple[int, float]], reason: str
) -> None:
    fit = fit_usl(points)
    assert fit.refused is not None and reason in fit.refused
    assert fit.sigma is None and fit.kappa is None and fit.peak is None


def test_departure_is_the_first_count_below_80_percent_of_linear() -> None:
    means = {1: 1000.0, 2: 1980.0, 4: 3800.0, 8: 5000.0, 16: 5200.0}
    found = departure(means)
    assert found == Departure(8, 5000.0 / 8000.0, 4, 1)
    assert departure({1: 1000.0, 2: 2000.0, 4: 3900.0}) is None


def test_the_wait_event_that_grows_is_named_with_its_shares() -> None:
    waits = {
        4: {"CPU:CPU": 60, "Client:ClientRead": 37, "LWLock:BufferContent": 3},
        16: {"CPU:CPU": 40, "Client:ClientRead": 22, "LWLock:BufferContent": 38},
    }
    growth = growing_wait(waits, 4, 16)
    assert growth is not None and growth.event == "LWLock:BufferContent"
    text = departure_text(Departure(8, 0.62, 4, 1), growth)
    assert text == (
        "past 4 clients the curve departs from linear: at 8 clients TPS is 62 % of linear "
        "scaling from 1 client; LWLock:BufferContent rises from 3 % of backend samples at 4 "
        "clients to 38 % at 16"
    )
    steady = {
        4: {"CPU:CPU": 50, "Client:ClientRead": 50},
        16: {"CPU:CPU": 52, "Client:ClientRead": 48},
    }
    assert growing_wait(steady, 4, 16) is None


# -- in the report: the table, the departure sentence, the curve over the points ---------------


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> ReportView:
    plan = SyntheticPlan(clients=(1, 2, 4, 8, 16, 32), repeats=3, workloads=("select-only",))
    db = write_synthetic(tmp_path_factory.mktemp("ladder"), plan)
    with Store(db) as store:
        return load_view(store, 1)


def test_every_series_of_the_report_is_fitted(ladder: ReportView) -> None:
    # The synthetic servers saturate as N/(N + 3) (σ = 0.25), with 6 % noise per run.
    assert [s.label for s in ladder.scalability] == ["pg15", "pg18"]
    for found in ladder.scalability:
        fit = found.fit
        assert fit.refused is None and fit.sigma is not None and fit.runs == 18
        assert fit.sigma.low > 0.1
        assert (
            found.departure is not None and " the curve departs from linear: at " in found.departure
        )
        assert found.curve[0][0] == 1 and found.curve[-1][0] == 32


def test_the_table_and_the_chart_show_the_fit(ladder: ReportView, tmp_path: Path) -> None:
    table = scalability_table(ladder)
    assert table is not None and [r[0] for r in table.rows] == ["pg15", "pg18"]
    assert "1, 2, 4, 8, 16, 32 (18)" in table.rows[0][1] and "…" in table.rows[0][2]
    assert "Scalability: the Universal Scalability Law" in markdown.render(ladder)
    tps = next(c for c in html.main_charts(ladder) if c["id"] == "chart-tps")
    spec = next(iter(tps["specs"].values()))
    assert spec["data"] == {"name": "tps_points"}
    assert any("usl" in str(layer.get("encoding", {})) for layer in spec["spec"]["layer"])
    rows = html.payload(ladder)["usl"]
    assert len(rows) == 2 * 40 and all(r["usl"] > 0 for r in rows)
    written = images.write_chart(
        dict(images.chart_specs(ladder, per_run=False))["tps"], tmp_path / "tps"
    )
    assert written[0].read_text().count("<path") > 4


def test_too_few_client_counts_say_so_in_the_table(tmp_path: Path) -> None:
    db = write_synthetic(tmp_path, SyntheticPlan(clients=(1, 2, 4), repeats=2))
    with Store(db) as store:
        view = load_view(store, 1)
    table = scalability_table(view)
    assert table is not None
    assert all("has 3" in row[-1] and row[2] == "-" for row in table.rows)
    assert not html.payload(view)["usl"]


def test_compare_series_clients_prints_the_model_of_every_series(tmp_path: Path) -> None:
    plan = SyntheticPlan(clients=(1, 2, 4, 8, 16), repeats=3, workloads=("tpcb-like",))
    with Store(write_synthetic(tmp_path, plan)) as store:
        found, fits = compare_series.with_scalability(store, None)
    text = compare_series.as_text(found, fits)
    assert "Scalability: the Universal Scalability Law per series" in text
    assert "1, 2, 4, 8, 16 (15)" in text and "σ contention" in text
    data = json.loads(compare_series.as_json(found, fits))
    assert [s["series"] for s in data["scalability"]] == ["pg15", "pg18"]
    assert data["scalability"][0]["sigma"]["low"] <= data["scalability"][0]["sigma"]["value"]


@pytest.mark.browser
def test_the_fitted_curves_draw_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    plan = SyntheticPlan(clients=(1, 2, 4, 8, 16), repeats=2, duration_s=5)
    out = write_report(write_synthetic(tmp_path, plan), output=tmp_path / "r.html")
    assert isinstance(out, Path)
    dotted = "#chart-tps g.mark-line path[stroke-dasharray='2,3']"
    with browser.page() as page:
        first = page.open(out.as_uri())
        fitted = page.evaluate(f'document.querySelectorAll("{dotted}").length')
        page.evaluate(
            "(() => { const s = document.getElementById('series-axis'); s.value = 'workload';"
            " s.dispatchEvent(new Event('change'));"
            " return new Promise(r => setTimeout(r, 1500)); })()"
        )
        refitted = page.evaluate(f'document.querySelectorAll("{dotted}").length')
        problems = page.problems()
    assert first.console == [] and problems == []
    # 2 servers × 2 workloads: four series, each with its curve, whatever the lines are per.
    assert fitted == refitted == 4


def test_rate_limited_series_are_not_fitted(tmp_path: Path) -> None:
    plan = SyntheticPlan(clients=(1, 2, 4, 8), rates=(None, 2000.0), repeats=2)
    with Store(write_synthetic(tmp_path, plan)) as store:
        view = load_view(store, 1)
    limited = [s for s in view.scalability if "2000" in s.label]
    assert limited and all(s.fit.refused and "rate-limited" in s.fit.refused for s in limited)
    assert all(not s.curve and s.departure is None for s in limited)
    assert any(s.fit.refused is None for s in view.scalability)
