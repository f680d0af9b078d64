"""The report's interactive figures (plotly): Optuna's own plots of the campaign's trials,
and the service's own (importances per rung, spend, predicted against actual, GPU
telemetry, outcomes) drawn from the same collected data as the PNGs of ``report.md``.

Optuna's plots run on an in-memory copy of the campaign's trials (warm-start seeds left
out) with the primary objective as the value and its per-epoch values as intermediate
values, so a multi-objective campaign gets them for its primary objective (and Optuna's
Pareto-front plot for all of them). A figure with no data point is not drawn: it becomes
a note saying why (:func:`figures`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import optuna
import plotly.graph_objects as go
from optuna.trial import FrozenTrial, TrialState
from plotly.subplots import make_subplots

from tuner.front import primary_curve

__all__ = ["Figures", "figures", "points", "trials_view"]

# name -> a figure with data, or the note shown in its place.
Figures = dict[str, "go.Figure | str"]

_TOP_PAIRS = 3
_COMPLETED = "#2a7ab0"
_OFF_SCALE = 0.05  # spend below this share of the budget: the axis shows the spend


def _create(**directions: Any) -> optuna.Study:
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" line
    try:
        return optuna.create_study(**directions)
    finally:
        optuna.logging.set_verbosity(verbosity)


def _state(t: FrozenTrial, n_values: int) -> TrialState:
    """The trial's state, FAIL for a COMPLETE one without finite values (Optuna's rule)."""
    ok = t.values is not None and len(t.values) == n_values
    if t.state == TrialState.COMPLETE and not (ok and all(math.isfinite(v) for v in t.values)):
        return TrialState.FAIL
    return t.state


def _copy(t: FrozenTrial, state: TrialState, **values: Any) -> FrozenTrial:
    return optuna.trial.create_trial(
        state=state,
        params=t.params,
        distributions=t.distributions,
        user_attrs=t.user_attrs,
        intermediate_values={e: v for e, v in primary_curve(t).items() if math.isfinite(v)},
        **(values if state == TrialState.COMPLETE else {}),
    )


def trials_view(trials: Sequence[FrozenTrial], mode: str) -> optuna.Study:
    """A single-objective in-memory study of ``trials`` (the campaign's own): each COMPLETE
    trial valued by its primary objective, every trial's per-epoch values of it as
    intermediate values (a multi-objective study keeps them as user attributes). Trials
    keep their order, so their numbers are the study's where no warm-start seed was left
    out."""
    study = _create(direction="maximize" if mode == "max" else "minimize")
    for t in trials:
        state = _state(t, len(t.values or [None]))
        study.add_trial(_copy(t, state, value=t.values[0] if t.values else None))
    return study


def _pareto_view(trials: Sequence[FrozenTrial], modes: Sequence[str]) -> optuna.Study:
    study = _create(directions=["maximize" if m == "max" else "minimize" for m in modes])
    for t in trials:
        study.add_trial(_copy(t, _state(t, len(modes)), values=t.values))
    return study


def points(fig: go.Figure) -> int:
    """How many data points the figure's traces hold (0: an empty plot)."""
    total = 0
    for trace in fig.data:
        data = trace.to_plotly_json()
        sizes = [len(data[k]) for k in ("x", "y", "z", "values") if data.get(k) is not None]
        sizes += [len(d.get("values") or ()) for d in data.get("dimensions") or ()]
        total += max(sizes, default=0)
    return total


def _flat_contour(fig: go.Figure) -> bool:
    """A contour plot whose surface has a single value: nothing to draw (plotly.js warns)."""
    for trace in fig.data:
        if trace.type == "contour" and trace.z is not None:
            values = {v for row in trace.z for v in row if v is not None and math.isfinite(v)}
            if len(values) < 2:
                return True
    return False


def _layout(fig: go.Figure, height: int = 380) -> go.Figure:
    fig.update_layout(height=height, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def _top_params(r: dict[str, Any], view: optuna.Study) -> list[str]:
    """Parameters by importance at the highest epoch that has importances; else as seen."""
    for rung in reversed(r["rung_importances"]["rungs"]):
        if rung["values"]:
            return list(rung["values"])
    return sorted({p for t in view.get_trials(deepcopy=False) for p in t.params})


def _optuna_figures(r: dict[str, Any], view: optuna.Study) -> dict[str, go.Figure]:
    vis = optuna.visualization
    metric = r["metric"]
    out = {
        "history": vis.plot_optimization_history(view, target_name=metric),
        "intermediate": vis.plot_intermediate_values(view),
        "parallel": vis.plot_parallel_coordinate(view, target_name=metric),
        "slice": vis.plot_slice(view, target_name=metric),
    }
    for rung in r["rungs"]:
        out["intermediate"].add_vline(x=rung, line_dash="dash", line_width=1)
    out["intermediate"].update_layout(title="Intermediate Values Plot (ASHA rungs dashed)")
    out["intermediate"].update_yaxes(title=metric)
    out["intermediate"].update_xaxes(title="epoch")
    top = _top_params(r, view)[:_TOP_PAIRS]
    pairs = [(a, b) for i, a in enumerate(top) for b in top[i + 1 :]][:_TOP_PAIRS]
    for a, b in pairs:
        out[f"contour-{a}-{b}"] = vis.plot_contour(view, params=[a, b], target_name=metric)
    out["slice"].update_layout(width=None)  # Optuna's fixed width overflows the page
    out["edf"] = vis.plot_edf(view, target_name=metric)
    return out


def _importances(r: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    rungs = [rung for rung in r["rung_importances"]["rungs"] if rung["values"]]
    names = list(rungs[-1]["values"]) if rungs else []
    for rung in rungs:
        label = f"epoch {rung['epoch']} ({rung['trials']} trials)"
        fig.add_bar(name=label, x=names, y=[rung["values"].get(n, 0.0) for n in names])
    fig.update_layout(
        title="Importances per rung (fANOVA; every trial that reached the epoch)",
        barmode="group",
        yaxis_title="share of variance",
    )
    return _layout(fig)


def _spend(r: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    series = r["spend"]["series"]
    if series:
        fig.add_scatter(
            x=[s[0] / 60 for s in series], y=[s[1] for s in series], mode="lines", name="spent"
        )
        limit = r["spend"]["limit_usd"]
        if limit is not None:
            fig.add_scatter(
                x=[0, series[-1][0] / 60],
                y=[limit, limit],
                mode="lines",
                name="budget",
                line={"dash": "dash", "color": "#b02a2a"},
            )
    title = "Spend over time"
    limit, spent = r["spend"]["limit_usd"], max((s[1] for s in series), default=0.0)
    if series and limit is not None and 0 < spent < _OFF_SCALE * limit:
        # The budget line would flatten the spend to the axis: zoom on the spend.
        fig.update_yaxes(range=[0, spent * 1.1])
        title += f"<br><sup>budget ${limit:.2f} above the scale: zoom out to see it</sup>"
    fig.update_layout(title=title, xaxis_title="minutes", yaxis_title="USD")
    return _layout(fig)


def _predicted(r: dict[str, Any], rows: list[tuple[str, float | None, float | None]]) -> go.Figure:
    both = [row for row in rows if row[1] is not None and row[2] is not None]
    fig = make_subplots(rows=1, cols=max(1, len(both)), subplot_titles=[n for n, _, _ in both])
    for i, (_, pred, act) in enumerate(both, start=1):
        fig.add_bar(
            x=["predicted", "actual"],
            y=[pred, act],
            marker_color=["#bbbbbb", _COMPLETED],
            showlegend=False,
            row=1,
            col=i,
        )
    fig.update_layout(title="Predicted vs actual")
    return _layout(fig, 320)


def _gpu(r: dict[str, Any]) -> go.Figure:
    gpu = r["gpu"]
    names = list(gpu)
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[gpu[n]["mean_util_pct"] for n in names],
            customdata=[[gpu[n]["peak_mem_gib"], gpu[n]["epochs"]] for n in names],
            hovertemplate="%{x}: %{y:.0f}% GPU, peak %{customdata[0]:.2f} GiB,"
            " %{customdata[1]} epochs<extra></extra>",
            marker_color=_COMPLETED,
        )
    )
    fig.update_layout(title="GPU utilization per trial", yaxis={"range": [0, 100]})
    fig.update_yaxes(title="mean GPU util %")
    return _layout(fig, 320)


def _outcomes(r: dict[str, Any], colors: dict[str, str]) -> go.Figure:
    names = list(r["outcomes"])
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[r["outcomes"][n] for n in names],
            marker_color=[colors.get(n, "#888888") for n in names],
        )
    )
    fig.update_layout(title="Trial outcomes", yaxis_title="trials")
    return _layout(fig, 320)


