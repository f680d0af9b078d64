"""Renders a collected report as Markdown with matplotlib PNGs (written beside
``report.md``, for places without JavaScript), and the headline and tables that the HTML
page (:mod:`tuner.report._html`) shows too.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from tuner.front import cell
from tuner.report._pareto import TITLE as PARETO_TITLE
from tuner.report._pareto import pareto_figure, pareto_table

COLORS = {
    "completed": "#2a7ab0",
    "pruned": "#a0a0a0",
    "diverged": "#d9822b",
    "oom": "#b02a2a",
    "failed": "#7a1f5c",
    "stopped by budget": "#6a9f3a",
    "orphaned": "#444444",
    "running": "#e0c020",
}

PLOTS = ("history", "curves", "importances", "spend", "predicted", "gpu", "outcomes")
TITLES = {
    "history": "Optimization history",
    "curves": "Learning curves (ASHA rungs dashed)",
    "importances": "Hyperparameter importances per rung",
    "spend": "Spend over time",
    "predicted": "Predicted vs actual",
    "gpu": "GPU utilization per trial",
    "outcomes": "Trial outcomes",
    "pareto": PARETO_TITLE,
}


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _history(r: dict[str, Any]) -> Figure:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for state, color in (("COMPLETE", COLORS["completed"]), ("PRUNED", COLORS["pruned"])):
        pts = [(h["number"], h["value"]) for h in r["history"] if h["state"] == state]
        pts = [p for p in pts if p[1] is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=12, color=color, label=state.lower())
    best = [(h["number"], h["best"]) for h in r["history"] if h["best"] is not None]
    if best:
        ax.step(*zip(*best, strict=True), where="post", color="black", label="best so far")
    ax.set_xlabel("trial number")
    ax.set_ylabel(r["metric"])
    ax.legend(fontsize=7)
    return fig


def _curves(r: dict[str, Any]) -> Figure:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    seen: set[str] = set()
    for curve in r["curves"].values():
        outcome = curve["outcome"]
        ax.plot(
            curve["epochs"],
            curve["values"],
            color=COLORS.get(outcome, "#888888"),
            alpha=0.6,
            lw=1,
            marker="o",
            ms=2,
            label=None if outcome in seen else outcome,
        )
        seen.add(outcome)
    for rung in r["rungs"]:
        ax.axvline(rung, ls="--", color="black", lw=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel(r["metric"])
    if seen:
        ax.legend(fontsize=7)
    return fig


def _importances(r: dict[str, Any]) -> Figure:
    """Grouped bars: one group per parameter, one bar per rung that has importances."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    rungs = [rung for rung in r["rung_importances"]["rungs"] if rung["values"]]
    if rungs:
        names = list(rungs[-1]["values"])
        width = 0.8 / len(rungs)
        for i, rung in enumerate(rungs):
            ax.bar(
                [j + i * width for j in range(len(names))],
                [rung["values"].get(n, 0.0) for n in names],
                width,
                label=f"epoch {rung['epoch']} ({rung['trials']} trials)",
            )
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, fontsize=7)
        ax.set_ylabel("share of variance (fANOVA)")
        ax.legend(fontsize=7)
    else:
        notes = [rung["note"] for rung in r["rung_importances"]["rungs"]]
        ax.text(0.5, 0.5, "\n".join(notes) or "no rung", ha="center", va="center", fontsize=8)
        ax.set_axis_off()
    return fig


def rung_notes(r: dict[str, Any]) -> list[str]:
    """One line per rung: the trials its importances are over, or why it has none."""
    return [f"epoch {rung['epoch']}: {rung['note']}" for rung in r["rung_importances"]["rungs"]]


def _spend(r: dict[str, Any]) -> Figure:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    series = r["spend"]["series"]
    if series:
        ax.plot([s[0] / 60 for s in series], [s[1] for s in series], label="spent")
    if r["spend"]["limit_usd"] is not None:
        ax.axhline(r["spend"]["limit_usd"], color=COLORS["oom"], ls="--", label="budget")
    ax.set_xlabel("minutes")
    ax.set_ylabel("USD")
    ax.legend(fontsize=7)
    return fig


