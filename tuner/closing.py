"""What ``tuner run`` and ``tuner resume`` print when a campaign ends: the top trials (and the
Pareto front), the failed trials, predicted vs actual, the ledger, the best trial and its
config, and how the campaign ended.

One function, :func:`closing_text`, builds it from the summary the campaign wrote
(``summary.json``) so the driver and the tests print the same text; given a terminal's width
it fits it (:mod:`tuner.terminal`). Pure: no Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner import rundir
from tuner.budget import format_spend
from tuner.cost._reality import format_comparison
from tuner.finish import Status
from tuner.front import format_front
from tuner.spec import CampaignSpec
from tuner.summary import format_failures, format_table
from tuner.terminal import wrap

__all__ = ["closing_text"]


def closing_text(
    spec: CampaignSpec,
    run_dir: Path,
    summary: Mapping[str, Any],
    *,
    cost: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    interrupted: bool = False,
    width: int | None = None,
) -> str:
    """The end-of-run text of a campaign (ends with a newline).

    Args:
        spec: The campaign.
        run_dir: Its run folder.
        summary: Its summary (``summary.json``).
        cost: Predicted vs actual (:func:`tuner.finish.predicted_vs_actual`), if any.
        budget: The budget guard's summary, if any.
        interrupted: Tune's run was interrupted (SIGINT).
        width: The terminal's columns: tables leave out the parameter columns that do not
            fit (and say how to see them), prose is wrapped at word boundaries. None (not a
            terminal): every column, no line wrapped.
    """
    show_all = f"tuner show {run_dir}"
    table = format_table(dict(summary), width=width, show_all=show_all)
    blocks = [f"\n{table}\n"]
    if "pareto_front" in summary:
        front = format_front(summary["pareto_front"], spec.metrics, width=width, show_all=show_all)
        blocks.append(f"{front}\n")
    failures = format_failures(summary)
    if failures:
        blocks.append(f"{failures}\n")
    if cost is not None:
        blocks.append(f"{format_comparison(cost)}\n")
    if budget is not None:
        blocks.append(f"{format_spend(budget)}\n")
    best = summary["best"]
    if best is not None:
        blocks.append(
            f"best {spec.metric}={best['value']:.4f} (trial {best['tune_trial_id']}, "
            f"{best['state']}); config in {run_dir / rundir.BEST_FILE}"
        )
    status = summary["status"]
    if status == Status.BUDGET_EXHAUSTED:
        blocks.append(f"status: {Status.BUDGET_EXHAUSTED} ({budget and budget['exhausted']})")
    if status == Status.FAILURE_LIMIT:
        limit = summary["failure_limit"]
        blocks.append(
            f"status: {Status.FAILURE_LIMIT} ({limit['failed']} trials failed, more than "
            f"failure.max_failed_trials={limit['max_failed_trials']}; "
            f"{summary['trials_finished']} of {spec.budget.trials} trials finished)"
        )
    if status == Status.GOAL_REACHED:
        goal = summary["goal"]
        saved = ""
        if "trial_epochs_saved" in goal:
            saved = f"; about {goal['trial_epochs_saved']:g} trial-epochs"
            saved += f" (${goal['usd_saved']:.2f}) of the prediction not spent"
        blocks.append(f"status: {goal['reached']}{saved}")
    if interrupted:
        blocks.append(f"interrupted; `tuner resume {run_dir}` continues the campaign")
    if status == Status.STOPPED:
        blocks.append(
            f"status: {Status.STOPPED} ({summary['trials_finished']} of {spec.budget.trials} "
            f"trials finished); `tuner resume {run_dir}` continues it"
        )
    return wrap("".join(block + "\n" for block in blocks), width)