# Half-width figures in pairs (history beside edf...), the wide ones alone on their row.
_ORDER = (
    "pareto",
    "history",
    "edf",
    "intermediate",
    "importances",
    "parallel",
    "slice",
    "contour",
    "spend",
    "predicted",
    "outcomes",
    "gpu",
)
_EMPTY = {
    "pareto": "no COMPLETE trial with every objective finite",
    "history": "no completed trial",
    "intermediate": "no trial reported a per-epoch value",
    "parallel": "no completed trial",
    "slice": "no completed trial",
    "edf": "no completed trial",
    "contour": "too few completed trials, with different values of both parameters and of "
    "the objective",
    "importances": "too few trials at every rung",
    "spend": "no node in the ledger",
    "predicted": "nothing predicted (no profile)",
    "gpu": "no GPU telemetry (CPU trials)",
    "outcomes": "no trial",
}


def figures(
    r: dict[str, Any],
    trials: Sequence[FrozenTrial],
    *,
    predicted: list[tuple[str, float | None, float | None]],
    colors: dict[str, str],
) -> Figures:
    """The page's figures in order, by name: a figure with data points, or the note that
    takes its place. ``r`` is the collected report, ``trials`` the campaign's own."""
    view = trials_view(trials, r["mode"])
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # "no completed trials" warnings
    try:
        drawn: dict[str, go.Figure] = {}
        if "pareto" in r:
            modes = [o["mode"] for o in r["pareto"]["objectives"]]
            drawn["pareto"] = optuna.visualization.plot_pareto_front(
                _pareto_view(trials, modes),
                target_names=[o["metric"] for o in r["pareto"]["objectives"]],
            )
        drawn.update(_optuna_figures(r, view))
    finally:
        optuna.logging.set_verbosity(verbosity)
    own: dict[str, Callable[[], go.Figure]] = {
        "importances": lambda: _importances(r),
        "spend": lambda: _spend(r),
        "predicted": lambda: _predicted(r, predicted),
        "gpu": lambda: _gpu(r),
        "outcomes": lambda: _outcomes(r, colors),
    }
    drawn.update({name: make() for name, make in own.items()})
    out: Figures = {}
    for name, fig in sorted(drawn.items(), key=lambda item: _ORDER.index(item[0].split("-")[0])):
        if points(fig) and not _flat_contour(fig):
            out[name] = _layout(fig) if name not in own else fig
        else:
            out[name] = _EMPTY.get(name.split("-")[0], "no data")
    return out