def predicted_rows(r: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    """(quantity, predicted, actual) for the figures ``summary.json`` has."""
    cost = r.get("cost") or {}
    pred, act = cost.get("predicted") or {}, cost.get("actual") or {}
    return [
        ("trial-epochs", pred.get("trial_epochs"), act.get("trial_epochs")),
        ("trial-seconds", pred.get("trial_s"), act.get("trial_s")),
        ("GPU-hours", pred.get("gpu_h"), act.get("gpu_h")),
        ("USD", pred.get("usd"), act.get("usd")),
    ]


def _predicted(r: dict[str, Any]) -> Figure:
    rows = [row for row in predicted_rows(r) if row[1] is not None and row[2] is not None]
    fig, axes = plt.subplots(1, max(1, len(rows)), figsize=(6, 2.8), squeeze=False)
    for ax, (name, pred, act) in zip(axes[0], rows, strict=False):
        ax.bar(["predicted", "actual"], [pred, act], color=["#bbbbbb", COLORS["completed"]])
        ax.set_title(name, fontsize=9)
    if not rows:
        axes[0][0].text(0.5, 0.5, "nothing predicted", ha="center", va="center")
        axes[0][0].set_axis_off()
    return fig


def _gpu(r: dict[str, Any]) -> Figure:
    fig, ax = plt.subplots(figsize=(6, 2.8))
    gpu = r["gpu"]
    if gpu:
        names = list(gpu)
        ax.bar(names, [gpu[n]["mean_util_pct"] for n in names], color=COLORS["completed"])
        ax.set_ylabel("mean GPU util %")
        ax.set_ylim(0, 100)
        ax.tick_params(axis="x", labelrotation=90, labelsize=6)
    else:
        ax.text(0.5, 0.5, "no GPU telemetry (CPU trials)", ha="center", va="center")
        ax.set_axis_off()
    return fig


def _outcomes(r: dict[str, Any]) -> Figure:
    fig, ax = plt.subplots(figsize=(6, 2.6))
    names = list(r["outcomes"])
    ax.bar(names, [r["outcomes"][n] for n in names], color=[COLORS.get(n, "#888") for n in names])
    ax.set_ylabel("trials")
    return fig


_FIGURES: dict[str, Callable[[dict[str, Any]], Figure]] = {
    "history": _history,
    "curves": _curves,
    "importances": _importances,
    "spend": _spend,
    "predicted": _predicted,
    "gpu": _gpu,
    "outcomes": _outcomes,
}


def plot_names(report: dict[str, Any]) -> tuple[str, ...]:
    """The report's plots: ``PLOTS``, and ``pareto`` first for a multi-objective campaign."""
    return ("pareto", *PLOTS) if "pareto" in report else PLOTS


def plots(report: dict[str, Any]) -> dict[str, bytes]:
    """Every plot of the report as PNG bytes, by name (see :func:`plot_names`)."""
    figures = {**_FIGURES, "pareto": pareto_figure}
    return {name: _png(figures[name](report)) for name in plot_names(report)}


def _fmt(value: Any) -> str:
    return cell(value, 4)  # the report's precision


def headline(r: dict[str, Any]) -> list[str]:
    best = r["best"]
    lines = [
        f"Status: {r['status'] or '-'}; {r['trials']} trials, {r['epochs_consumed']} epochs.",
    ]
    if best:
        margin = best["margin_over_second"]
        lines.append(
            f"Best {r['metric']} = {_fmt(best['value'])} (trial {best['trial']}, "
            f"{best['epochs']} epochs"
            + (f", {_fmt(abs(margin))} ahead of the runner-up" if margin is not None else "")
            + ")."
        )
    spend = r["spend"]
    if spend["usd"] is not None:
        limit = f" of ${spend['limit_usd']:.2f}" if spend["limit_usd"] is not None else ""
        lines.append(f"Spent ${spend['usd']:.2f}{limit} ({_fmt(spend['node_hours'])} node-hours).")
    return lines


def _table(head: list[str], rows: list[list[Any]]) -> list[list[str]]:
    return [head, *[[_fmt(c) for c in row] for row in rows]]


def tables(r: dict[str, Any]) -> dict[str, list[list[str]]]:
    """The report's tables (header row first), by name."""
    params = sorted({k for t in r["top"] for k in t["params"]})
    return {
        "best": _table(
            ["parameter", "value"], [[k, v] for k, v in (r["best"] or {}).get("params", {}).items()]
        ),
        "top": _table(
            ["#", "trial", "outcome", r["metric"], "epochs", *params],
            [
                [t["number"], t["trial"], t["outcome"], t["value"], t["epochs"]]
                + [t["params"].get(p) for p in params]
                for t in r["top"]
            ],
        ),
        "outcomes": _table(
            ["outcome", "trials", "reasons"],
            [
                [
                    k,
                    n,
                    "; ".join(f"{why} ({c})" for why, c in r["outcome_reasons"].get(k, {}).items()),
                ]
                for k, n in r["outcomes"].items()
            ],
        ),
        "predicted": _table(["", "predicted", "actual"], [list(row) for row in predicted_rows(r)]),
        **({"pareto": pareto_table(r)} if "pareto" in r else {}),
    }


def markdown(r: dict[str, Any], image_names: dict[str, str]) -> str:
    """The report as Markdown; ``image_names`` maps plot names to their file names."""
    out = [f"# Campaign report: {r['campaign']}", "", *headline(r), ""]
    t = tables(r)
    for title, key in (("Best configuration", "best"), ("Top trials", "top")):
        out += [f"## {title}", "", *_md_table(t[key]), ""]
    for name in plot_names(r):
        out += [f"## {TITLES[name]}", "", f"![{TITLES[name]}]({image_names[name]})", ""]
        if name == "pareto":
            out += [*_md_table(t["pareto"]), ""]
        if name == "outcomes":
            out += [*_md_table(t["outcomes"]), ""]
        if name == "predicted":
            out += [*_md_table(t["predicted"]), ""]
        if name == "importances":
            out += [*(f"- {line}" for line in rung_notes(r)), ""]
    return "\n".join(out)


def _md_table(rows: list[list[str]]) -> list[str]:
    head, *body = rows
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body),
    ]
