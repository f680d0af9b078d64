"""The report's Pareto section of a multi-objective campaign: its data and its plot.

The plot shows every COMPLETE trial by its first two objectives, the Pareto front
highlighted and joined in the order of the first objective; with three or four objectives
it is the projection on the first two (the front is still computed on all of them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import optuna
from matplotlib.figure import Figure

from tuner.front import cell, front_rows
from tuner.study import TUNE_TRIAL_ID_ATTR

__all__ = ["TITLE", "objectives_of", "pareto_data", "pareto_figure", "pareto_table"]

TITLE = "Pareto front"
_FRONT = "#2a7ab0"
_OTHER = "#a0a0a0"


def objectives_of(campaign: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(metric, mode) of each objective of a campaign file's mapping, primary first."""
    metric, mode = campaign["metric"], campaign["mode"]
    if isinstance(metric, list):
        return [(str(m), str(d)) for m, d in zip(metric, mode, strict=True)]
    return [(str(metric), str(mode))]


def pareto_data(study: optuna.Study, objectives: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The front (as summary.json has it) and every COMPLETE trial's values, JSON-able."""
    metrics = [m for m, _ in objectives]
    maximize = [mode == "max" for _, mode in objectives]
    front = front_rows(study, metrics, maximize)
    on_front = {row["number"] for row in front}
    points = [
        {
            "number": t.number,
            "trial": str(t.user_attrs.get(TUNE_TRIAL_ID_ATTR, "")),
            "values": dict(zip(metrics, t.values, strict=True)),
            "front": t.number in on_front,
        }
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if t.values is not None
        and len(t.values) == len(metrics)
        and all(math.isfinite(v) for v in t.values)
    ]
    return {
        "objectives": [{"metric": m, "mode": d} for m, d in objectives],
        "front": front,
        "points": points,
    }


def _label(objective: Mapping[str, str]) -> str:
    arrow = "higher is better" if objective["mode"] == "max" else "lower is better"
    return f"{objective['metric']} ({arrow})"


def pareto_figure(r: Mapping[str, Any]) -> Figure:
    """Every COMPLETE trial by the first two objectives, the front highlighted."""
    data = r["pareto"]
    x_obj, y_obj = data["objectives"][0], data["objectives"][1]
    x, y = x_obj["metric"], y_obj["metric"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    others = [p for p in data["points"] if not p["front"]]
    if others:
        ax.scatter(
            [p["values"][x] for p in others],
            [p["values"][y] for p in others],
            s=14,
            color=_OTHER,
            label="completed",
        )
    front = sorted(data["front"], key=lambda row: row["values"][x])
    if front:
        xs = [row["values"][x] for row in front]
        ys = [row["values"][y] for row in front]
        ax.plot(xs, ys, color=_FRONT, linewidth=1, alpha=0.6)
        ax.scatter(xs, ys, s=24, color=_FRONT, label=f"Pareto front ({len(front)})", zorder=3)
        for row in front:
            ax.annotate(
                str(row["number"]),
                (row["values"][x], row["values"][y]),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xlabel(_label(x_obj))
    ax.set_ylabel(_label(y_obj))
    if len(data["objectives"]) > 2:
        ax.set_title("projection on the first two objectives", fontsize=8)
    ax.legend(fontsize=7)
    return fig


def pareto_table(r: Mapping[str, Any]) -> list[list[str]]:
    """The front as a table (header row first): trial, each objective, epochs, parameters."""
    data = r["pareto"]
    metrics = [o["metric"] for o in data["objectives"]]
    params = sorted({k for row in data["front"] for k in row["params"]})
    head = ["#", "trial", *metrics, "epochs", *params]
    rows = [
        [
            str(row["number"]),
            row["tune_trial_id"] or "-",
            *(f"{row['values'][m]:.6g}" for m in metrics),
            str(row["epochs"]),
            *(cell(row["params"].get(p), 4) for p in params),
        ]
        for row in data["front"]
    ]
    return [head, *rows]
