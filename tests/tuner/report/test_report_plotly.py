"""The report's interactive figures and page from synthetic trials (no Ray): every figure
drawn has its data points, a figure without data becomes a note, plotly.js is inlined once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import optuna
import plotly.offline
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from tests.browser import needs_chromium, plotly_plots
from tuner.report import COLORS, rung_importances
from tuner.report._html import PLOT_CLASS, html_page
from tuner.report._plotly import figures, points
from tuner.report._render import predicted_rows

DISTS = {
    "lr": FloatDistribution(1e-4, 1e-1, log=True),
    "width": IntDistribution(8, 64),
    "optimizer": CategoricalDistribution(["adam", "sgd"]),
}
RUNGS = [1, 3]
MAX_EPOCHS = 9


def _trials() -> list[optuna.trial.FrozenTrial]:
    """12 trials: 4 trained to epoch 9, 4 pruned at epoch 1, 4 at epoch 3."""
    out = []
    for i in range(12):
        params = {
            "lr": 10 ** (-4 + 3 * i / 11),
            "width": 8 + 4 * i,
            "optimizer": ["adam", "sgd"][i % 2],
        }
        last = (MAX_EPOCHS, 1, 3)[i % 3]
        curve = {e: 0.5 + 0.04 * i + 0.01 * e for e in range(1, last + 1)}
        complete = last == MAX_EPOCHS
        out.append(
            optuna.trial.create_trial(
                state=TrialState.COMPLETE if complete else TrialState.PRUNED,
                value=curve[last] if complete else None,
                params=params,
                distributions=DISTS,
                intermediate_values=curve,
            )
        )
    return out


def _report(trials: list[optuna.trial.FrozenTrial], **over: Any) -> dict[str, Any]:
    """The parts of a collected report the figures read."""
    return {
        "campaign": "synthetic",
        "status": "completed",
        "trials": len(trials),
        "epochs_consumed": 0,
        "metric": "val_acc",
        "mode": "max",
        "rungs": RUNGS,
        "rung_importances": rung_importances(trials, RUNGS, MAX_EPOCHS),
        "spend": {
            "usd": 0.3,
            "node_hours": 0.1,
            "limit_usd": 1.0,
            "series": [[0.0, 0.0], [60.0, 0.1], [120.0, 0.3]],
        },
        "gpu": {
            "t0": {"mean_util_pct": 80.0, "peak_mem_gib": 3.0, "epochs": 9.0},
            "t3": {"mean_util_pct": 40.0, "peak_mem_gib": 2.0, "epochs": 9.0},
        },
        "outcomes": {"completed": 4, "pruned": 8},
        "outcome_reasons": {},
        "cost": {"predicted": {"trial_epochs": 40.0}, "actual": {"trial_epochs": 44}},
        "best": None,
        "top": [],
        **over,
    }


def _figures(r: dict[str, Any], trials: list[optuna.trial.FrozenTrial]) -> dict[str, Any]:
    return figures(r, trials, predicted=predicted_rows(r), colors=COLORS)


def test_every_figure_has_the_data_it_shows() -> None:
    trials = _trials()
    r = _report(trials)
    figs = _figures(r, trials)
    contours = [n for n in figs if n.startswith("contour-")]
    assert [n for n in figs if not n.startswith("contour-")] == [
        *("history", "edf", "intermediate", "importances", "parallel", "slice"),
        *("spend", "predicted", "outcomes", "gpu"),
    ]
    assert all(not isinstance(f, str) and points(f) > 0 for f in figs.values()), figs
    # Optuna's plots: the completed trials, and every trial's curve with the rungs marked.
    assert sorted(figs["history"].data[0].y) == sorted(t.value for t in trials if t.value)
    # ... numbered as in the study (the pruned trials between them keep their numbers).
    assert list(figs["history"].data[0].x) == [i for i, t in enumerate(trials) if t.value]
    curves = [tr for tr in figs["intermediate"].data if tr.mode and "lines" in tr.mode]
    assert len(curves) == len(trials)
    assert [s.x0 for s in figs["intermediate"].layout.shapes] == RUNGS
    # Contours for the pairs of the three most important parameters at the last rung.
    top = list(r["rung_importances"]["rungs"][-1]["values"])[:3]
    assert contours == [
        f"contour-{a}-{b}" for a, b in ((top[0], top[1]), (top[0], top[2]), (top[1], top[2]))
    ]
    # Ours: one bar group per rung with its trial count, spend, GPU and outcome bars.
    bars = figs["importances"].data
    assert [b.name for b in bars] == [
        "epoch 1 (12 trials)",
        "epoch 3 (8 trials)",
        "epoch 9 (4 trials)",
    ]
    assert list(bars[0].x) == top and sum(bars[0].y) == pytest.approx(1.0)
    assert list(figs["spend"].data[0].y) == [0.0, 0.1, 0.3]
    assert list(figs["spend"].data[1].y) == [1.0, 1.0]  # the budget
    assert list(figs["gpu"].data[0].y) == [80.0, 40.0]
    assert list(figs["outcomes"].data[0].y) == [4, 8]
    assert list(figs["outcomes"].data[0].marker.color) == [COLORS["completed"], COLORS["pruned"]]
    assert list(figs["predicted"].data[0].y) == [40.0, 44]


def test_a_figure_without_data_is_a_note() -> None:
    r = _report([], gpu={}, spend={"usd": None, "limit_usd": None, "series": []}, cost=None)
    figs = _figures(r, [])
    assert figs["gpu"] == "no GPU telemetry (CPU trials)"
    assert figs["history"] == figs["slice"] == "no completed trial"
    assert figs["intermediate"] == "no trial reported a per-epoch value"
    assert figs["importances"] == "too few trials at every rung"
    assert figs["spend"] == "no node in the ledger"
    assert figs["predicted"] == "nothing predicted (no profile)"
    assert not any(n.startswith("contour") for n in figs)
    assert not isinstance(figs["outcomes"], str)  # the synthetic counts are still there


def test_points_counts_the_traces_data() -> None:
    import plotly.graph_objects as go

    assert points(go.Figure()) == 0
    assert points(go.Figure(go.Scatter(x=[], y=[]))) == 0
    assert points(go.Figure([go.Scatter(x=[1, 2, 3], y=[1, 2, 3]), go.Bar(x=["a"], y=[1])])) == 4


def test_the_page_inlines_plotly_js_once_and_every_figure_or_its_note() -> None:
    trials = _trials()
    r = _report(trials, gpu={})
    figs = _figures(r, trials)
    page = html_page(r, figs)
    js = plotly.offline.get_plotlyjs()
    assert page.count(js) == 1 and page.index(js) < page.index("</head>")
    assert len(page) < len(js) + 400_000  # the figures' data is small next to plotly.js
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", page)  # nothing fetched
    drawn = re.findall(rf'<div id="plot-([\w-]+)" class="{PLOT_CLASS}"', page)
    assert drawn == [n for n, f in figs.items() if not isinstance(f, str)]
    assert '<p class="note">GPU telemetry: no GPU telemetry (CPU trials).</p>' in page
    for rung in r["rung_importances"]["rungs"]:
        assert f"<li>epoch {rung['epoch']}: {rung['note']}</li>" in page


def test_a_flat_contour_is_a_note() -> None:
    # Every completed trial scored the same: the contour would be one flat colour (and
    # plotly.js warns "Too many contours" in the console), so it is a note.
    trials = [
        optuna.trial.create_trial(
            value=0.9,
            params={"lr": lr, "width": width, "optimizer": "adam"},
            distributions=DISTS,
            intermediate_values={1: 0.8, 9: 0.9},
        )
        for lr, width in ((1e-3, 8), (1e-2, 16), (3e-2, 32))
    ]
    figs = _figures(_report(trials), trials)
    contours = {n: f for n, f in figs.items() if n.startswith("contour-")}
    assert contours and all(isinstance(f, str) for f in contours.values()), contours
    assert not isinstance(figs["history"], str)


def _mo_trials() -> list[optuna.trial.FrozenTrial]:
    """Trials of a two-objective campaign: per-epoch vectors live in user attributes
    (tuner.front); trials 0 and 1 are the front, 2 is dominated, 3 was pruned."""
    return [
        optuna.trial.create_trial(
            state=TrialState.COMPLETE if complete else TrialState.PRUNED,
            values=[acc, size] if complete else None,
            params={"lr": 1e-3 * (i + 1), "width": 8 + 8 * i, "optimizer": "adam"},
            distributions=DISTS,
            user_attrs={"epoch_values.1": [acc - 0.1, size], "epoch_values.2": [acc, size]},
        )
        for i, (acc, size, complete) in enumerate(
            [(0.9, 900.0, True), (0.8, 100.0, True), (0.7, 500.0, True), (0.6, 50.0, False)]
        )
    ]


MO = {"objectives": [{"metric": "val_acc", "mode": "max"}, {"metric": "size", "mode": "min"}]}


def test_a_multi_objective_campaign_gets_optunas_pareto_plot_and_its_primary_curves() -> None:
    trials = _mo_trials()
    figs = _figures(_report(trials, pareto=MO), trials)
    assert next(iter(figs)) == "pareto"
    # Optuna's Pareto plot: the dominated trial 2, then the front (trials 0 and 1), each
    # point coloured by its trial number.
    other, front = figs["pareto"].data
    assert (other.x, other.y, other.marker.color) == ((0.7,), (500.0,), (2,))
    assert (front.x, front.y, front.marker.color) == ((0.9, 0.8), (900.0, 100.0), (0, 1))
    curves = [t for t in figs["intermediate"].data if t.mode and "lines" in t.mode]
    ys = [y for curve in sorted(tuple(c.y) for c in curves) for y in curve]
    assert ys == pytest.approx([0.5, 0.6, 0.6, 0.7, 0.7, 0.8, 0.8, 0.9])
    assert sorted(figs["history"].data[0].y) == [0.7, 0.8, 0.9]


@needs_chromium
def test_the_page_draws_every_plot_in_headless_chromium(tmp_path: Path) -> None:
    # The page of a synthetic multi-objective campaign (no Ray): Chromium logs nothing, and
    # every plot is drawn with data points and a mark for them; the Pareto plot has the
    # three completed trials and the importances one bar group per rung.
    trials = _mo_trials()
    r = _report(trials, pareto=MO, rung_importances=rung_importances(trials, [1], 2))
    r["pareto"]["front"] = []  # pareto_table's input; the page's table of it
    page = tmp_path / "report.html"
    page.write_text(html_page(r, _figures(r, trials)))
    plots, _, console = plotly_plots(page, tmp_path)
    assert console == []
    assert list(plots)[:2] == ["plot-pareto", "plot-history"]
    for name, plot in plots.items():
        assert plot["drawn"] and plot["points"] > 0 and plot["marks"] > 0, (name, plot)
    assert plots["plot-pareto"]["points"] == 3
